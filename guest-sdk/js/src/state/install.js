// Installs the store of the `state` API over wasi:keyvalue. The build tool (componentize)
// bundles this module in, for a world that includes `state`, when the app
// uses `state` (or with --state); components built without state do not contain it, nor the
// wasi:keyvalue imports of ./wasi.js.

import * as wasi from "./wasi.js";
import { installStore } from "./slot.js";

installStore(wasi);
