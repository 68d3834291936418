// Lets a handler run under Node (unit tests), where there is no shardhost host:
//   node --import shardhost/testing --test
//   node --import <this SDK>/testing/register.js --test    (without shardhost in node_modules)
// The SDK's bindings then resolve to shardhost/testing/host: log lines go to standard error,
// publish, seek and fetch fail (as the Rust SDK does in a native build) and config values come
// from the environment, unless a test says otherwise (its `state`). `shardhost` itself
// resolves to this SDK, as componentize bundles it (./hooks.js). The global `fetch` is the
// SDK's, answered by `state.http` (./http.js): a handler's tests send nothing over the network.
// The SDK's `state` goes, through its wasi:keyvalue adapter, to an in-memory store with the
// host's rules (`state.store`, ./store.js).
import { register } from "node:module";

register("./hooks.js", import.meta.url);

const { underTest } = await import("../src/log.js");
underTest();
const { createFetch } = await import("../src/http/fetch.js");
globalThis.fetch = createFetch(await import("./http.js"));
await import("../src/state/install.js");
