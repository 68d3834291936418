// Installs the SDK's fetch, over wasi:http, as the global `fetch` of a component. The build
// tool (componentize) bundles this module in, for a world that includes `http`, when the app
// calls fetch (or with --http); components built without HTTP do not contain it.

import { createFetch } from "./fetch.js";
import * as wasi from "./wasi.js";
import { isLive } from "../log.js";

const fetchOverWasi = createFetch(wasi);

globalThis.fetch = function fetchOverHost(input, init) {
  if (!isLive()) {
    // Module top level runs once, when componentize-js builds the component (a snapshot).
    return Promise.reject(
      new Error("fetch can only be called while the host calls the handler, not at module top level (it runs when the component is built)"),
    );
  }
  return fetchOverWasi(input, init);
};
