// Where the store the `state` API works on is installed: by ./install.js (bundled into a
// component built with state, over wasi:keyvalue) or by the Node test hooks (the same adapter
// over a stand-in). A component built without state has none: every operation fails, saying so.
// (Kept apart from ./state.js so that the build tool can tell, by what the bundle keeps of
// state.js, whether an app uses state.)

import { StateError } from "./error.js";

const NO_STATE =
  "this component was built without state (its world does not include `state`): componentize builds with wasi:keyvalue when the app uses `state`, or with --state";

let installed;

/** Installs the store (./wasi.js's adapter). @internal */
export function installStore(store) {
  installed = store;
}

/** The store: what ./wasi.js exports, or one whose every operation fails. @internal */
export function currentStore() {
  return installed ?? absent;
}

const absent = {
  open(name) {
    throw new StateError("other", NO_STATE, { bucket: name });
  },
};
