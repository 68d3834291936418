// Random documents with known problems planted: json() refuses exactly the ones with a problem,
// and the fast path never lets a problem through.
import assert from "node:assert/strict";
import { test } from "node:test";
import { internal, sdk } from "../testing/sdk-tests.js";

const { plain, scan } = internal.json;

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
      return pick(["9007199254740992", "-9007199254740993", "18446744073709551615", "1e400", "-2.5E+999", "1" + "0".repeat(320)]);
    }
    return pick(["0", "-0", "7", "-12", "3.25", "1e3", "2E-5", "-1.5e+10", "9007199254740991", "-9007199254740991", "123456789012345", "0.1234567890123456789", "1e-400"]);
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
    const text = `${ws()}${value(0)}${ws()}`;
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

test("random documents: refused exactly when a problem was planted", () => {
  const next = generator(rng(20261204));
  let good = 0;
  let refused = 0;
  let fast = 0;
  for (let i = 0; i < 20000; i++) {
    const { text, bad } = next();
    let parsed;
    try {
      parsed = JSON.parse(text);
    } catch {
      continue; // a planted lone surrogate in a key can still be valid JSON; others are always
    }
    const problem = scan(text);
    assert.equal(problem !== undefined, bad, `${bad ? "missed" : "invented"} a problem in ${text} (${problem?.what})`);
    if (plain(text, parsed)) {
      fast++;
      assert.equal(bad, false, `the fast path let a problem through: ${text}`);
    }
    let threw = false;
    try {
      new sdk.Record({ data: text }).json();
    } catch (e) {
      threw = true;
      assert.equal(e.kind, "not-json");
    }
    assert.equal(threw, bad, text);
    if (bad) refused++;
    else good++;
  }
  assert.ok(good > 10000 && refused > 500, `good ${good}, refused ${refused}`);
  assert.ok(fast > good / 2, `the fast path took ${fast} of ${good}`);
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
