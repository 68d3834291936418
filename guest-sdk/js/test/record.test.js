import assert from "node:assert/strict";
import { test } from "node:test";
import { internal, sdk, wit } from "../testing/sdk-tests.js";

const { Record, BatchInfo, DecodeError } = sdk;
const { recordFromHost, batchInfoFromHost } = internal.record;

test("a record from the host: numbers, not bigints; the data is not copied", () => {
  const raw = wit.record('{"a":1}', 3, { subSequenceNumber: 2 });
  const r = recordFromHost(raw, 4);
  assert.ok(r instanceof Record);
  assert.equal(r.partitionKey, "pk-3");
  assert.equal(r.sequenceNumber, "103");
  assert.equal(r.subSequenceNumber, 2);
  assert.equal(r.arrivalMillis, 1700000000003);
  assert.equal(typeof r.arrivalMillis, "number");
  assert.equal(r.attempt, 4);
  assert.equal(r.data, raw.data);
  assert.deepEqual(r.json(), { a: 1 });
});

test("batch info from the host", () => {
  const i = batchInfoFromHost(wit.info({ millisBehindLatest: 1500n, attempt: 2 }));
  assert.ok(i instanceof BatchInfo);
  assert.deepEqual({ ...i }, { stream: "s", shardId: "shardId-000000000000", millisBehindLatest: 1500, attempt: 2 });
  assert.equal(batchInfoFromHost(wit.info()).millisBehindLatest, undefined);
  assert.equal(JSON.stringify(batchInfoFromHost(wit.info())), '{"stream":"s","shardId":"shardId-000000000000","attempt":1}');
});

test("records and batch info for tests", () => {
  const r = new Record({ partitionKey: "cust-1", sequenceNumber: "4960", data: "hé" });
  assert.deepEqual([...r.data], [0x68, 0xc3, 0xa9]);
  assert.equal(r.text(), "hé");
  assert.equal(r.attempt, 1);
  assert.equal(r.subSequenceNumber, 0);
  const bytes = new Uint8Array([1, 2]);
  assert.equal(new Record({ data: bytes }).data, bytes);
  assert.equal(new Record().data.length, 0);
  const i = new BatchInfo({ stream: "s", shardId: "x", attempt: 2, millisBehindLatest: 5 });
  assert.deepEqual({ ...i }, { stream: "s", shardId: "x", millisBehindLatest: 5, attempt: 2 });
});

test("toJSON: data as text when it is UTF-8, else base64", () => {
  const r = new Record({ partitionKey: "k", sequenceNumber: "1", data: "hi", arrivalMillis: 7 });
  assert.equal(
    JSON.stringify(r),
    '{"partitionKey":"k","sequenceNumber":"1","subSequenceNumber":0,"arrivalMillis":7,"attempt":1,"data":"hi"}',
  );
  for (const [bytes, b64] of [
    [[0xff], "/w=="],
    [[0xff, 0xfe], "//4="],
    [[0xff, 0xfe, 0x00], "//4A"],
    [[0xfb, 0xff, 0xbf, 0x41], "+/+/QQ=="],
  ]) {
    const json = new Record({ data: new Uint8Array(bytes) }).toJSON();
    assert.equal(json.dataBase64, b64);
    assert.equal(json.dataBase64, Buffer.from(bytes).toString("base64"));
    assert.equal(json.data, undefined);
  }
});

test("text(): invalid UTF-8 is refused with the offset of the first bad byte; a BOM is kept", () => {
  const r = new Record({ data: new Uint8Array([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x7d]) });
  assert.throws(() => r.text(), (e) => {
    assert.ok(e instanceof DecodeError);
    assert.equal(e.kind, "not-utf8");
    assert.equal(e.offset, 2);
    assert.equal(e.message, "record data is not UTF-8 text (invalid byte at offset 2)");
    return true;
  });
  assert.equal(new Record({ data: new Uint8Array([0xef, 0xbb, 0xbf, 0x31]) }).text(), "\uFEFF1");
});

test("utf8ValidUpTo agrees with the decoder (Rust's valid_up_to)", () => {
  const { utf8ValidUpTo } = internal.json;
  const cases = [
    [[], 0],
    [[0x41], 1],
    [[0x41, 0xff], 1],
    [[0xc3, 0xa9, 0x41], 3],
    [[0xc3, 0x28], 0],
    [[0xc0, 0xaf], 0], // overlong
    [[0x41, 0xe0, 0x80, 0x80], 1], // overlong 3-byte
    [[0xed, 0xa0, 0x80], 0], // a surrogate
    [[0xf0, 0x9f, 0x98, 0x80], 4],
    [[0xf4, 0x90, 0x80, 0x80], 0], // past U+10FFFF
    [[0xf0, 0x9f, 0x98], 0], // cut short
    [[0x41, 0x42, 0xe2, 0x82], 2],
  ];
  for (const [bytes, want] of cases) {
    assert.equal(utf8ValidUpTo(new Uint8Array(bytes)), want, JSON.stringify(bytes));
    const valid = want === bytes.length;
    let decoded = true;
    try {
      new TextDecoder("utf-8", { fatal: true }).decode(new Uint8Array(bytes));
    } catch {
      decoded = false;
    }
    assert.equal(decoded, valid, JSON.stringify(bytes));
  }
});
