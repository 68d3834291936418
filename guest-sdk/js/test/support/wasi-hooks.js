// Resolves the wasi:http bindings src/http/wasi.js imports to ./fake-wasi-http.js (for
// test/wasi-http.test.js).
const FAKE = new URL("./fake-wasi-http.js", import.meta.url).href;

export async function resolve(specifier, context, next) {
  if (/^wasi:(http\/(outgoing-handler|types)|io\/poll)@/.test(specifier)) return { url: FAKE, shortCircuit: true };
  return next(specifier, context);
}
