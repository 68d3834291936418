// The only module that names the generated bindings of the world's `host` and
// `wasi:config/store` imports (src/http/wasi.js names wasi:http's, in components built with
// HTTP). componentize-js resolves these specifiers to the component's imports; the SDK's unit
// tests resolve them to stand-ins (testing/host.js, testing/config.js). Nothing here is public
// API.
export { log, maxLogLevel, publish, seek } from "shardhost:handler/host@0.1.2";
export { get as configGet, getAll as configGetAll } from "wasi:config/store@0.2.0-rc.1";
