// Lets a handler run under Node (unit tests), where there is no shardhost host:
//   node --import shardhost/testing --test
//   node --import <this SDK>/testing/register.js --test    (without shardhost in node_modules)
// The SDK's bindings then resolve to shardhost/testing/host: log lines go to standard error,
// publish and seek fail (as the Rust SDK does in a native build) unless a test says otherwise.
// `shardhost` itself resolves to this SDK, as componentize bundles it (./hooks.js).
import { register } from "node:module";

register("./hooks.js", import.meta.url);
