// Random documents with known problems planted, decided again by a plain recursive-descent
// reading of the rule (guest-sdk/JSON.md) written for this test: json() refuses exactly the
// ones with a problem, gives the same values (BigInts past 2^53 - 1) and the same answers to
// integer(); the fast path never lets a problem through or skips a fix.
import assert from "node:assert/strict";
import { test } from "node:test";
import { internal, sdk } from "../testing/sdk-tests.js";

const { plain, scan, MAX_DEPTH } = internal.json;
const { integer } = sdk;

function rng(seed) {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function generator(random) {
  const pick = (xs) => xs[Math.floor(random() * xs.length)];
  const chance = (p) => random() < p;
  const ws = () => (chance(0.2) ? pick([" ", "\n", "\t", "\r\n  "]) : "");
  let bad = false;

  function char() {
    const c = pick(['a', 'Z', ' ', ':', '"', "\\", '/', "é", "😀", "\u2028", ",", "{", "}", "[", "]", "7", "e", "\n", "\u0001"]);
    switch (c) {
      case '"':
        return '\\"';
      case "\\":
        return "\\\\";
      case "\n":
        return chance(0.5) ? "\\n" : "\\u000a";
      case "\u0001":
        return "\\u0001";
      case "😀":
        return chance(0.5) ? c : chance(0.5) ? "\\ud83d\\ude00" : "\\uD83D\\uDE00";
      case "é":
        return chance(0.5) ? c : "\\u00e9";
      default:
        return c;
    }
  }
  function string(forKey) {
    let s = "";
    const n = Math.floor(random() * 6);
    for (let i = 0; i < n; i++) s += char();
    if (!forKey && chance(0.01)) {
      bad = true;
      s += pick(["\\ud800", "\\uDBFF", "\\udc00", "\\uDFFF x", "\\ud800\\u0041"]);
    }
    return `"${s}"`;
  }
  function number() {
    const r = random();
    if (r < 0.01) {
      bad = true;
      return pick(["1e400", "-2.5E+999", "1" + "0".repeat(320), "1.7976931348623159e308"]);
    }
    if (r < 0.1) {
      return pick(["9007199254740992", "-9007199254740993", "18446744073709551615", "18446744073709551616", "-9223372036854775808", "-9223372036854775809", "1" + "0".repeat(300), "1.7976931348623158e308"]);
    }
    return pick(["0", "-0", "7", "-12", "3.25", "1e3", "1.0", "-0.0", "2E+2", "2E-5", "-1.5e+10", "9007199254740991", "-9007199254740991", "123456789012345", "0.1234567890123456789", "1e-400"]);
  }
  function value(depth) {
    const r = random();
    if (depth > 4 || r < 0.35) return pick([() => "true", () => "false", () => "null", number, () => string(false)])();
    if (r < 0.6) {
      const n = Math.floor(random() * 4);
      return `[${ws()}${Array.from({ length: n }, () => value(depth + 1)).join(`${ws()},${ws()}`)}${ws()}]`;
    }
    const n = Math.floor(random() * 5);
    const keys = [];
    for (let i = 0; i < n; i++) {
      if (keys.length && chance(0.03)) {
        bad = true;
        const again = keys[Math.floor(random() * keys.length)];
        // the same key, sometimes spelt with an escape
        keys.push(again === '"a"' && chance(0.5) ? '"\\u0061"' : again);
      } else {
        let k;
        do k = chance(0.4) ? pick(['"a"', '"b"', '"id"', '"__proto__"', '"1"', '"ab"', '":"', '"\\""']) : string(true);
        while (keys.includes(k) || (k === '"a"' && keys.includes('"\\u0061"')) || decodedIn(keys, k));
        if (chance(0.005)) {
          bad = true;
          k = `"k${i}\\udc00"`; // a lone surrogate in a key (a new key: nothing else is planted)
        }
        keys.push(k);
      }
    }
    return `{${ws()}${keys.map((k) => `${k}${ws()}:${ws()}${value(depth + 1)}`).join(`${ws()},${ws()}`)}${ws()}}`;
  }
  return () => {
    bad = false;
    let text = `${ws()}${value(0)}${ws()}`;
    if (chance(0.02)) {
      const n = MAX_DEPTH - 3 + Math.floor(random() * 5); // around the limit
      text = "[".repeat(n) + text + "]".repeat(n);
    }
    return { text, bad };
  };
}

/** Whether a key with the same decoded text is already there (only when both decode). */
function decodedIn(keys, k) {
  try {
    const d = JSON.parse(k);
    return keys.some((x) => {
      try {
        return JSON.parse(x) === d;
      } catch {
        return false;
      }
    });
  } catch {
    return false;
  }
}

/** A number as the rule reads it: its value, and whether integer() takes it. */
class Num {
  constructor(value, isInteger) {
    this.value = value;
    this.isInteger = isInteger;
  }
}

/**
 * The rule, read the slow and obvious way: the value (numbers as Num), or { problem }. Only
 * for text JSON.parse accepted.
 */
function reference(text) {
  let i = 0;
  const fail = (what) => {
    throw Object.assign(new Error(what), { problem: true });
  };
  const ws = () => {
    while (i < text.length && " \t\n\r".includes(text[i])) i++;
  };
  function string() {
    i++; // "
    let out = "";
    for (;;) {
      const c = text[i++];
      if (c === '"') return out;
      if (c !== "\\") {
        out += c;
        continue;
      }
      const e = text[i++];
      if (e !== "u") {
        out += JSON.parse(`"\\${e}"`);
        continue;
      }
      const unit = parseInt(text.slice(i, i + 4), 16);
      i += 4;
      if (unit >= 0xdc00 && unit <= 0xdfff) fail("lone trailing surrogate");
      if (unit >= 0xd800 && unit <= 0xdbff) {
        const low = text.slice(i, i + 2) === "\\u" ? parseInt(text.slice(i + 2, i + 6), 16) : -1;
        if (!(low >= 0xdc00 && low <= 0xdfff)) fail("lone leading surrogate");
        i += 6;
        out += String.fromCharCode(unit, low);
      } else {
        out += String.fromCharCode(unit);
      }
    }
  }
  function number() {
    const m = /-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?/y;
    m.lastIndex = i;
    const [literal, fraction, exponent] = m.exec(text);
    i += literal.length;
    const asNumber = Number(literal);
    if (!Number.isFinite(asNumber)) fail("out of range");
    if (fraction === undefined && exponent === undefined && literal !== "-0") {
      const big = BigInt(literal);
      if (big >= -(2n ** 63n) && big < 2n ** 64n) {
        const safe = big >= -9007199254740991n && big <= 9007199254740991n;
        return new Num(safe ? Number(big) : big, true);
      }
    }
    return new Num(asNumber, false);
  }
  function value(depth) {
    ws();
    const c = text[i];
    if (c === "{" || c === "[") {
      if (depth === MAX_DEPTH) fail("too deep");
      i++;
      ws();
      const close = c === "{" ? "}" : "]";
      const out = c === "{" ? {} : [];
      const keys = new Set();
      while (text[i] !== close) {
        if (c === "{") {
          ws();
          const key = string();
          if (keys.has(key)) fail("duplicate key");
          keys.add(key);
          ws();
          i++; // :
          Object.defineProperty(out, key, { value: value(depth + 1), enumerable: true, writable: true, configurable: true });
        } else {
          out.push(value(depth + 1));
        }
        ws();
        if (text[i] === ",") i++;
        ws();
      }
      i++;
      return out;
    }
    if (c === '"') return string();
    if (c === "-" || (c >= "0" && c <= "9")) return number();
    for (const [word, v] of [["true", true], ["false", false], ["null", null]]) {
      if (text.startsWith(word, i)) {
        i += word.length;
        return v;
      }
    }
    throw new Error(`not JSON at ${i}: ${text}`);
  }
  try {
    return { value: value(0) };
  } catch (e) {
    if (e.problem) return { problem: e.message };
    throw e;
  }
}

/** Whether json()'s `actual` is the reference's `expected`, integer() answers included. */
function same(actual, expected, where = "$") {
  if (expected instanceof Num) {
    assert.ok(Object.is(actual, expected.value), `${where}: ${String(actual)} is not ${String(expected.value)}`);
    return;
  }
  if (typeof expected !== "object" || expected === null) {
    assert.equal(actual, expected, where);
    return;
  }
  assert.equal(Array.isArray(actual), Array.isArray(expected), where);
  assert.deepEqual(Object.keys(actual), Object.keys(expected), where);
  for (const key of Object.keys(expected)) {
    const e = expected[key];
    if (e instanceof Num) {
      let took;
      try {
        integer(actual, Array.isArray(actual) ? Number(key) : key);
        took = true;
      } catch {
        took = false;
      }
      assert.equal(took, e.isInteger, `${where}.${key}: integer() of ${String(e.value)}`);
    }
    same(actual[key], e, `${where}.${key}`);
  }
}

test("random documents: json() and integer() answer as the rule read plainly", () => {
  const next = generator(rng(20261204));
  let good = 0;
  let refused = 0;
  let fast = 0;
  let fixed = 0;
  for (let i = 0; i < 20000; i++) {
    const { text, bad } = next();
    let parsed;
    try {
      parsed = JSON.parse(text);
    } catch {
      continue; // a planted lone surrogate in a key can still be valid JSON; others are always
    }
    const ref = reference(text);
    const problemExpected = ref.problem !== undefined;
    if (bad) assert.ok(problemExpected, `the reference missed a planted problem in ${text}`);
    const found = { bigints: [], floats: [] };
    const problem = scan(text, found);
    assert.equal(problem !== undefined, problemExpected, `${problemExpected ? "missed" : "invented"} a problem in ${text} (${problem?.what ?? ref.problem})`);
    if (plain(text, parsed)) {
      fast++;
      assert.equal(problemExpected, false, `the fast path let a problem through: ${text}`);
      assert.deepEqual(found, { bigints: [], floats: [] }, `the fast path skipped a fix: ${text}`);
    }
    let value;
    try {
      value = new sdk.Record({ data: text }).json();
    } catch (e) {
      assert.equal(e.kind, "not-json");
      assert.ok(problemExpected, `refused ${text}: ${e.message}`);
      refused++;
      continue;
    }
    assert.ok(!problemExpected, `accepted ${text} (${ref.problem})`);
    same(value, ref.value);
    good++;
    if (found.bigints.length + found.floats.length > 0) fixed++;
  }
  assert.ok(good > 10000 && refused > 500, `good ${good}, refused ${refused}`);
  assert.ok(fast > good / 2, `the fast path took ${fast} of ${good}`);
  assert.ok(fixed > 1000, `${fixed} documents needed a BigInt or a noted float`);
});

test("the fast path's key count is never fooled by colons and quotes inside strings", () => {
  for (const [text, ok] of [
    ['["x",":"]', true],
    ['{"a":"b\\":","c":":"}', true],
    ['{"a":"\\\\","a":1}', false],
    ['{"a" : 1 , "b"\n:\n2}', true],
    ['{"a" : 1 , "a"\n:\n2}', false],
    ['[{"k":1},{"k":2},{"k":{"k":3}}]', true],
    ['[{"k":1,"k":2}]', false],
    ['"a:b"', true],
  ]) {
    const parsed = JSON.parse(text);
    // The fast path may send good text to the scan; it never lets a repeated key through.
    if (!ok) assert.equal(plain(text, parsed), false, text);
    assert.equal(scan(text) === undefined, ok, text);
  }
});
