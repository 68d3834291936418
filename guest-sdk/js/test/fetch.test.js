// The SDK's fetch (src/http/fetch.js) over a scripted transport: requests as the host gets
// them, every fetch of a Promise.all handed over before the first wait, redirects, errors, the
// Response a handler gets, aborts.
import assert from "node:assert/strict";
import { test } from "node:test";
import { sdk } from "../testing/sdk-tests.js";

const { createFetch } = await import("../src/http/fetch.js");
const { HttpError, MAX_REDIRECTS } = sdk;

const decoder = new TextDecoder();

/** A transport answering `answer(request)` (a status, or { status, headers, body }, or an
 * HttpError to throw), whose wait() says `readyAtOnce` are ready at a time; `events` shows the
 * order of starts and waits. */
function scripted(answer, { readyAtOnce = 1 } = {}) {
  const t = {
    events: [],
    sent: [],
    cancelled: [],
    start(request) {
      t.events.push(`start ${request.method} ${request.url.href}`);
      t.sent.push(request);
      return { request };
    },
    wait(tickets) {
      t.events.push(`wait ${tickets.length}`);
      return tickets.map((_, i) => i).slice(0, readyAtOnce);
    },
    finish({ request }) {
      const a = answer(request);
      if (a instanceof Error) throw a;
      if (typeof a === "number") return { status: a, headers: [], body: new Uint8Array(0) };
      const body = typeof a.body === "string" ? new TextEncoder().encode(a.body) : (a.body ?? new Uint8Array(0));
      return { status: a.status, headers: a.headers ?? [], body };
    },
    cancel(ticket) {
      t.cancelled.push(ticket.request.url.href);
    },
  };
  return t;
}

test("a request as the host gets it, and the Response the handler gets", async () => {
  const t = scripted(() => ({ status: 201, headers: [["Content-Type", "application/json"], ["X-Id", "9"]], body: '{"ok":true}' }));
  const fetch = createFetch(t);
  const r = await fetch("https://API.example:8443/book?x=1#frag", {
    method: "post",
    headers: { "Idempotency-Key": "ship-1", "Content-Type": "application/json" },
    body: JSON.stringify({ id: 1 }),
  });
  const sent = t.sent[0];
  assert.equal(sent.method, "POST");
  assert.equal(sent.url.href, "https://api.example:8443/book?x=1#frag");
  assert.deepEqual(sent.headers, [["content-type", "application/json"], ["idempotency-key", "ship-1"]]);
  assert.equal(decoder.decode(sent.body), '{"id":1}');
  assert.ok(r instanceof Response);
  assert.equal(r.status, 201);
  assert.equal(r.ok, true);
  assert.equal(r.headers.get("x-id"), "9");
  assert.equal(r.url, "https://api.example:8443/book?x=1#frag");
  assert.equal(r.redirected, false);
  assert.deepEqual(await r.json(), { ok: true });
});

test("bodies: strings, bytes, form parameters; GET and HEAD have none", async () => {
  const t = scripted(() => 204);
  const fetch = createFetch(t);
  await fetch("http://h/a", { method: "PUT", body: "té" });
  await fetch("http://h/b", { method: "POST", body: new Uint8Array([1, 2]) });
  await fetch("http://h/c", { method: "POST", body: new URLSearchParams({ a: "1 2" }) });
  await fetch(new URL("http://h/d"), { method: "PATCH", body: new Uint16Array([0x0201]).buffer });
  const [a, b, c, d] = t.sent;
  assert.deepEqual([...a.body], [0x74, 0xc3, 0xa9]);
  assert.deepEqual(a.headers, [["content-type", "text/plain;charset=UTF-8"]]);
  assert.deepEqual([[...b.body], b.headers], [[1, 2], []]);
  assert.equal(decoder.decode(c.body), "a=1+2");
  assert.match(c.headers[0][1], /^application\/x-www-form-urlencoded/);
  assert.deepEqual([d.method, [...d.body]], ["PATCH", [1, 2]]);
  await assert.rejects(fetch("http://h/", { body: "x" }), /a GET request cannot have a body/);
  await assert.rejects(fetch("http://h/", { method: "HEAD", body: "x" }), TypeError);
  await assert.rejects(fetch("http://h/", { method: "CONNECT" }), /not allowed/);
  await assert.rejects(fetch("http://h/", { method: "bad method" }), /not a valid method/);
  await assert.rejects(fetch("http://h/", { redirect: "sometimes" }), /redirect is/);
  const r = await fetch("http://h/none");
  assert.equal(r.body, null);
  assert.equal(await r.text(), "");
});

test("a Request as the input", async () => {
  const t = scripted(() => 200);
  const fetch = createFetch(t);
  await fetch(new Request("http://h/r", { method: "POST", body: "b", headers: { "X-A": "1" } }));
  await fetch(new Request("http://h/r", { method: "POST", body: "b" }), { method: "PUT", body: "c" });
  assert.deepEqual(t.sent.map((r) => [r.method, decoder.decode(r.body)]), [["POST", "b"], ["PUT", "c"]]);
  assert.equal(new Headers(t.sent[0].headers).get("x-a"), "1");
});

test("every fetch of a Promise.all is handed over before the first wait", async () => {
  const t = scripted((r) => ({ status: 200, body: r.url.pathname }));
  const fetch = createFetch(t);
  const got = await Promise.all([1, 2, 3, 4].map((i) => fetch(`http://h/${i}`).then((r) => r.text())));
  assert.deepEqual(got, ["/1", "/2", "/3", "/4"]);
  assert.deepEqual(t.events, [
    "start GET http://h/1", "start GET http://h/2", "start GET http://h/3", "start GET http://h/4",
    "wait 4", "wait 3", "wait 2", "wait 1",
  ]);
});

test("a fetch made once another's response arrived joins the next wait", async () => {
  const t = scripted((r) => ({ status: 200, body: r.url.pathname }), { readyAtOnce: 1 });
  const fetch = createFetch(t);
  const chained = fetch("http://h/first").then(() => fetch("http://h/then"));
  const other = fetch("http://h/other");
  await Promise.all([chained, other]);
  // the driver waits again only once the handler's code has run on: /then goes out before it
  assert.deepEqual(t.events, ["start GET http://h/first", "start GET http://h/other", "wait 2", "start GET http://h/then", "wait 2", "wait 1"]);
});

test("redirects: followed, with the Fetch standard's rule for the method and body", async () => {
  const routes = {
    "/a": [301, "/b?x=1"],
    "/b": [302, "c"],
    "/c": [307, "https://other.example/d"],
    "/see": [303, "/echo"],
    "/temp": [307, "/echo"],
    "/perm": [308, "/echo"],
    "/moved": [301, "/echo"],
    "/found": [302, "/echo"],
  };
  const t = scripted((r) => {
    const to = routes[r.url.pathname];
    if (to) return { status: to[0], headers: [["Location", to[1]]] };
    return { status: 200, body: `${r.method} ${decoder.decode(r.body)} ${new Headers(r.headers).get("content-type")}` };
  });
  const fetch = createFetch(t);
  const r = await fetch("http://h/a");
  assert.equal(r.url, "https://other.example/d");
  assert.equal(r.redirected, true);
  assert.deepEqual(t.sent.map((q) => q.url.href), ["http://h/a", "http://h/b?x=1", "http://h/c", "https://other.example/d"]);
  const post = (path) => fetch(`http://h${path}`, { method: "POST", body: "b", headers: { "Content-Type": "text/x" } }).then((x) => x.text());
  assert.equal(await post("/see"), "GET  null");
  assert.equal(await post("/moved"), "GET  null");
  assert.equal(await post("/found"), "GET  null");
  assert.equal(await post("/temp"), "POST b text/x");
  assert.equal(await post("/perm"), "POST b text/x");
  const head = await fetch("http://h/see", { method: "HEAD" });
  assert.equal(t.sent.at(-1).method, "HEAD");
  assert.equal(head.status, 200);
});

test("redirects: manual, error, too many, a bad Location, one without", async () => {
  const t = scripted((r) => {
    if (r.url.pathname === "/loop") return { status: 302, headers: [["location", "/loop"]] };
    if (r.url.pathname === "/ftp") return { status: 302, headers: [["location", "ftp://x/"]] };
    if (r.url.pathname.startsWith("/n")) {
      const n = Number(r.url.pathname.slice(2));
      return n === MAX_REDIRECTS ? 200 : { status: 302, headers: [["location", `/n${n + 1}`]] };
    }
    return 302;
  });
  const fetch = createFetch(t);
  const manual = await fetch("http://h/loop", { redirect: "manual" });
  assert.equal(manual.status, 302);
  assert.equal(manual.headers.get("location"), "/loop");
  await assert.rejects(fetch("http://h/loop", { redirect: "error" }), (e) => e instanceof HttpError && e.kind === "other");
  const before = t.sent.length;
  await assert.rejects(fetch("http://h/loop"), (e) => {
    assert.ok(e instanceof HttpError && e instanceof TypeError);
    assert.equal(e.kind, "too-many-redirects");
    assert.equal(e.message, "fetch http://h/loop: more than 10 redirects");
    return true;
  });
  assert.equal(t.sent.length - before, MAX_REDIRECTS + 1);
  assert.equal((await fetch("http://h/n0")).status, 200);
  await assert.rejects(fetch("http://h/ftp"), (e) => e.kind === "invalid-url" && /only http and https/.test(e.message));
  assert.equal((await fetch("http://h/bare")).status, 302);
});

test("errors: what the transport says, and URLs no request can go to", async () => {
  const t = scripted((r) => new HttpError("denied", r.url.href, { origin: r.url.origin }));
  const fetch = createFetch(t);
  await assert.rejects(fetch("http://127.0.0.1:9/x"), (e) => {
    assert.equal(e.kind, "denied");
    assert.equal(e.origin, "http://127.0.0.1:9");
    assert.equal(e.transient, false);
    assert.equal(e.message, "fetch http://127.0.0.1:9/x: denied: the origin http://127.0.0.1:9 is not in the subscription's [subscription.http] allow");
    return true;
  });
  for (const [url, why] of [
    ["not a url", /not an absolute URL/],
    ["ftp://files.example/", /only http and https/],
    ["https://user:pw@api.example/", /passwords/],
    ["/relative", /not an absolute URL/],
  ]) {
    await assert.rejects(fetch(url), (e) => e instanceof HttpError && e.kind === "invalid-url" && why.test(e.message));
  }
  assert.equal(t.sent.length, 1);
  assert.equal(new HttpError("timeout", "http://h/").transient, true);
  assert.equal(new HttpError("connect", "http://h/", { reason: "connection-refused" }).message, "fetch http://h/: cannot connect: connection-refused");
  assert.match(new HttpError("body-too-large", "http://h/").message, /max_body/);
});

test("a status fetch cannot give is an error; a header the platform refuses is left out", async () => {
  const fetch = createFetch(scripted((r) => (r.url.pathname === "/odd" ? 150 : { status: 200, headers: [["x-ok", "1"], ["bad name", "v"]] })));
  await assert.rejects(fetch("http://h/odd"), /status 150/);
  const r = await fetch("http://h/");
  assert.deepEqual([...r.headers], [["x-ok", "1"]]);
});

test("a transport that fails its wait fails every fetch in flight", async () => {
  const t = scripted(() => 200);
  t.wait = () => {
    throw new Error("poll broke");
  };
  const fetch = createFetch(t);
  const got = await Promise.allSettled([fetch("http://h/1"), fetch("http://h/2")]);
  assert.deepEqual(got.map((g) => g.reason?.message), ["poll broke", "poll broke"]);
  assert.deepEqual(t.cancelled, ["http://h/1", "http://h/2"]);
});

test("an abort signal: before, and while the request is in flight", async () => {
  const t = scripted(() => 200);
  const fetch = createFetch(t, { schedule: () => {} }); // nothing is ever waited for
  const gone = new AbortController();
  gone.abort(new Error("not now"));
  await assert.rejects(fetch("http://h/a", { signal: gone.signal }), /not now/);
  assert.equal(t.sent.length, 0);
  const later = new AbortController();
  const pending = fetch("http://h/b", { signal: later.signal });
  await new Promise((r) => setTimeout(r, 5));
  later.abort();
  await assert.rejects(pending, (e) => e.name === "AbortError");
  assert.deepEqual(t.cancelled, ["http://h/b"]);
});
