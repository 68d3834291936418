import assert from "node:assert/strict";
import { test } from "node:test";
import { sdk } from "../testing/sdk-tests.js";

const { Record, DecodeError } = sdk;

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
  const deep = "[".repeat(2000) + "]".repeat(2000); // serde_json ignores depth in fields it skips
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

test("integers beyond +-(2^53 - 1), numbers beyond a double", () => {
  for (const n of ["9007199254740992", "9007199254740993", "18446744073709551615", "-9007199254740992", "123456789012345678901234567890"]) {
    rejects(`{"id":${n}}`, new RegExp(`integer ${n} is beyond \\+-\\(2\\^53 - 1\\)`));
  }
  rejects("1e400", /number 1e400 out of range/);
  rejects("[-1E+309]", /number -1E\+309 out of range/);
  rejects("1" + "0".repeat(400) + ".5", /out of range/);
});

test("JSON.stringify round trip of what json() accepts", () => {
  const text = '{"a":[1,{"b":"\\ud83d\\ude00"}],"c":null}';
  assert.equal(JSON.stringify(json(text)), '{"a":[1,{"b":"😀"}],"c":null}');
});
