// The only module that names the generated bindings of the world `shardhost:handler/handler`.
// componentize-js resolves this specifier to the component's `host` import; the SDK's unit
// tests resolve it to a fake (testing/host.js). Nothing here is public API.
export { log, maxLogLevel, publish, seek } from "shardhost:handler/host@0.1.0";
