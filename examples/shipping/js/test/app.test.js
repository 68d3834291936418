// The shipping handler's outcomes, as the Rust example's tests check them, plus the edge cases
// compared record for record with the Rust build (`shardhost invoke --json`).
// Run: node --test   (in examples/shipping/js; nothing to install)
import assert from "node:assert/strict";
import { test } from "node:test";
// The SDK's test hooks (what `node --import shardhost/testing` loads where the SDK is installed):
// `shardhost` resolves to guest-sdk/js, as guest-sdk/js/componentize bundles it, and the
// bindings to a stand-in host. Evaluated first, so the imports below go through them.
import "../../../../guest-sdk/js/testing/register.js";

const { Record, ack, drop, retry } = await import("shardhost");
const { state, calls } = await import("shardhost/testing/host");
const { ship, handle } = await import("../app.js");

state.echo = false; // the handler's warnings would clutter the test output

const record = (data) => new Record({ partitionKey: "order-1", sequenceNumber: "1", data });

test("outcomes (the Rust example's test)", () => {
  assert.equal(ship(record('{"id":1,"address":"Main St 1","carrier":"dhl"}')), ack);
  assert.equal(ship(record('{"id":2,"address":"","carrier":"ups"}')), drop);
  assert.equal(ship(record('{"id":3,"address":"Elm St 2","carrier":"fedex"}')), retry);
  assert.equal(ship(record("not json")), drop);
});

const ok = (id) => `{"id":${id},"address":"A St 1","carrier":"dhl"}`;
const bytes = (...parts) => new Uint8Array(parts.flatMap((p) => (typeof p === "string" ? [...Buffer.from(p)] : p)));

test("the same outcome as the Rust example", () => {
  const cases = [
    ["", drop],
    [bytes([0xff, 0xfe, 0x00]), drop],
    [bytes('{"id":1,"address":"A', [0xc3, 0x28], '","carrier":"dhl"}'), drop],
    [bytes([0xef, 0xbb, 0xbf], ok(1)), drop], // a byte order mark
    [ok(1) + " \r\n\t", ack],
    [ok(1) + "x", drop],
    [ok(1) + ok(1), drop],
    ['{"id":1,"address":"A","carrier":"dhl","id":2}', drop],
    ['{"id":1,"address":"A","carrier":"dhl","carrier":"fedex"}', drop],
    ['{"\\u0069d":1,"address":"A","carrier":"dhl"}', ack],
    ['{"id":1,"address":"\\ud800","carrier":"dhl"}', drop],
    ['{"id":1,"address":"\\ud83d\\ude00","carrier":"dhl"}', ack],
    [ok("9007199254740991"), ack],
    [ok("-1"), drop],
    [ok("-0"), drop],
    [ok("0"), ack],
    [ok("1.5"), drop],
    [ok('"1"'), drop],
    [ok("null"), drop],
    ['{"address":"A","carrier":"dhl"}', drop],
    ['{"id":1,"address":null,"carrier":"dhl"}', drop],
    ['{"id":1,"address":"A","carrier":{"name":"dhl"}}', drop],
    ['{"id":1,"address":"A","carrier":"DHL"}', retry],
    ['[1,"A","dhl"]', ack],
    ['[1,"A"]', drop],
    ['[1,"A","dhl",4]', drop],
    ['[1,"A","fedex"]', retry],
    ["null", drop],
    ['"x"', drop],
    ['{"id":1,"address":"A","carrier":"dhl","x":' + "[".repeat(2000) + "]".repeat(2000) + "}", drop], // past 128 levels
    ['{"id":1,"address":"A","carrier":"\\u0064hl"}', ack],
    ['{"id":1,"address":"A","carrier":"dhl","__proto__":{"x":1}}', ack],
  ];
  for (const [data, want] of cases) assert.equal(ship(record(data)), want, String(data).slice(0, 80));
});

test("the JSON rule holds for the whole document, as in Rust and Python (guest-sdk/JSON.md)", () => {
  const cases = [
    // what serde_json alone would skip in fields the struct does not have
    ['{"id":1,"address":"A","carrier":"dhl","x":1,"x":2}', drop],
    ['{"id":1,"address":"A","carrier":"dhl","x":{"a":1,"\\u0061":2}}', drop],
    ['{"id":1,"address":"A","carrier":"dhl","x":"\\ud800"}', drop],
    ['{"id":1,"address":"A","carrier":"dhl","x":1e400}', drop],
    ['{"id":1,"address":"A","carrier":"dhl","x":' + "[".repeat(128) + "]".repeat(128) + "}", drop],
    ['{"id":1,"address":"A","carrier":"dhl","x":' + "[".repeat(127) + "]".repeat(127) + "}", ack],
    ['{"id":1,"address":"A","carrier":"dhl","x":123456789012345678901234567890}', ack], // a float
    ['{"id":1,"address":"A","carrier":"dhl","x":1.7976931348623158e308}', ack],
    // ids past 2^53 - 1, which a u64 holds: BigInts
    [ok("9007199254740992"), ack],
    [ok("18446744073709551615"), ack],
    ['[18446744073709551615,"A","dhl"]', ack],
    [ok("18446744073709551616"), drop], // past u64: a float
    // an integer spelt as a float: serde sees the spelling, and so does integer()
    [ok("1.0"), drop],
    [ok("1e3"), drop],
    ['[1.0,"A","dhl"]', drop],
  ];
  for (const [data, want] of cases) assert.equal(ship(record(data)), want, data);
});

test("big ids are logged as they were written", () => {
  const info = { stream: "s", shardId: "shardId-000000000000", millisBehindLatest: undefined, attempt: 1 };
  const data = new TextEncoder().encode(ok("18446744073709551615"));
  handle(info, [{ partitionKey: "k", sequenceNumber: "1", subSequenceNumber: 0, approximateArrivalTimestamp: 0n, data }]);
  assert.match(calls.log.at(-1)?.[1] ?? "", /shipment booked: id=18446744073709551615 carrier=dhl$/);
});

// Booking (README of tests/conformance, "Booking"): with carrier_url, through the SDK's fetch,
// answered here by the carrier stub of the conformance suite.
const { retryAfter, HttpError } = await import("shardhost");
const { reset, MemoryStore } = await import("shardhost/testing/host");
const CARRIER = "https://carrier.example/shipments";

function carrier(request) {
  if (!request.headers.get("idempotency-key")) return 400;
  const address = JSON.parse(request.text()).address ?? "";
  return address.includes("nowhere") ? 422 : address.includes("busy") ? 503 : 201;
}

/** The outcome of one record with carrier_url set (and the log lines it wrote); `store`: the
 * state, shared by several calls (by default a new one). */
async function book(data, answer = carrier, attempt = 1, store = undefined) {
  reset();
  state.echo = false;
  state.config = { carrier_url: CARRIER };
  state.http = { [CARRIER]: answer };
  if (store !== undefined) state.store = store;
  const out = await handle({ stream: "shipments", shardId: "shardId-0", millisBehindLatest: undefined, attempt }, [
    { partitionKey: "order-1", sequenceNumber: "1", subSequenceNumber: 0, approximateArrivalTimestamp: 0n, data: new TextEncoder().encode(data) },
  ]);
  const lines = calls.log.slice();
  reset();
  state.echo = false;
  return [out.val[0], lines];
}

const wire = (o) => (o.kind === "retryAfter" ? { tag: "retry-after", val: BigInt(o.delayMs) } : { tag: o.kind });

test("booking: the conformance cases", async () => {
  const { readFileSync } = await import("node:fs");
  const cases = readFileSync(new URL("../../../../tests/conformance/shipping-booked.ndjson", import.meta.url), "utf8")
    .split("\n").filter(Boolean).map((l) => JSON.parse(l));
  // In file order on one store, as the host's conformance run does: a shipment booked by an
  // earlier case is skipped by a later one.
  const store = new MemoryStore();
  for (const c of cases) {
    const want = c.expect.startsWith("retry-after:") ? retryAfter(Number(c.expect.split(":")[1])) : { ack, drop, retry }[c.expect];
    assert.deepEqual((await book(JSON.stringify(c.data), carrier, 1, store))[0], wire(want), c.why);
  }
});

test("booking: what the carrier gets", async () => {
  const data = '{"id":42,"address":"Main St 1","carrier":"dhl"}';
  const [outcome, lines] = await book(data, (request) => {
    assert.equal(request.method, "POST");
    assert.equal(request.url, CARRIER);
    assert.equal(request.text(), data);
    assert.equal(request.headers.get("content-type"), "application/json");
    assert.equal(request.headers.get("idempotency-key"), "42");
    return 201;
  });
  assert.deepEqual(outcome, { tag: "ack" });
  assert.deepEqual(lines, [["info", "shipment booked: id=42 carrier=dhl status=201"]]);
});

test("booking: backoff doubles with the attempt, up to a minute; failures and odd statuses", async () => {
  for (const [attempt, delay] of [[1, 1000], [2, 2000], [3, 4000], [6, 32000], [7, 60000], [30, 60000]]) {
    assert.deepEqual((await book(ok(1), 503, attempt))[0], wire(retryAfter(delay)), `attempt ${attempt}`);
  }
  for (const error of [new HttpError("timeout"), new HttpError("connect"), new HttpError("body-too-large"), 302]) {
    assert.deepEqual((await book(ok(1), error))[0], wire(retryAfter(1000)), String(error));
  }
  assert.deepEqual((await book(ok(1), 409))[0], { tag: "drop" });
  const [held, lines] = await book(ok(1), new HttpError("denied"));
  assert.deepEqual(held, { tag: "retry" });
  assert.equal(lines[0][0], "error");
  assert.match(lines[0][1], /\[subscription\.http\] allow/);
});

test("booking: an empty carrier_url books nothing and touches no state", () => {
  reset();
  state.echo = false;
  state.config = { carrier_url: "" };
  state.http = () => 500;
  assert.equal(ship(record(ok(1))), ack);
  assert.equal(calls.http.length, 0);
  assert.deepEqual(state.store.calls, []);
  reset();
  state.echo = false;
});

// A booking goes through state.once(`booked:<id>`, ...).
const shipment42 = '{"id":42,"address":"Main St 1","carrier":"dhl"}';

/** The carrier stub, counting what it was sent. */
function counting() {
  const sent = [];
  const answer = (request) => {
    sent.push(request.headers.get("idempotency-key"));
    return carrier(request);
  };
  return [answer, sent];
}

test("once: a second booking of the same shipment is skipped", async () => {
  const store = new MemoryStore();
  const [answer, sent] = counting();
  assert.deepEqual((await book(shipment42, answer, 1, store))[0], { tag: "ack" });
  assert.equal(store.text("booked:42"), "done");
  // the same shipment again: a replay, or another record of it (another instance: the same store)
  const [outcome, lines] = await book('{"id":42,"address":"Elm St 2","carrier":"dhl"}', answer, 1, store);
  assert.deepEqual(outcome, { tag: "ack" });
  assert.deepEqual(lines, [["info", "shipment already booked, skipped: id=42"]]);
  assert.deepEqual(sent, ["42"]);
  // another shipment is booked
  assert.deepEqual((await book(ok(43), answer, 1, store))[0], { tag: "ack" });
  assert.deepEqual(sent, ["42", "43"]);
  assert.deepEqual(store.texts(), { "booked:42": "done", "booked:43": "done" });
});

test("once: only a booking marks the shipment", async () => {
  const store = new MemoryStore();
  for (const [answer, want] of [[503, wire(retryAfter(1000))], [new HttpError("timeout"), wire(retryAfter(1000))],
    [new HttpError("denied"), { tag: "retry" }], [422, { tag: "drop" }]]) {
    assert.deepEqual((await book(ok(1), answer, 1, store))[0], want, String(answer));
    assert.deepEqual(store.items(), {}, String(answer));
  }
  const [answer, sent] = counting();
  assert.deepEqual((await book(ok(1), answer, 1, store))[0], { tag: "ack" }); // booked at last
  assert.deepEqual(sent, ["1"]);
  assert.deepEqual(store.texts(), { "booked:1": "done" });
});

test("once: a store out of reach tries again later; nothing is sent before the state is read", async () => {
  const store = new MemoryStore({ error: "throttled" });
  const [answer, sent] = counting();
  let lines;
  for (const [attempt, delay] of [[1, 1000], [3, 4000], [9, 60000]]) {
    let outcome;
    [outcome, lines] = await book(ok(7), answer, attempt, store);
    assert.deepEqual(outcome, wire(retryAfter(delay)), `attempt ${attempt}`);
  }
  assert.deepEqual(sent, []);
  assert.deepEqual(lines, [["warn", "the state of shipment 7 is out of reach (other: throttled): again in 60000 ms"]]);
});

test("once: booked, then the mark fails: tried again with the same Idempotency-Key", async () => {
  const store = new MemoryStore();
  const [answer, sent] = counting();
  const bookedThenTheStoreFails = (request) => {
    store.error = "throttled";
    return answer(request);
  };
  assert.deepEqual((await book(ok(8), bookedThenTheStoreFails, 1, store))[0], wire(retryAfter(1000)));
  store.error = undefined;
  assert.deepEqual((await book(ok(8), answer, 1, store))[0], { tag: "ack" });
  assert.deepEqual(sent, ["8", "8"]);
});
