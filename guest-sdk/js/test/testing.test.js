// shardhost/testing as a handler's own tests use it: the stand-in's default answers.
import assert from "node:assert/strict";
import { test } from "node:test";
import "../testing/register.js";

const { handler, ack, publish, seek, HostError, HttpError, log, config, state, StateError } = await import("../src/index.js");
const host = await import("shardhost:handler/host@0.1.2");

test("by default: lines go to stderr (and to calls.log); publish and seek are refused", () => {
  const written = [];
  const write = process.stderr.write;
  process.stderr.write = (chunk) => written.push(String(chunk));
  try {
    handler(() => {
      log.warn("careful");
      console.info("booked", 7);
      return ack;
    })({ stream: "s", shardId: "x", attempt: 1 }, [
      { partitionKey: "k", sequenceNumber: "1", subSequenceNumber: 0, approximateArrivalTimestamp: 0n, data: new Uint8Array() },
    ]);
  } finally {
    process.stderr.write = write;
  }
  assert.deepEqual(written, ["[ warn] careful\n", "[ info] booked 7\n"]);
  assert.deepEqual(host.calls.log, [["warn", "careful"], ["info", "booked 7"]]);
  assert.throws(() => publish("s", "k", "d"), (e) => e instanceof HostError && /not running inside shardhost/.test(e.message));
  assert.throws(() => seek("1"), HostError);
  host.state.publish = () => "4960";
  assert.equal(publish("s", "k", "d"), "4960");
  host.reset();
  assert.deepEqual(host.calls.log, []);
  assert.throws(() => publish("s", "k", "d"), HostError);
});

test("config values: state.config, or the environment", () => {
  host.reset();
  assert.equal(config.get("greeting"), undefined);
  host.state.config = { greeting: "hello" };
  assert.equal(config.get("greeting"), "hello");
  host.reset();
});

test("fetch is the SDK's, answered by state.http; nothing goes over the network", async () => {
  host.reset();
  await assert.rejects(fetch("https://carrier.example/book"), (e) => e instanceof HttpError && /not running inside shardhost/.test(e.message));
  host.state.http = {
    "https://carrier.example/book": (request) => ({ status: 201, headers: { "X-Id": "9" }, body: `booked ${request.text()}` }),
    "https://carrier.example/busy": 503,
    "https://carrier.example/slow": new HttpError("timeout"),
    "https://carrier.example/old": { status: 301, headers: { Location: "/book" } },
  };
  const r = await fetch("https://carrier.example/book", { method: "POST", body: "{}", headers: { "Idempotency-Key": "1" } });
  assert.equal(r.status, 201);
  assert.equal(r.headers.get("x-id"), "9");
  assert.equal(await r.text(), "booked {}");
  assert.equal((await fetch("https://carrier.example/busy")).status, 503);
  await assert.rejects(fetch("https://carrier.example/slow"), (e) => e.kind === "timeout" && e.url === "https://carrier.example/slow");
  await assert.rejects(fetch("https://elsewhere.example/"), (e) => e.kind === "denied" && e.origin === "https://elsewhere.example");
  const moved = await fetch("https://carrier.example/old", { method: "POST", body: "x" });
  assert.equal(moved.url, "https://carrier.example/book");
  assert.equal(await moved.text(), "booked ");
  assert.deepEqual(host.calls.http.map((q) => [q.method, q.url, q.headers.get("idempotency-key")]), [
    ["GET", "https://carrier.example/book", null],
    ["POST", "https://carrier.example/book", "1"],
    ["GET", "https://carrier.example/busy", null],
    ["GET", "https://carrier.example/slow", null],
    ["GET", "https://elsewhere.example/", null],
    ["POST", "https://carrier.example/old", null],
    ["GET", "https://carrier.example/book", null],
  ]);
  host.state.http = () => "yes";
  await assert.rejects(fetch("http://h/"), /answer a status/);
  host.state.http = () => {
    throw new HttpError("connect", undefined, { reason: "refused" });
  };
  await assert.rejects(fetch("http://h/x"), (e) => e.message === "fetch http://h/x: cannot connect: refused");
  host.reset();
});

test("state goes to state.store, a MemoryStore with the host's rules; a new one after reset()", () => {
  host.reset();
  state.set("k", "v");
  assert.equal(host.state.store.text("k"), "v");
  assert.throws(() => state.bucket("orders").get("k"), (e) => e instanceof StateError && e.kind === "access-denied");
  const shared = new host.MemoryStore({ buckets: ["orders"] });
  host.state.store = shared;
  assert.equal(state.get("k"), undefined);
  assert.equal(state.once("booked:1", () => undefined), true);
  state.bucket("orders").set("k", "o");
  host.reset();
  assert.deepEqual(host.state.store.items(), {});
  host.state.store = shared; // the same store again: a second instance, a replay
  assert.equal(state.once("booked:1", () => assert.fail("ran twice")), false);
  assert.deepEqual(shared.texts(), { "booked:1": "done" });
  assert.deepEqual(shared.texts("orders"), { k: "o" });
  shared.error = "throttled";
  assert.throws(() => state.get("k"), (e) => e instanceof StateError && e.kind === "other" && e.message === "throttled");
  host.reset();
});
