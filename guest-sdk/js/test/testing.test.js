// shardhost/testing as a handler's own tests use it: the stand-in's default answers.
import assert from "node:assert/strict";
import { test } from "node:test";
import "../testing/register.js";

const { handler, ack, publish, seek, HostError, log } = await import("../src/index.js");
const host = await import("shardhost:handler/host@0.1.0");

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
