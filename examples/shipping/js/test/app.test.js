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
const { state } = await import("shardhost/testing/host");
const { ship } = await import("../app.js");

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
    ['{"id":1,"address":"A","carrier":"dhl","x":' + "[".repeat(2000) + "]".repeat(2000) + "}", ack],
    ['{"id":1,"address":"A","carrier":"\\u0064hl"}', ack],
    ['{"id":1,"address":"A","carrier":"dhl","__proto__":{"x":1}}', ack],
  ];
  for (const [data, want] of cases) assert.equal(ship(record(data)), want, String(data).slice(0, 80));
});

test("where the JavaScript handler answers otherwise (README: the JSON rule)", () => {
  const cases = [
    // json() refuses what serde_json skips in fields the struct does not have
    ['{"id":1,"address":"A","carrier":"dhl","x":1,"x":2}', drop], // Rust: ack
    ['{"id":1,"address":"A","carrier":"dhl","x":"\\ud800"}', drop], // Rust: ack
    ['{"id":1,"address":"A","carrier":"dhl","x":123456789012345678901234567890}', drop], // Rust: ack
    ['{"id":1,"address":"A","carrier":"dhl","x":1e400}', drop], // Rust: ack
    // ids past 2^53 - 1, which a u64 holds and a JavaScript number does not
    [ok("9007199254740992"), drop], // Rust: ack
    [ok("18446744073709551615"), drop], // Rust: ack
    // an integer spelt as a float: serde sees the spelling, JSON.parse does not
    [ok("1.0"), ack], // Rust: drop
    [ok("1e3"), ack], // Rust: drop
  ];
  for (const [data, want] of cases) assert.equal(ship(record(data)), want, data);
});
