// Strict JSON for record data: JSON.parse, then what JSON.parse cannot see by itself. The rule is
// the one every shardhost SDK follows, written down once in ../../JSON.md; ../README.md ("The JSON
// rule") says what it means for a JavaScript handler. Keep the three in step. The fast path
// (json/plain.js) proves most texts need nothing more; json/scan.js is the full rule.

import { plain } from "./json/plain.js";
import { MAX_DEPTH, lineColumn, scan } from "./json/scan.js";

// (plain and scan for the SDK's tests)
export { MAX_DEPTH, plain, scan };

/** Why {@link Record#json} or {@link Record#text} could not decode a record. */
export class DecodeError extends Error {
  /**
   * @param {"not-utf8" | "not-json"} kind
   * @param {string} message
   * @param {{ cause?: unknown, offset?: number, line?: number, column?: number }} [details]
   */
  constructor(kind, message, details = {}) {
    super(message, details.cause === undefined ? undefined : { cause: details.cause });
    this.name = "DecodeError";
    /** "not-utf8": the data is not UTF-8 text; "not-json": it is text, but not (acceptable) JSON. */
    this.kind = kind;
    /** not-utf8: the byte offset of the first invalid byte. */
    if (details.offset !== undefined) this.offset = details.offset;
    /** not-json, when known: where the problem is (1-based). */
    if (details.line !== undefined) {
      this.line = details.line;
      this.column = details.column;
    }
  }
}

/**
 * The numbers `json()` made that were written as floats (a fraction or an exponent) but hold a
 * safe integer value (`1.0`, `1e3`, `-0.0`): container -> Map(String(key) -> how it was written).
 * `integer` refuses them, as serde refuses `1.0` for a Rust `u64`.
 */
const FLOATS = new WeakMap();

/**
 * Parses `text` as one JSON value under the SDK's rule, or throws a DecodeError ("not-json").
 * Integers written without fraction or exponent beyond +-(2^53 - 1) (and within [-2^63, 2^64))
 * come out as BigInts; floats that hold an integer are noted for {@link integer}.
 * @param {string} text well-formed UTF-16 (decoded from UTF-8)
 */
export function parseStrictJson(text) {
  let value;
  try {
    value = JSON.parse(text);
  } catch (e) {
    // SpiderMonkey: "JSON.parse: unexpected character at line 1 column 1 of the JSON data".
    const detail = String(e && e.message !== undefined ? e.message : e).replace(/^JSON\.parse: /, "");
    throw new DecodeError("not-json", `record data is not valid JSON: ${detail}`, { cause: e });
  }
  if (plain(text, value)) return value;
  const found = { bigints: [], floats: [] };
  const problem = scan(text, found);
  if (problem !== undefined) {
    const { line, column } = lineColumn(text, problem.at);
    throw new DecodeError(
      "not-json",
      `record data is not valid JSON: ${problem.what} at line ${line} column ${column}`,
      { line, column },
    );
  }
  for (const [path, literal] of found.bigints) {
    if (path.length === 0) return BigInt(literal);
    const [container, key] = at(value, path);
    container[key] = BigInt(literal);
  }
  for (const [path, literal] of found.floats) {
    if (path.length === 0) continue; // a whole document that is one number has no container
    const [container, key] = at(value, path);
    let spelt = FLOATS.get(container);
    if (spelt === undefined) FLOATS.set(container, (spelt = new Map()));
    spelt.set(String(key), literal);
  }
  return value;
}

/** The container and key at the end of `path` (keys and indices) in `value`. */
function at(value, path) {
  let container = value;
  for (let i = 0; i < path.length - 1; i++) container = container[path[i]];
  return [container, path[path.length - 1]];
}

/**
 * The integer at `container[key]`, where `container` is an object or array that
 * {@link Record#json} returned: a number within +-(2^53 - 1), or a BigInt beyond it. This is
 * what a Rust integer field (`u64`, `i64`) and a Python `int` accept (guest-sdk/JSON.md): a
 * number written without fraction or exponent, within [-2^63, 2^64). Check the sign and the
 * range yourself (`id >= 0` for a u64).
 * @param {object} container
 * @param {string | number} key
 * @returns {number | bigint}
 * @throws {TypeError} when the value is missing, not a number, or a float: written with a
 *   fraction or an exponent even when its value is whole (`1.0`, `1e3`), `-0`, or an integer
 *   literal outside [-2^63, 2^64) (`18446744073709551616` is a float, as in Rust).
 */
export function integer(container, key) {
  const v = container === null || container === undefined ? undefined : container[key];
  if (typeof v === "bigint") return v;
  if (typeof v === "number") {
    const spelt = FLOATS.get(container)?.get(String(key));
    if (spelt === undefined && Number.isSafeInteger(v) && !Object.is(v, -0)) return v;
    const shown = spelt ?? (Object.is(v, -0) ? "-0" : String(v));
    throw new TypeError(`invalid type: floating point \`${shown}\`, expected an integer`);
  }
  if (v === undefined) throw new TypeError(`missing field \`${String(key)}\``);
  const what = v === null ? "null" : Array.isArray(v) ? "sequence" : typeof v === "object" ? "map" : `${typeof v} ${JSON.stringify(v)}`;
  throw new TypeError(`invalid type: ${what}, expected an integer`);
}

/**
 * The length of the longest valid UTF-8 prefix of `bytes` (Rust's `Utf8Error::valid_up_to`):
 * the offset of the first byte that does not start a well-formed sequence.
 * @param {Uint8Array} bytes
 */
export function utf8ValidUpTo(bytes) {
  const n = bytes.length;
  let i = 0;
  while (i < n) {
    const b = bytes[i];
    if (b < 0x80) {
      i++;
      continue;
    }
    let need;
    let lo = 0x80;
    let hi = 0xbf;
    if (b >= 0xc2 && b <= 0xdf) need = 1;
    else if (b >= 0xe0 && b <= 0xef) {
      need = 2;
      if (b === 0xe0) lo = 0xa0;
      else if (b === 0xed) hi = 0x9f; // no UTF-16 surrogates
    } else if (b >= 0xf0 && b <= 0xf4) {
      need = 3;
      if (b === 0xf0) lo = 0x90;
      else if (b === 0xf4) hi = 0x8f; // nothing past U+10FFFF
    } else return i;
    if (i + need >= n) return i; // cut short
    const second = bytes[i + 1];
    if (second < lo || second > hi) return i;
    for (let k = 2; k <= need; k++) {
      const next = bytes[i + k];
      if (next < 0x80 || next > 0xbf) return i;
    }
    i += need + 1;
  }
  return n;
}
