import assert from "node:assert/strict";
import { test } from "node:test";
import { fake, sdk, wit } from "../testing/sdk-tests.js";

const { handler, batchHandler, ack, drop, retry, retryAfter, Record, BatchInfo } = sdk;

function decide(r) {
  switch (r.text()) {
    case "drop":
      return drop;
    case "retry":
      return retry;
    case "later":
      return retryAfter(250);
    default:
      return ack;
  }
}

test("per record: one call per record, outcomes in order", () => {
  const seen = [];
  const handle = handler((r) => {
    assert.ok(r instanceof Record);
    seen.push([r.sequenceNumber, r.attempt]);
    return decide(r);
  });
  const out = handle(wit.info({ attempt: 2 }), wit.records(["ack", "drop", "retry", "later", "ack", "drop"]));
  assert.deepEqual(out, {
    tag: "each",
    val: [{ tag: "ack" }, { tag: "drop" }, { tag: "retry" }, { tag: "retry-after", val: 250n }, { tag: "ack" }, { tag: "drop" }],
  });
  assert.deepEqual(seen, [["100", 2], ["101", 2], ["102", 2], ["103", 2], ["104", 2], ["105", 2]]);
  assert.deepEqual(handler(decide)(wit.info(), []), { tag: "each", val: [] });
});

test("per record, async: awaited in order", async () => {
  const order = [];
  const handle = handler(async (r) => {
    await null;
    order.push(r.sequenceNumber);
    return decide(r);
  });
  const out = handle(wit.info(), wit.records(["ack", "later", "drop"]));
  assert.ok(out instanceof Promise);
  assert.deepEqual(await out, { tag: "each", val: [{ tag: "ack" }, { tag: "retry-after", val: 250n }, { tag: "drop" }] });
  assert.deepEqual(order, ["100", "101", "102"]);
  // sync for some records, async for the rest
  const mixed = handler((r) => (r.text() === "ack" ? ack : Promise.resolve(retry)));
  assert.deepEqual(await mixed(wit.info(), wit.records(["ack", "x", "ack"])), {
    tag: "each",
    val: [{ tag: "ack" }, { tag: "retry" }, { tag: "ack" }],
  });
});

test("per batch: info and records; one outcome or one per record", async () => {
  const handle = batchHandler((info, records) => {
    assert.ok(info instanceof BatchInfo);
    assert.equal(info.shardId, "shardId-000000000000");
    assert.equal(info.millisBehindLatest, 0);
    assert.equal(records.length, 2);
    assert.equal(records[1].partitionKey, "pk-1");
    assert.equal(records[1].attempt, 3);
    return decide(records[0]);
  });
  assert.deepEqual(handle(wit.info({ millisBehindLatest: 0n, attempt: 3 }), wit.records(["retry", "ack"])), {
    tag: "all",
    val: { tag: "retry" },
  });
  const each = batchHandler((_info, records) => records.map(decide));
  assert.deepEqual(each(wit.info(), wit.records(["drop", "ack"])), { tag: "each", val: [{ tag: "drop" }, { tag: "ack" }] });
  const later = batchHandler(async () => retryAfter(10));
  assert.deepEqual(await later(wit.info(), wit.records(["x"])), { tag: "all", val: { tag: "retry-after", val: 10n } });
});

test("a handler that throws: logged at error level whatever the threshold, then the call fails", async () => {
  fake.testReset();
  fake.state.maxLevel = undefined; // the host records nothing ... but the failure still goes out
  const handle = handler((r) => {
    if (r.text() === "poison") throw new Error("poison record 7");
    return ack;
  });
  assert.throws(() => handle(wit.info(), wit.records(["ok", "poison"])), /poison record 7/);
  const errors = () => fake.calls.log.filter(([level]) => level !== "debug");
  assert.equal(errors().length, 1);
  const [level, line] = fake.calls.log[0];
  assert.equal(level, "error");
  assert.ok(line.startsWith("handler threw Error: poison record 7"), line);

  fake.testReset();
  const asyncFail = handler(async () => {
    throw new RangeError("later");
  });
  await assert.rejects(asyncFail(wit.info(), wit.records(["x"])), /later/);
  assert.match(fake.calls.log[0][1], /^handler threw RangeError: later/);

  fake.testReset();
  assert.throws(() => handler(() => "ack")(wit.info(), wit.records(["x"])), TypeError);
  assert.match(fake.calls.log[0][1], /^handler threw TypeError: the handler returned "ack" \(the string "ack"; use the constant ack/);

  fake.testReset();
  assert.throws(() => batchHandler(() => [ack])(wit.info(), wit.records(["x", "y"])), /returned 1 outcomes for 2 records/);
  assert.equal(errors().length, 1);

  fake.testReset();
  await assert.rejects(batchHandler(async () => undefined)(wit.info(), wit.records(["x"])), /returned undefined/);
  assert.equal(errors().length, 1);

  fake.testReset();
  assert.throws(() => handler(() => {
    throw "a string"; // eslint-disable-line no-throw-literal
  })(wit.info(), wit.records(["x"])));
  assert.deepEqual(fake.calls.log, [["error", "handler threw a string"]]);
});

test("a thrown error is one line, its message and where it was thrown; the stack only at debug", () => {
  // (The host's level is asked every 64th call: this file's calls see the first answer, which
  // records debug.)
  fake.testReset();
  function pick() {
    throw new Error("poison record 7");
  }
  assert.throws(() => handler(pick)(wit.info(), wit.records(["x"])), /poison record 7/);
  const [[level, line], ...rest] = fake.calls.log;
  assert.equal(level, "error");
  assert.ok(!line.includes("\n"), line);
  assert.match(line, /^handler threw Error: poison record 7 at .*handler\.test\.js:\d+:\d+ in pick$/);
  assert.deepEqual(rest.map(([l]) => l), ["debug"]);
  assert.match(rest[0][1], /^the stack of Error: poison record 7\n/);
});

test("handler() and batchHandler() want a function", () => {
  assert.throws(() => handler(), /handler\(fn\): fn must be a function/);
  assert.throws(() => batchHandler("x"), /batchHandler\(fn\): fn must be a function/);
});
