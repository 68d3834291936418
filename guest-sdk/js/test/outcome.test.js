import assert from "node:assert/strict";
import { test } from "node:test";
import { internal, sdk } from "../testing/sdk-tests.js";

const { ack, drop, retry, retryAfter, Outcome } = sdk;
const { toHostOutcome, toHostBatchOutcome } = internal.outcome;

test("the outcomes and what they settle", () => {
  assert.equal(ack.kind, "ack");
  assert.equal(drop.kind, "drop");
  assert.equal(retry.kind, "retry");
  assert.ok(ack.settles && drop.settles && !retry.settles && !retryAfter(1).settles);
  assert.ok(Object.isFrozen(ack) && Object.isFrozen(retryAfter(3)));
  assert.equal(String(retryAfter(250)), "retryAfter(250)");
  assert.equal(JSON.stringify([ack, retryAfter(5)]), '["ack","retryAfter(5)"]');
  assert.deepEqual(retryAfter(5), retryAfter(5));
  assert.throws(() => new Outcome("ack"), TypeError);
});

test("retryAfter rounds up, saturates and refuses nonsense", () => {
  assert.equal(retryAfter(1.2).delayMs, 2);
  assert.equal(retryAfter(0).delayMs, 0);
  assert.equal(retryAfter(7n).delayMs, 7);
  assert.throws(() => retryAfter(-1), RangeError);
  assert.throws(() => retryAfter(-1n), RangeError);
  assert.throws(() => retryAfter(NaN), TypeError);
  assert.throws(() => retryAfter("5"), /must be a number of milliseconds, got "5"/);
  assert.throws(() => retryAfter(), TypeError);
  const max = 18446744073709551615n;
  assert.deepEqual(toHostOutcome(retryAfter(Infinity), "h"), { tag: "retry-after", val: max });
  assert.deepEqual(toHostOutcome(retryAfter(2 ** 70), "h"), { tag: "retry-after", val: max });
  assert.deepEqual(toHostOutcome(retryAfter(2n ** 70n), "h"), { tag: "retry-after", val: max });
});

test("the host's shapes", () => {
  assert.deepEqual(toHostOutcome(ack, "h"), { tag: "ack" });
  assert.deepEqual(toHostOutcome(drop, "h"), { tag: "drop" });
  assert.deepEqual(toHostOutcome(retry, "h"), { tag: "retry" });
  assert.deepEqual(toHostOutcome(retryAfter(250), "h"), { tag: "retry-after", val: 250n });
  assert.deepEqual(toHostBatchOutcome(ack, 3), { tag: "all", val: { tag: "ack" } });
  assert.deepEqual(toHostBatchOutcome([ack, retry], 2), {
    tag: "each",
    val: [{ tag: "ack" }, { tag: "retry" }],
  });
});

test("anything but an outcome is refused with a hint", () => {
  assert.throws(() => toHostOutcome(undefined, "the handler"), /the handler returned undefined: return ack, drop, retry or retryAfter\(ms\)/);
  assert.throws(() => toHostOutcome("ack", "the handler"), /the string "ack"; use the constant ack/);
  assert.throws(() => toHostOutcome({ tag: "ack" }, "the handler"), TypeError);
  assert.throws(() => toHostBatchOutcome([ack], 2), /returned 1 outcomes for 2 records/);
  assert.throws(() => toHostBatchOutcome([ack, 5], 2), /outcome 1\) returned number 5/);
  assert.throws(() => toHostBatchOutcome(null, 2), /returned null/);
});
