// Module resolve hooks (registered by ./register.js):
// - the generated bindings' specifiers resolve to stand-ins: the world's `host` interface to
//   ./host.js, wasi:config/store to ./config.js, wasi:keyvalue and the `conditional` interface to
//   ./keyvalue.js;
// - `shardhost` and `shardhost/...` resolve to this SDK (by the package's self-reference, so
//   through its "exports"), as the build tool (componentize) bundles it: a handler's tests need
//   no package.json or node_modules for the SDK.
const HOST = new URL("./host.js", import.meta.url).href;
const CONFIG = new URL("./config.js", import.meta.url).href;
const KEYVALUE = new URL("./keyvalue.js", import.meta.url).href;

export async function resolve(specifier, context, next) {
  if (specifier.startsWith("shardhost:handler/host@")) return { url: HOST, shortCircuit: true };
  if (specifier.startsWith("wasi:config/store@")) return { url: CONFIG, shortCircuit: true };
  if (/^wasi:keyvalue\/(store|atomics|batch)@/.test(specifier) || specifier.startsWith("shardhost:handler/conditional@")) {
    return { url: KEYVALUE, shortCircuit: true };
  }
  if (specifier === "shardhost" || specifier.startsWith("shardhost/")) {
    return next(specifier, { ...context, parentURL: import.meta.url });
  }
  return next(specifier, context);
}
