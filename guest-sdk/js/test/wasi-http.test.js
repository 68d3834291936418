// The SDK's fetch over its wasi:http transport (src/http/wasi.js), against strict stand-ins of
// the bindings (test/support/fake-wasi-http.js): requests as the host gets them, every
// resource released children first, the host's error codes as HttpError kinds.
import assert from "node:assert/strict";
import { register } from "node:module";
import { afterEach, test } from "node:test";
import { sdk } from "../testing/sdk-tests.js";

register("./support/wasi-hooks.js", import.meta.url);
const { server } = await import("./support/fake-wasi-http.js");
const wasi = await import("../src/http/wasi.js");
const { createFetch } = await import("../src/http/fetch.js");
const { HttpError } = sdk;

const fetch = createFetch(wasi);
const enc = new TextEncoder();
const dec = new TextDecoder();

afterEach(() => {
  assert.equal(server.live.size, 0, `every resource released: ${[...server.live].map((r) => r.constructor.name)}`);
  server.reset();
  server.answer = () => ({ status: 200, headers: [], chunks: [] });
});

test("a request as the host gets it; the response whole", async () => {
  server.answer = () => ({ status: 201, headers: [["content-type", enc.encode("text/plain")], ["x-l", new Uint8Array([0xe9])]], chunks: [enc.encode("do"), enc.encode("ne")] });
  const r = await fetch("https://api.example:8443/book?x=1", { method: "POST", headers: { "Idempotency-Key": "7" }, body: "{}" });
  const sent = server.sent[0];
  assert.deepEqual(sent.method, { tag: "post" });
  assert.equal(sent.url, "https://api.example:8443/book?x=1");
  assert.deepEqual(sent.headers.map(([n, v]) => [n, dec.decode(v)]), [["idempotency-key", "7"], ["content-type", "text/plain;charset=UTF-8"], ["content-length", "2"]]);
  assert.equal(dec.decode(sent.written), "{}");
  assert.equal(sent.finished, true);
  assert.equal(r.status, 201);
  assert.equal(await r.text(), "done");
  assert.equal(r.headers.get("x-l"), "\u00e9");
  await fetch("http://h/", { method: "PROPFIND" });
  assert.deepEqual(server.sent[1].method, { tag: "other", val: "PROPFIND" });
  assert.equal(server.sent[1].url, "http://h/");
  assert.deepEqual(server.sent[1].headers, []);
  await fetch("http://h/", { method: "POST" });
  await fetch("http://h/", { method: "DELETE", body: "xy" });
  await fetch("http://h/", { method: "PUT", headers: { "Content-Length": "0" } });
  assert.deepEqual(server.sent.slice(2).map((r) => r.headers.map(([n, v]) => `${n}: ${dec.decode(v)}`)), [
    ["content-length: 0"], ["content-type: text/plain;charset=UTF-8", "content-length: 2"], ["content-length: 0"]]);
});

test("large bodies go out in writes of 4096 bytes and come back whole", async () => {
  const big = new Uint8Array(150000).map((_, i) => i % 251);
  server.answer = () => ({ status: 200, chunks: [big.subarray(0, 100000), big.subarray(100000)] });
  const r = await fetch("http://h/up", { method: "PUT", body: big });
  assert.deepEqual(server.sent[0].written, big);
  assert.deepEqual(new Uint8Array(await r.arrayBuffer()), big);
});

test("every fetch of a Promise.all goes out before the first poll", async () => {
  server.answer = (q) => ({ status: Number(q.pathWithQuery.slice(1)) });
  const got = await Promise.all([200, 201, 202, 203].map((s) => fetch(`http://h/${s}`).then((r) => r.status)));
  assert.deepEqual(got, [200, 201, 202, 203]);
  assert.deepEqual(server.events.filter((e) => !e.startsWith("response")), [
    "send get http://h/200", "send get http://h/201", "send get http://h/202", "send get http://h/203",
    "poll 4", "poll 3", "poll 2", "poll 1",
  ]);
});

test("the host's error codes as HttpError kinds", async () => {
  const codes = {
    "/denied": { error: { tag: "HTTP-request-denied" } },
    "/refused": { error: { tag: "connection-refused" } },
    "/dns": { error: { tag: "DNS-error", val: { rcode: "NXDOMAIN", infoCode: undefined } } },
    "/tls": { error: { tag: "TLS-certificate-error" } },
    "/slow": { error: { tag: "HTTP-response-timeout" } },
    "/connect-slow": { error: { tag: "connection-timeout" } },
    "/limit": { error: { tag: "connection-limit-reached" } },
    "/big": { error: { tag: "HTTP-response-body-size", val: 70000n } },
    "/stall": { status: 200, chunks: [enc.encode("x")], end: { tag: "connection-read-timeout" } },
    "/huge": { status: 200, chunks: [enc.encode("x")], end: { tag: "HTTP-response-body-size", val: undefined } },
    "/broken": { status: 200, chunks: [], end: { tag: "HTTP-protocol-error" } },
    "/odd": { error: { tag: "internal-error", val: "boom" } },
    "/refuse": { refuse: { tag: "HTTP-request-URI-invalid" } },
    "/cut": { status: 200, chunks: [enc.encode("x")], end: "connection reset" },
  };
  server.answer = (r) => codes[r.pathWithQuery];
  const paths = Object.keys(codes);
  const got = await Promise.allSettled(paths.map((p) => fetch(`http://127.0.0.1:9${p}`, { method: "POST", body: "b" }).then((r) => r.text())));
  const kinds = Object.fromEntries(paths.map((p, i) => [p, got[i].reason instanceof HttpError ? got[i].reason.kind : got[i].status]));
  assert.deepEqual(kinds, {
    "/denied": "denied", "/refused": "connect", "/dns": "connect", "/tls": "connect", "/slow": "timeout",
    "/connect-slow": "timeout", "/limit": "connect", "/big": "body-too-large", "/stall": "timeout",
    "/huge": "body-too-large", "/broken": "other", "/odd": "other", "/refuse": "other", "/cut": "other",
  });
  assert.equal(got[13].reason.message, "fetch http://127.0.0.1:9/cut: the response body broke off: connection reset");
  const denied = got[0].reason;
  assert.equal(denied.origin, "http://127.0.0.1:9");
  assert.equal(denied.message, "fetch http://127.0.0.1:9/denied: denied: the origin http://127.0.0.1:9 is not in the subscription's [subscription.http] allow");
  assert.equal(got[2].reason.message, 'fetch http://127.0.0.1:9/dns: cannot connect: DNS-error({"rcode":"NXDOMAIN"})');
  assert.equal(got[11].reason.message, 'fetch http://127.0.0.1:9/odd: internal-error("boom")');
});

test("redirects are new requests, through the host", async () => {
  server.answer = (r) => (r.pathWithQuery === "/r" ? { status: 303, headers: [["location", enc.encode("/to")]] } : { status: 200, chunks: [enc.encode(`${r.method.tag} ${dec.decode(r.written)}`)] });
  const r = await fetch("http://h/r", { method: "POST", body: "x" });
  assert.equal(await r.text(), "get ");
  assert.equal(r.url, "http://h/to");
  assert.deepEqual(server.sent.map((q) => q.url), ["http://h/r", "http://h/to"]);
});

test("a header the host refuses is an error before anything is sent", async () => {
  await assert.rejects(fetch("http://h/", { headers: { Host: "x" } }), (e) => e.kind === "other" && /a header the host refuses: forbidden/.test(e.message));
  assert.equal(server.sent.length, 0);
});
