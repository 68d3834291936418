import assert from "node:assert/strict";
import { test } from "node:test";
import { fake, internal, sdk, wit } from "../testing/sdk-tests.js";

const { log, handler, ack } = sdk;
const { format } = internal.log;
const call = (fn) => handler(fn)(wit.info(), wit.records(["x"]));

// This file's order matters: the first test runs before the SDK's first call.
test("lines logged before the first call (module top level) go out at the first call", () => {
  fake.testReset();
  console.warn("early %s", "bird");
  log.trace("early trace");
  assert.deepEqual(fake.calls.log, []);
  fake.state.maxLevel = "debug";
  call(() => ack);
  assert.deepEqual(fake.calls.log, [["warn", "(at start-up) early bird"]]);
});

test("console goes to the host's log at the mapped levels", () => {
  fake.testReset();
  call(() => {
    console.trace("t");
    console.debug("d");
    console.log("l");
    console.info("i");
    console.warn("w");
    console.error("e");
    console.dir({ a: 1 });
    console.assert(1 === 1, "fine");
    console.assert(false, "broken", 3);
    return ack;
  });
  // the host said "debug" at the first call: trace lines are not sent
  assert.deepEqual(fake.calls.log, [
    ["debug", "d"],
    ["info", "l"],
    ["info", "i"],
    ["warn", "w"],
    ["error", "e"],
    ["info", '{"a":1}'],
    ["error", "Assertion failed: broken 3"],
  ]);
});

test("the host's max-log-level is asked on the first call and every 64th after it", () => {
  // calls so far in this file: 2
  fake.testReset();
  fake.state.maxLevel = "warn";
  for (let i = 2; i < 64; i++) call(() => ack);
  assert.equal(fake.calls.maxLogLevel, 0);
  call(() => {
    log.info("dropped");
    console.log("dropped");
    log.warn("kept");
    return ack;
  }); // call 65: asks
  assert.equal(fake.calls.maxLogLevel, 1);
  assert.deepEqual(fake.calls.log, [["warn", "kept"]]);
  assert.ok(log.enabled("error") && log.enabled("warn") && !log.enabled("info"));
});

test("nothing is formatted or sent when the host records nothing", () => {
  fake.testReset();
  fake.state.maxLevel = undefined;
  for (let i = 65; i < 129; i++) call(() => ack); // the 129th call asks again
  let formatted = false;
  const costly = { toJSON: () => ((formatted = true), "x") };
  call(() => {
    log.error("no", costly);
    return ack;
  });
  assert.equal(fake.calls.maxLogLevel, 1);
  assert.deepEqual(fake.calls.log, []);
  assert.equal(formatted, false);
  assert.ok(!log.enabled("error"));
});

test("log.at and unknown levels", () => {
  fake.testReset();
  fake.state.maxLevel = "trace";
  for (let i = 129; i < 193; i++) call(() => ack);
  call(() => {
    log.at("debug", "via at");
    return ack;
  });
  assert.deepEqual(fake.calls.log, [["debug", "via at"]]);
  assert.throws(() => log.at("fatal", "x"), /unknown level "fatal"/);
});

test("format: like console.log", () => {
  assert.equal(format([]), "");
  assert.equal(format(["a", "b", 1, true, null, undefined]), "a b 1 true null undefined");
  assert.equal(format(["%s=%d (%i) %f %j %o %O %% %c|", "x", 4.5, 4.5, "2.5", [1], { a: 1 }, "s", "css"]), 'x=4.5 (4) 2.5 [1] {"a":1} s % |');
  assert.equal(format(["%s and %s", "one"]), "one and %s");
  assert.equal(format(["id=%d", 5n]), "id=5n");
  assert.equal(format([{ big: 5n, u: undefined, f() {}, m: new Map([["k", 1]]), s: new Set([2]) }]), '{"big":"5n","f":"[Function f]","m":{"Map":{"k":1}},"s":{"Set":[2]}}');
  assert.equal(format([new Uint8Array([1, 2, 3])]), '"Uint8Array(3) [1, 2, 3]"');
  const cyclic = { name: "c" };
  cyclic.self = cyclic;
  assert.equal(format([cyclic]), '{"name":"c","self":"[Circular]"}');
  assert.equal(format([Symbol("s"), 7n, () => 1]), "Symbol(s) 7n [Function (anonymous)]");
  const r = new sdk.Record({ partitionKey: "k", sequenceNumber: "1", data: "d" });
  assert.equal(format(["record", r]), 'record {"partitionKey":"k","sequenceNumber":"1","subSequenceNumber":0,"arrivalMillis":0,"attempt":1,"data":"d"}');
  const e = new Error("boom", { cause: new TypeError("inner") });
  const text = format([e]);
  assert.ok(text.startsWith("Error: boom\n"), text);
  assert.ok(text.includes("Caused by: TypeError: inner"), text);
});

test("a lone surrogate in a line becomes U+FFFD", () => {
  fake.testReset();
  call(() => {
    log.info("bad \ud800 line");
    return ack;
  });
  assert.deepEqual(fake.calls.log, [["info", "bad \ufffd line"]]);
});
