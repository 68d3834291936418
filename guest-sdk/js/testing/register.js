// Lets a handler run under Node (unit tests), where there is no shardhost host:
//   node --import shardhost/testing --test
// The SDK's bindings then resolve to shardhost/testing/host: log lines go to standard error,
// publish and seek fail (as the Rust SDK does in a native build) unless a test says otherwise.
import { register } from "node:module";

register("./hooks.js", import.meta.url);
