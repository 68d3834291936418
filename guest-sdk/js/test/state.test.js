// state over its wasi:keyvalue adapter (src/state/wasi.js), answered by the stand-in bindings
// (testing/keyvalue.js) from an in-memory store with the host's rules (testing/store.js).
import assert from "node:assert/strict";
import { test } from "node:test";
import { fake, internal, sdk, wit } from "../testing/sdk-tests.js";

const { state, StateError, handler, ack } = sdk;
const { MemoryStore } = fake;

const text = (v) => (v === undefined ? undefined : new TextDecoder().decode(v));
const bytes = (s) => new TextEncoder().encode(s);

/** A fresh store granting `default` and `orders` (the SDK keeps its buckets: they follow it). */
function fresh(options = { buckets: ["orders"] }) {
  fake.testReset();
  fake.state.store = new MemoryStore(options);
  return fake.state.store;
}

function throwsState(f, kind, message) {
  let caught;
  assert.throws(f, (e) => {
    caught = e;
    return e instanceof StateError && e.kind === kind && (message === undefined || message.test(e.message));
  });
  return caught;
}

test("before the first call (module top level, run at build time) nothing reaches the host", () => {
  const store = fresh();
  const orders = state.bucket("orders"); // fine: nothing is opened
  assert.throws(() => state.get("k"), /only be used while the host calls the handler, not at module top level/);
  assert.throws(() => orders.set("k", "v"), /not at module top level/);
  assert.deepEqual(store.calls, []);
  handler(() => ack)(wit.info(), []); // the first call
  orders.set("k", "v");
  assert.equal(text(orders.get("k")), "v");
});

test("get, set, delete, exists", () => {
  const store = fresh();
  assert.equal(state.get("a"), undefined);
  assert.equal(state.exists("a"), false);
  state.set("a", new Uint8Array([0, 255]));
  assert.deepEqual([...state.get("a")], [0, 255]);
  assert.ok(state.get("a") instanceof Uint8Array);
  assert.equal(state.exists("a"), true);
  state.set("a", "hé"); // a string as UTF-8
  assert.deepEqual([...state.get("a")], [0x68, 0xc3, 0xa9]);
  state.set("b", new Uint16Array([0x0201]).buffer);
  state.set("c", new DataView(new Uint8Array([9, 8, 7]).buffer, 1, 2));
  assert.deepEqual([[...state.get("b")], [...state.get("c")]], [[1, 2], [8, 7]]);
  state.delete("a");
  state.delete("a"); // nothing there: nothing happens
  assert.equal(state.get("a"), undefined);
  state.set("", "");
  assert.equal(text(state.get("")), "");
  assert.equal(state.exists(""), true);
  assert.deepEqual(store.texts(), { b: "\u0001\u0002", c: "\b\u0007", "": "" });
});

test("wrong types are refused before the host is asked", () => {
  const store = fresh();
  assert.throws(() => state.get(1), /a state key must be a string, got number/);
  assert.throws(() => state.set("a", { x: 1 }), /must be a Uint8Array or a string, got object \(JSON\.stringify/);
  assert.throws(() => state.set("a", 1), TypeError);
  assert.throws(() => state.set("\ud800", "x"), /lone surrogate/);
  assert.throws(() => state.set("a", "\udc00"), /lone surrogate/);
  assert.throws(() => state.getMany("ab"), /keys must be an array/);
  assert.throws(() => state.setMany(["ab"]), /pairs, a Map or an object/);
  assert.throws(() => state.setMany(7), /pairs, a Map or an object/);
  assert.throws(() => state.once("k"), /effect must be a function/);
  assert.throws(() => state.bucket(1), /bucket name must be a string/);
  assert.deepEqual(store.calls, []);
});

test("the limits of keys and values", () => {
  fresh();
  state.set("k".repeat(1024), new Uint8Array(358400)); // at the limits: fine
  assert.equal(state.get("k".repeat(1024)).length, 358400);
  const e = throwsState(() => state.set("k".repeat(1025), "x"), "other", /1025 bytes/);
  assert.equal(e.bucket, "default");
  assert.equal(e.name, "StateError");
  throwsState(() => state.get("é".repeat(513)), "other"); // 1026 bytes of UTF-8
  throwsState(() => state.exists("k".repeat(1025)), "other");
  throwsState(() => state.set("k", new Uint8Array(358401)), "other", /358401 bytes/);
  assert.equal(state.get("k"), undefined);
  throwsState(() => state.setIfAbsent("k", new Uint8Array(358401)), "other");
  throwsState(() => state.setMany([["a", "1"], ["k", new Uint8Array(358401)]]), "other");
  assert.equal(state.get("a"), undefined, "a batch refused as a whole here");
  throwsState(() => state.getMany(["a", "k".repeat(1025)]), "other");
});

test("an unreachable store: every operation throws, nothing is marked", () => {
  const store = fresh();
  state.set("a", "1");
  store.error = "the store is unreachable";
  const orders = state.bucket("orders");
  for (const f of [
    () => state.get("a"), () => state.set("a", "2"), () => state.delete("a"), () => state.exists("a"),
    () => state.increment("n"), () => state.setIfAbsent("a", "2"), () => state.compareAndSet("a", "1", "2"),
    () => state.getMany(["a"]), () => state.setMany([["a", "2"]]), () => state.deleteMany(["a"]),
    () => state.once("o", () => undefined), () => orders.get("a"),
  ]) {
    throwsState(f, "other", /^the store is unreachable$/);
  }
  store.error = undefined;
  assert.equal(text(state.get("a")), "1");
  assert.equal(state.get("o"), undefined);
});

test("counters: made at 0, read as their decimal text; a set value is not one", () => {
  fresh();
  assert.equal(state.increment("n"), 1);
  assert.equal(state.increment("n", 41), 42);
  assert.equal(state.increment("n", 0n), 42);
  assert.equal(text(state.get("n")), "42");
  assert.deepEqual(state.getMany(["n"]).map(text), ["42"]);
  // past 2^53 - 1: a bigint
  assert.equal(state.increment("big", Number.MAX_SAFE_INTEGER), Number.MAX_SAFE_INTEGER);
  assert.equal(state.increment("big"), 9007199254740992n);
  assert.equal(state.increment("max", 18446744073709551615n), 18446744073709551615n);
  throwsState(() => state.increment("max"), "other");
  state.set("s", "5");
  throwsState(() => state.increment("s"), "other", /not a counter/);
  state.set("n", "x"); // set over a counter: a plain value now
  assert.equal(text(state.get("n")), "x");
  state.delete("n");
  assert.equal(state.increment("n", 3), 3);
  assert.throws(() => state.increment("n", -1), RangeError);
  assert.throws(() => state.increment("n", 18446744073709551616n), /2\^64 - 1/);
  assert.throws(() => state.increment("n", 1.5), TypeError);
  assert.throws(() => state.increment("n", "1"), TypeError);
  assert.equal(text(state.get("n")), "3");
});

test("setIfAbsent and compareAndSet", () => {
  fresh();
  assert.equal(state.setIfAbsent("k", "first"), true);
  assert.equal(state.setIfAbsent("k", "second"), false);
  assert.equal(text(state.get("k")), "first");
  assert.equal(state.compareAndSet("none", "", "x"), false, "nothing there: no write");
  assert.equal(state.get("none"), undefined);
  assert.equal(state.compareAndSet("k", "other", "x"), false);
  assert.equal(state.compareAndSet("k", bytes("first"), "third"), true);
  assert.equal(text(state.get("k")), "third");
  state.increment("n", 7);
  assert.equal(state.setIfAbsent("n", "x"), false);
  assert.equal(state.compareAndSet("n", "7", "seven"), true, "a counter compares as its text");
  assert.equal(text(state.get("n")), "seven");
});

test("getMany in the order of the keys; setMany from pairs, a Map or an object; deleteMany", () => {
  const store = fresh();
  state.set("a", "1");
  state.increment("c", 3);
  assert.deepEqual(state.getMany(["c", "b", "a", "a"]).map(text), ["3", undefined, "1", "1"]);
  assert.deepEqual(state.getMany([]), []);
  assert.deepEqual(state.getMany(new Set(["a"])).map(text), ["1"]);
  state.setMany([["d", "4"], ["e", bytes("5")]]);
  state.setMany(new Map([["f", "6"]]));
  state.setMany({ g: "7" });
  assert.deepEqual(store.texts(), { a: "1", c: "3", d: "4", e: "5", f: "6", g: "7" });
  state.deleteMany(["a", "c", "zz"]);
  assert.deepEqual(state.getMany(["a", "d", "c"]).map(text), [undefined, "4", undefined]);
  assert.deepEqual(store.calls.slice(-2).map(([op, b, keys]) => [op, b, keys]), [
    ["deleteMany", "default", ["a", "c", "zz"]],
    ["getMany", "default", ["a", "d", "c"]],
  ]);
});

test("buckets: their own space, opened once on first use and kept; one not granted is refused", () => {
  const store = fresh();
  const orders = state.bucket("orders");
  assert.equal(state.bucket("orders"), orders);
  assert.equal(orders.name, "orders");
  orders.set("k", "in orders");
  orders.get("k");
  state.set("k", "in default");
  assert.equal(text(orders.get("k")), "in orders");
  assert.equal(text(state.bucket("default").get("k")), "in default");
  assert.equal(orders.increment("n", 2), 2);
  assert.equal(orders.setIfAbsent("x", "1"), true);
  assert.equal(orders.compareAndSet("x", "1", "2"), true);
  orders.setMany({ y: "3" });
  assert.deepEqual(orders.getMany(["x", "y", "k"]).map(text), ["2", "3", "in orders"]);
  orders.deleteMany(["x", "y"]);
  orders.delete("k");
  assert.equal(orders.exists("k"), false);
  assert.equal(orders.once("o", () => undefined), true);
  assert.deepEqual(store.texts("orders"), { n: "2", o: "done" });
  assert.equal(store.value("o"), undefined);
  // (the SDK's `orders` may have been opened by an earlier test: it keeps buckets for life)
  assert.ok(store.calls.filter(([op, name]) => op === "open" && name === "orders").length <= 1);
  const audit = state.bucket("audit");
  const e = throwsState(() => audit.get("k"), "access-denied");
  assert.equal(e.bucket, "audit");
  assert.match(e.message, /"audit" is not granted .*\[subscription\.state\]/);
  throwsState(() => audit.set("k", "v"), "access-denied");
  assert.equal(store.calls.filter(([op, name]) => op === "open" && name === "audit").length, 2, "a refusal is not kept");
  // a store that does not grant `orders` (another subscription's): refused there
  fake.state.store = new MemoryStore();
  throwsState(() => orders.get("k"), "access-denied");
});

test("once: runs the effect once and marks the key done", () => {
  const store = fresh();
  const ran = [];
  assert.equal(state.once("booked:1", () => ran.push(1)), true);
  assert.equal(text(state.get("booked:1")), "done");
  assert.equal(state.once("booked:1", () => ran.push(2)), false);
  assert.deepEqual(ran, [1]);
  assert.deepEqual(fake.calls.log, []);
  // any value counts as a mark
  store.put("other", "something");
  store.put("counter", 1n);
  const never = () => assert.fail("the effect ran");
  assert.equal(state.once("other", never), false);
  assert.equal(state.once("counter", never), false);
});

test("once: an effect that throws leaves the key unmarked", () => {
  fresh();
  assert.throws(() => state.once("booked:2", () => {
    throw new Error("carrier down");
  }), /carrier down/);
  assert.equal(state.exists("booked:2"), false);
  assert.equal(state.once("booked:2", () => undefined), true);
});

test("once: a key marked by someone else while the effect ran: a warning", () => {
  const store = fresh();
  assert.equal(state.once("booked:3", () => store.put("booked:3", "done")), true);
  assert.equal(fake.calls.log.length, 1);
  const [[level, line]] = fake.calls.log;
  assert.equal(level, "warn");
  assert.match(line, /"booked:3" \(bucket "default"\) .*may have run twice/);
});

test("once with an async effect: a Promise, marked when it resolves, unmarked when it rejects", async () => {
  fresh();
  const pending = state.once("a", async () => {
    await new Promise((resolve) => setTimeout(resolve, 1));
  });
  assert.ok(pending instanceof Promise);
  assert.equal(state.exists("a"), false, "not before the effect is done");
  assert.equal(await pending, true);
  assert.equal(text(state.get("a")), "done");
  const skipped = state.once("a", async () => assert.fail("the effect ran"));
  assert.ok(skipped instanceof Promise, "an async function gets a Promise either way");
  assert.equal(await skipped, false);
  await assert.rejects(state.once("b", async () => {
    throw new Error("carrier down");
  }), /carrier down/);
  assert.equal(state.exists("b"), false);
  // a plain function returning a Promise: a Promise when it runs
  assert.equal(await state.once("c", () => Promise.resolve(1)), true);
  assert.equal(state.once("c", () => Promise.resolve(1)), false);
});

test("the host's errors by their case", () => {
  const store = fresh({});
  const original = store.open.bind(store);
  store.open = (name) => {
    if (name === "gone") throw fake.storeError("no-such-store");
    return original(name);
  };
  const e = throwsState(() => state.bucket("gone").get("k"), "no-such-store");
  assert.equal(e.bucket, "gone");
  store.error = "throttled";
  throwsState(() => state.compareAndSet("s", "x", "y"), "other", /^throttled$/);
  store.error = undefined;
  // anything else the bindings throw goes on as it is
  store.get = () => {
    throw new RangeError("not a store error");
  };
  assert.throws(() => state.get("k"), RangeError);
});

test("a component built without state says so", () => {
  fresh();
  const { installStore, currentStore } = internal.stateSlot;
  const installed = currentStore();
  installStore(undefined);
  try {
    throwsState(() => state.get("k"), "other", /built without state .*--state/);
    throwsState(() => state.bucket("orders").once("k", () => undefined), "other", /built without state/);
  } finally {
    installStore(installed);
  }
  assert.equal(state.get("k"), undefined);
});

test("StateError", () => {
  const e = new StateError("access-denied", undefined, { bucket: "x" });
  assert.equal(e.kind, "access-denied");
  assert.equal(e.bucket, "x");
  assert.ok(e instanceof Error);
  assert.equal(new StateError("other", "slow").message, "slow");
  assert.match(new StateError("no-such-store").message, /no store/);
  assert.throws(() => new StateError("broken"), TypeError);
  assert.ok(Object.isFrozen(state));
});
