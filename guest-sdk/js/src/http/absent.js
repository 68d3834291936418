// The global `fetch` of a component built without HTTP (its world does not include `http`): it
// rejects, saying how to build with HTTP. The build tool (componentize) bundles this module in
// when the app does not call fetch (and with --no-http); see ./install.js for the other case.
// (Nothing here may look like a call of fetch: the build tool looks for one in the bundle.)

import { HttpError } from "./error.js";

function withoutHttp(input) {
  return Promise.reject(
    new HttpError("other", input instanceof URL ? input.href : typeof input === "string" ? input : input?.url, {
      reason:
        "this component was built without HTTP (its world does not include `http`): componentize builds with wasi:http when the app calls fetch, or with --http",
    }),
  );
}

globalThis.fetch = withoutHttp;
