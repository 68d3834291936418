import assert from "node:assert/strict";
import { test } from "node:test";
import { fake, sdk, wit } from "../testing/sdk-tests.js";

const { publish, seek, HostError, handler, ack } = sdk;

test("before the first call (module top level, run at build time) the host is not called", () => {
  assert.throws(() => publish("s", "k", "d"), /only be called while the host calls the handler, not at module top level/);
  assert.throws(() => seek("1"), /not at module top level/);
  assert.equal(fake.calls.publish.length + fake.calls.seek.length, 0);
  handler(() => ack)(wit.info(), []); // the first call
});

test("publish: bytes, strings as UTF-8, views; answers the sequence number", () => {
  fake.testReset();
  assert.equal(publish("invoices", "k", new Uint8Array([1, 2])), "seq-invoices");
  publish("s", "k", "hé");
  publish("s", "k", new Uint16Array([0x0201]).buffer);
  publish("s", "k", new DataView(new Uint8Array([9, 8, 7]).buffer, 1, 2));
  const sent = fake.calls.publish.map(([s, k, d]) => [s, k, d instanceof Uint8Array, [...d]]);
  assert.deepEqual(sent, [
    ["invoices", "k", true, [1, 2]],
    ["s", "k", true, [0x68, 0xc3, 0xa9]],
    ["s", "k", true, [1, 2]],
    ["s", "k", true, [8, 7]],
  ]);
});

test("publish: the host's refusal is a HostError with its reason", () => {
  fake.testReset();
  fake.state.publish = (stream) => {
    throw fake.hostError(`publish to \`${stream}\` refused: this handler may not publish`);
  };
  assert.throws(() => publish("x", "k", "d"), (e) => {
    assert.ok(e instanceof HostError);
    assert.equal(e.name, "HostError");
    assert.equal(e.message, "publish to `x` refused: this handler may not publish");
    return true;
  });
});

test("publish: arguments are checked before the host is called", () => {
  fake.testReset();
  assert.throws(() => publish("s", "k", { a: 1 }), /JSON.stringify an object first/);
  assert.throws(() => publish("s", "k", 5), TypeError);
  assert.throws(() => publish(null, "k", "d"), /the stream must be a string, got null/);
  assert.throws(() => publish("s", 1, "d"), /the partition key must be a string/);
  assert.throws(() => publish("s", "k\ud800", "d"), /lone surrogate/);
  assert.throws(() => publish("s", "k", "\udc00"), /lone surrogate/);
  assert.equal(fake.calls.publish.length, 0);
});

test("seek", () => {
  fake.testReset();
  assert.equal(seek("4960"), undefined);
  seek(4961n);
  assert.deepEqual(fake.calls.seek, ["4960", "4961"]);
  fake.state.seek = (s) => {
    throw fake.hostError(`seek: \`${s}\` is not a sequence number (digits only)`);
  };
  assert.throws(() => seek("abc"), (e) => e instanceof HostError && /digits only/.test(e.message));
  assert.throws(() => seek(5), /must be a string/);
});

test("what the host throws that is not a refusal passes through", () => {
  fake.testReset();
  const boom = new Error("engine trouble");
  fake.state.seek = () => {
    throw boom;
  };
  assert.throws(() => seek("1"), (e) => e === boom);
});
