// A module resolve hook: the generated bindings' specifier resolves to the stand-in host.
const HOST = new URL("./host.js", import.meta.url).href;

export async function resolve(specifier, context, next) {
  if (specifier === "shardhost:handler/host@0.1.0") return { url: HOST, shortCircuit: true };
  return next(specifier, context);
}
