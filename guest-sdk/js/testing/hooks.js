// Module resolve hooks (registered by ./register.js):
// - the generated bindings' specifier resolves to the stand-in host;
// - `shardhost` and `shardhost/...` resolve to this SDK (by the package's self-reference, so
//   through its "exports"), as the build tool (componentize) bundles it: a handler's tests need
//   no package.json or node_modules for the SDK.
const HOST = new URL("./host.js", import.meta.url).href;

export async function resolve(specifier, context, next) {
  if (specifier === "shardhost:handler/host@0.1.0") return { url: HOST, shortCircuit: true };
  if (specifier === "shardhost" || specifier.startsWith("shardhost/")) {
    return next(specifier, { ...context, parentURL: import.meta.url });
  }
  return next(specifier, context);
}
