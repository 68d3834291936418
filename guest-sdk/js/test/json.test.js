import assert from "node:assert/strict";
import { test } from "node:test";
import { sdk } from "../testing/sdk-tests.js";

const { Record, DecodeError, integer } = sdk;

const json = (data) => new Record({ data }).json();
const bytes = (...parts) =>
  new Uint8Array(parts.flatMap((p) => (typeof p === "string" ? [...new TextEncoder().encode(p)] : p)));

function rejects(data, pattern, kind = "not-json") {
  assert.throws(
    () => json(data),
    (e) => {
      assert.ok(e instanceof DecodeError, `${e}`);
      assert.equal(e.kind, kind);
      assert.match(e.message, pattern);
      return true;
    },
    `expected ${JSON.stringify(typeof data === "string" ? data : [...data])} to be refused`,
  );
}

test("ordinary JSON", () => {
  assert.deepEqual(json('{"id":1,"address":"A St 1","carrier":"dhl"}'), { id: 1, address: "A St 1", carrier: "dhl" });
  assert.deepEqual(json(' \r\n\t[1, 2.5, -0, "x", true, false, null, {}] \n'), [1, 2.5, -0, "x", true, false, null, {}]);
  assert.equal(json('"\\u00e9\\ud83d\\ude00\\n\\"\\\\\\/"'), 'é😀\n"\\/');
  assert.equal(json("9007199254740991"), 9007199254740991);
  assert.equal(json("-9007199254740991"), -9007199254740991);
  assert.equal(json("1e308"), 1e308);
  assert.equal(json("1e-400"), 0);
  assert.equal(json("12345678901234567890.5"), 12345678901234567890.5); // a float: rounding is expected
  assert.equal(json('"A\u2028"'), "A\u2028");
  // the same key in different objects, and keys that only look alike
  assert.deepEqual(json('{"a":{"a":1},"b":[{"a":2},{"a":3}],"A":0}'), { a: { a: 1 }, b: [{ a: 2 }, { a: 3 }], A: 0 });
  assert.deepEqual(json('[{},{"x":1},"x"]'), [{}, { x: 1 }, "x"]);
  assert.deepEqual(json('{"\\\\":1,"\\\\\\\\":2}'), { "\\": 1, "\\\\": 2 });
  const deep = "[".repeat(128) + "]".repeat(128); // the deepest the rule accepts
  assert.ok(Array.isArray(json(deep)));
});

test("not UTF-8", () => {
  rejects(bytes([0xff, 0xfe, 0x00]), /^record data is not UTF-8 text \(invalid byte at offset 0\)$/, "not-utf8");
  rejects(bytes('{"a":"A', [0xc3, 0x28], '"}'), /offset 7/, "not-utf8");
  rejects(bytes('"', [0xed, 0xa0, 0x80], '"'), /offset 1/, "not-utf8"); // an encoded surrogate
  rejects(bytes('"', [0xc0, 0xaf], '"'), /offset 1/, "not-utf8"); // overlong
});

test("not exactly one JSON value", () => {
  rejects("", /^record data is not valid JSON: /);
  rejects("  \n", /not valid JSON/);
  rejects(bytes([0xef, 0xbb, 0xbf], "{}"), /not valid JSON/); // a byte order mark
  rejects('{"a":1}x', /not valid JSON/);
  rejects('{"a":1}{"a":1}', /not valid JSON/);
  rejects('{"a":1}\u0000', /not valid JSON/);
  rejects('{"a":1,}', /not valid JSON/);
  rejects("{'a':1}", /not valid JSON/);
  rejects('{"a":1}//c', /not valid JSON/);
  rejects("NaN", /not valid JSON/);
  rejects("01", /not valid JSON/);
  rejects('"\u0001"', /not valid JSON/);
  rejects('"\\x"', /not valid JSON/);
  rejects('{"a":1}\u00a0', /not valid JSON/); // only space, tab, CR and LF are whitespace
});

test("a key twice in one object, anywhere, also after unescaping", () => {
  rejects('{"id":1,"address":"A","carrier":"dhl","id":2}', /^record data is not valid JSON: duplicate key "id" at line 1 column 39$/);
  rejects('{"x":1,"x":1}', /duplicate key "x"/);
  rejects('{"a":{"y":1,"y":2}}', /duplicate key "y" at line 1 column 13/);
  rejects('[{"a":1},{"b":1,"b":2}]', /duplicate key "b"/);
  rejects('{"id":1,"\\u0069d":2}', /duplicate key "id"/);
  rejects('{"__proto__":1,"__proto__":2}', /duplicate key "__proto__"/);
  rejects('{\n "a": 1,\n "a": 2\n}', /duplicate key "a" at line 3 column 2/);
});

test("an escaped surrogate without its partner", () => {
  rejects('{"address":"\\ud800"}', /lone leading surrogate in hex escape at line 1 column 13/);
  rejects('"\\ud800\\u0041"', /lone leading surrogate/);
  rejects('"\\udc00x"', /lone trailing surrogate/);
  rejects('"\\ude00\\ud83d"', /lone trailing surrogate/);
  rejects('{"\\ud800":1}', /lone leading surrogate/);
  rejects('["ok", "\\\\", "\\uDBFF"]', /lone leading surrogate/);
  assert.equal(json('"\\uD83D\\uDE00"'), "😀");
});

// One test per category of the JSON rule (guest-sdk/JSON.md), the same cases as the Rust SDK's
// `rule_*` tests (guest-sdk/src/record.rs) and the Python SDK's RuleCategories.

/** The verdict of the shipping example's shape (`id: u64`, `address`, `carrier` strings). */
function shipment(data) {
  let v;
  try {
    v = json(data);
  } catch (e) {
    assert.ok(e instanceof DecodeError, `${e}`);
    return "rule";
  }
  try {
    const id = integer(v, "id");
    if (id < 0) return "shape";
  } catch (e) {
    assert.ok(e instanceof TypeError, `${e}`);
    return "shape";
  }
  return typeof v.address === "string" && typeof v.carrier === "string" ? "ok" : "shape";
}
const withId = (id) => `{"id":${id},"address":"1 Main St","carrier":"dhl"}`;
const withUnread = (x) => `{"id":7,"address":"1 Main St","carrier":"dhl","x":${x}}`;

test("rule: integer fields take integer literals only", () => {
  assert.equal(shipment(withId("7")), "ok");
  for (const f of ["1.0", "1e3", "1E0", "10e-1", "-0", "0.0", "7.5"]) {
    assert.equal(shipment(withId(f)), "shape", f);
  }
  assert.equal(shipment(withUnread("1.0")), "ok");
  // in arrays and nested objects too, with what was written in the message
  assert.throws(() => integer(json('[1.0,"a","dhl"]'), 0), /^TypeError: invalid type: floating point `1.0`, expected an integer$/);
  assert.throws(() => integer(json('{"a":{"b":[2,1e3]}}').a.b, 1), /floating point `1e3`/);
  assert.equal(integer(json('{"a":{"b":[2,1e3]}}').a.b, 0), 2);
  assert.throws(() => integer(json('{"\\u0069d":-0.0}'), "id"), /floating point `-0.0`/);
  assert.throws(() => integer(json('{"id":-0}'), "id"), /floating point `-0`/);
  assert.throws(() => integer(json('{"id":7}'), "ID"), /^TypeError: missing field `ID`$/);
  assert.throws(() => integer(json('{"id":"7"}'), "id"), /invalid type: string "7", expected an integer/);
  assert.throws(() => integer(json('{"id":null}'), "id"), /invalid type: null/);
  // the value json() gives is a plain number all the same
  assert.deepEqual(json('{"a":1.0,"b":1e3,"c":2}'), { a: 1, b: 1000, c: 2 });
  assert.equal(json("1.0"), 1);
});

test("rule: integers past 2^53 are BigInts, past 64 bits floats", () => {
  for (const id of ["9007199254740993", "18446744073709551615"]) {
    assert.equal(shipment(withId(id)), "ok", id);
  }
  assert.equal(integer(json(withId("18446744073709551615")), "id"), 18446744073709551615n);
  assert.equal(json("9007199254740992"), 9007199254740992n);
  assert.equal(json("-9223372036854775808"), -9223372036854775808n);
  assert.equal(json("9007199254740991"), 9007199254740991);
  assert.deepEqual(json('[1,{"n":-9007199254740992},[18446744073709551615]]'), [1, { n: -9007199254740992n }, [18446744073709551615n]]);
  // past 64 bits an integer literal is a float: refused as an integer field, fine unread
  assert.equal(shipment(withId("18446744073709551616")), "shape");
  assert.equal(shipment(withId("1".repeat(30))), "shape");
  for (const x of ["18446744073709551616", "-9223372036854775809"]) {
    assert.equal(shipment(withUnread(x)), "ok", x);
  }
  assert.equal(json("18446744073709551616"), 18446744073709551616);
  assert.equal(json("-9223372036854775809"), -9223372036854775808);
  assert.equal(typeof json("123456789012345678901234567890"), "number");
});

test("rule: lone surrogates anywhere", () => {
  for (const x of ['"\\ud800"', '"\\udc00"', '"\\ud800\\u0041"', '{"\\ud800":1}']) {
    assert.equal(shipment(withUnread(x)), "rule", x);
  }
  assert.equal(shipment('{"id":7,"address":"\\ud83d St","carrier":"dhl"}'), "rule");
  assert.equal(shipment('{"id":7,"address":"\\ud83d\\ude9a St","carrier":"dhl"}'), "ok");
});

test("rule: duplicate keys at the top and nested", () => {
  assert.equal(shipment('{"id":7,"address":"1 Main St","carrier":"dhl","x":1,"x":2}'), "rule");
  assert.equal(shipment('{"id":7,"address":"1 Main St","carrier":"dhl","id":8}'), "rule");
  for (const x of ['{"a":1,"a":2}', '{"a":1,"\\u0061":2}', '[{"b":{"c":1,"c":1}}]']) {
    assert.equal(shipment(withUnread(x)), "rule", x);
  }
  assert.equal(shipment(withUnread('[{"a":1},{"a":2}]')), "ok");
});

test("rule: numbers finite as doubles", () => {
  for (const x of ["1e400", "-1e400", "1.7976931348623159e308", "1".repeat(400)]) {
    assert.equal(shipment(withUnread(x)), "rule", x);
  }
  for (const x of ["1.7976931348623158e308", "1e-400", "1".repeat(79)]) {
    assert.equal(shipment(withUnread(x)), "ok", x);
  }
  assert.equal(json("1.7976931348623158e308"), Number.MAX_VALUE);
  rejects("1e400", /number 1e400 out of range/);
  rejects("[-1E+309]", /number -1E\+309 out of range/);
  rejects("1" + "0".repeat(400) + ".5", /out of range/);
  rejects("1".repeat(400), /number 1111111111111111111111111111111111111\.\.\. out of range/);
});

test("rule: long digit runs", () => {
  for (const x of ["1".repeat(79), "0." + "1".repeat(500), "1" + "0".repeat(308)]) {
    assert.equal(shipment(withUnread(x)), "ok", x);
  }
  assert.equal(shipment(withUnread("9".repeat(309))), "rule");
});

test("rule: nesting depth", () => {
  const nested = (n) => "[".repeat(n) + "]".repeat(n);
  // the shipment object is level 1
  assert.equal(shipment(withUnread(nested(127))), "ok");
  assert.equal(shipment(withUnread(nested(128))), "rule");
  assert.ok(Array.isArray(json(nested(128))));
  rejects(nested(129), /^record data is not valid JSON: nested more than 128 arrays\/objects deep at line 1 column 129$/);
  rejects(nested(100000), /nested more than 128/);
  const objects = (n) => '{"a":'.repeat(n) + "1" + "}".repeat(n);
  assert.equal(json(objects(128)).a.a.a.a !== undefined, true);
  rejects(objects(129), /nested more than 128/);
  assert.ok(Array.isArray(json(`["${"[".repeat(300)}"]`))); // brackets in a string do not nest
});

test("JSON.stringify round trip of what json() accepts", () => {
  const text = '{"a":[1,{"b":"\\ud83d\\ude00"}],"c":null}';
  assert.equal(JSON.stringify(json(text)), '{"a":[1,{"b":"😀"}],"c":null}');
});
