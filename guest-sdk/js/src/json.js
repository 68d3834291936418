// Strict JSON for record data: JSON.parse, then what JSON.parse cannot see by itself. The rule is
// the one every shardhost SDK follows, written down once in ../../JSON.md; README.md ("The JSON
// rule") says what it means for a JavaScript handler. Keep the three in step.

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

/** The largest integer a JavaScript number holds exactly, 2^53 - 1. */
const MAX_SAFE = Number.MAX_SAFE_INTEGER;

/** The deepest nesting of arrays and objects the rule accepts (the outermost is level 1). */
export const MAX_DEPTH = 128;

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
 * The fast path, for text JSON.parse accepted: true when the text certainly has none of the
 * problems `scan` looks for and needs none of its fixes, proven mostly from the parsed value
 * (guest JavaScript runs in an interpreter; a walk of the value and a few native string calls
 * cost less than regular expressions over the text, which run in an interpreter too):
 *
 * - no escaped surrogate: the text has no `\u` at all, or none of `\uD800`-`\uDFFF`;
 * - no number out of range and no integer literal past 2^53 - 1: every number parsed lies
 *   within +-(2^53 - 1) (such a literal parses beyond it, an out-of-range one to Infinity);
 * - nesting at most MAX_DEPTH deep, measured on the value;
 * - no float that holds an integer (`1.0`, `1e3`): the value holds no whole number, or the
 *   text has no more marks of a float (a digit followed by `.`, `e` or `E`) than the value has
 *   numbers that are not whole (`wholeFloat`);
 * - no repeated key: the parsed objects hold as many keys as the text has colons, or as it has
 *   key ends (`"` + whitespace + `:`). Every key is followed by one colon and one key end,
 *   so both counts are upper bounds (a colon or a quote inside a string makes them larger);
 *   a repeated key collapses into one, so an equal count proves there is none.
 *
 * A false answer only means "scan it".
 */
export function plain(text, value) {
  if (text.indexOf("\\u") !== -1 && SURROGATE.test(text)) return false;
  walk(value);
  if (walked.keys < 0) return false;
  if (walked.whole && wholeFloat(text, walked.fractions)) return false;
  const keys = walked.keys;
  if (keys === 0) return true;
  let colons = 0;
  for (let i = text.indexOf(":"); i !== -1; i = text.indexOf(":", i + 1)) colons++;
  return colons === keys || keyEnds(text) === keys;
}

const SURROGATE = /\\u[dD][89a-fA-F]/;
const KEY_END = /"[ \t\n\r]*:/g;

function keyEnds(text) {
  const ends = text.match(KEY_END);
  return ends === null ? 0 : ends.length;
}

/**
 * Whether the text may hold a float that is a whole number (`1.0`, `1e3`), given how many
 * numbers of the parsed value are not whole. Every number written with a fraction or an
 * exponent has a digit followed by `.`, `e` or `E`; one native call counts those marks (some may
 * be inside strings, and `1.5e3` has two). Each number that is not whole was written so; when
 * there are no more marks than such numbers, no float is whole.
 */
function wholeFloat(text, fractions) {
  const marks = text.match(FLOAT_MARK);
  return marks !== null && marks.length !== fractions;
}

const FLOAT_MARK = /[0-9][.eE]/g;

/**
 * What `walk` found: the keys of all objects (-1: see `walk`), whether a number is whole, and
 * how many are not.
 */
const walked = { keys: 0, whole: false, fractions: 0 };

/**
 * Walks a parsed value (without recursion): counts the keys its objects have together and the
 * numbers that are not whole, and notes whether it holds a whole number. The count is -1 when it holds a number beyond
 * +-(2^53 - 1) (or not finite), or nests deeper than MAX_DEPTH. Nested objects and arrays are
 * only queued (each with its depth) when there are some: most records are one flat object.
 */
function walk(value) {
  let count = 0;
  let whole = false;
  let fractions = 0;
  let pending = null;
  let values = [value];
  let depth = 0; // of the elements of `values`
  for (;;) {
    for (let i = 0; i < values.length; i++) {
      const e = values[i];
      if (typeof e === "object") {
        if (e !== null) (pending ??= []).push(e, depth + 1);
      } else if (typeof e === "number") {
        if (!(e <= MAX_SAFE && e >= -MAX_SAFE)) {
          walked.keys = -1;
          return;
        }
        if (e % 1 === 0) whole = true;
        else fractions++;
      }
    }
    if (pending === null || pending.length === 0) {
      walked.keys = count;
      walked.whole = whole;
      walked.fractions = fractions;
      return;
    }
    depth = pending.pop();
    const v = pending.pop();
    if (depth > MAX_DEPTH) {
      walked.keys = -1;
      return;
    }
    if (Array.isArray(v)) {
      values = v;
    } else {
      values = Object.values(v); // one native call; indexing beats keyed lookups here
      count += values.length;
    }
  }
}

/** The decimal digits of 2^64 - 1 and 2^63: the integers `json()` keeps exact as BigInts. */
const U64_MAX = "18446744073709551615";
const I64_MIN_DIGITS = "9223372036854775808";

/**
 * Scans text that JSON.parse accepted for: a key repeated in one object; an escaped surrogate
 * without its partner; a number beyond the range of a double; nesting deeper than MAX_DEPTH.
 * Returns the first problem ({what, at}) or undefined. When `found` is given, it collects
 * what `json()` must fix in JSON.parse's value, each as [path, literal] (a path of keys and
 * indices): `found.bigints`, the integer literals beyond +-(2^53 - 1) within [-2^63, 2^64);
 * `found.floats`, the floats that hold a safe integer (`1.0`, `1e3`).
 *
 * Strings are skipped with indexOf (native speed); only structure and numbers are looked at
 * character by character, since guest JavaScript runs in an interpreter.
 */
export function scan(text, found) {
  const n = text.length;
  // The next backslash at or after some index: found once, moved on only when passed, so a
  // document with few escapes is not searched to its end for every string.
  let backslash = text.indexOf("\\");
  const escapes = backslash !== -1;
  const nextBackslash = (from) => {
    if (backslash !== -1 && backslash < from) backslash = text.indexOf("\\", from);
    return backslash;
  };
  const stack = [];
  const path = []; // per open array or object: the index or key of the value being read
  let keys = null; // the keys seen in the innermost object; null in an array or at the top
  let wantKey = false;
  let i = 0;
  while (i < n) {
    const c = text.charCodeAt(i);
    if (c === 0x22 /* " */) {
      let end;
      if (escapes) {
        end = stringEnd(text, i, nextBackslash);
        if (typeof end !== "number") return end;
      } else {
        end = text.indexOf('"', i + 1);
      }
      if (wantKey) {
        const raw = text.slice(i + 1, end);
        const key = escapes && raw.indexOf("\\") !== -1 ? JSON.parse(text.slice(i, end + 1)) : raw;
        if (keys.has(key)) return { what: `duplicate key ${JSON.stringify(key)}`, at: i };
        keys.add(key);
        path[path.length - 1] = key;
        wantKey = false;
      }
      i = end + 1;
    } else if (c === 0x7b /* { */ || c === 0x5b /* [ */) {
      if (stack.length === MAX_DEPTH) {
        return { what: `nested more than ${MAX_DEPTH} arrays/objects deep`, at: i };
      }
      stack.push(keys);
      if (c === 0x7b) {
        keys = new Set();
        wantKey = true;
        path.push("");
      } else {
        keys = null;
        path.push(0);
      }
      i++;
    } else if (c === 0x7d /* } */ || c === 0x5d /* ] */) {
      keys = stack.pop();
      path.pop();
      wantKey = false;
      i++;
    } else if (c === 0x2c /* , */) {
      if (keys !== null) wantKey = true;
      else path[path.length - 1]++;
      i++;
    } else if (c === 0x2d /* - */ || (c >= 0x30 && c <= 0x39)) {
      const start = i;
      if (c === 0x2d) i++;
      const digitsFrom = i;
      while (i < n && isDigit(text.charCodeAt(i))) i++;
      const intDigits = i - digitsFrom;
      let integer = true;
      let exponent = false;
      if (i < n && text.charCodeAt(i) === 0x2e /* . */) {
        integer = false;
        i++;
        while (i < n && isDigit(text.charCodeAt(i))) i++;
      }
      const e = i < n ? text.charCodeAt(i) : 0;
      if (e === 0x65 /* e */ || e === 0x45 /* E */) {
        integer = false;
        exponent = true;
        i++;
        const s = text.charCodeAt(i);
        if (s === 0x2b || s === 0x2d) i++;
        while (i < n && isDigit(text.charCodeAt(i))) i++;
      }
      // 2^53 - 1 has 16 digits: shorter integers are always exact, and fewer than 309 digits
      // before the point (without an exponent) are always finite.
      if (integer) {
        if (intDigits >= 16) {
          const literal = text.slice(start, i);
          const v = Number(literal);
          if (!Number.isFinite(v)) return { what: `number ${shown(literal)} out of range`, at: start };
          if (!Number.isSafeInteger(v) && found !== undefined && within64(literal, c === 0x2d, intDigits)) {
            found.bigints.push([path.slice(), literal]);
          }
        }
      } else if (exponent || intDigits > 308 || found !== undefined) {
        const literal = text.slice(start, i);
        const v = Number(literal);
        if (!Number.isFinite(v)) return { what: `number ${shown(literal)} out of range`, at: start };
        if (found !== undefined && Number.isSafeInteger(v)) found.floats.push([path.slice(), literal]);
      }
    } else {
      i++; // whitespace, ':', and the letters of true, false and null
    }
  }
  return undefined;
}

/** Whether an integer literal (of `digits` digits, after its minus sign) lies in [-2^63, 2^64). */
function within64(literal, negative, digits) {
  if (negative) {
    return digits < 19 || (digits === 19 && literal.slice(1) <= I64_MIN_DIGITS);
  }
  return digits < 20 || (digits === 20 && literal <= U64_MAX);
}

/** A number literal as an error message shows it (long ones cut). */
function shown(literal) {
  return literal.length > 40 ? `${literal.slice(0, 37)}...` : literal;
}

function isDigit(c) {
  return c >= 0x30 && c <= 0x39;
}

/**
 * The index of the closing quote of the string that opens at `i`, checking its \u escapes
 * for surrogates without a partner; or a problem.
 */
function stringEnd(text, i, nextBackslash) {
  let j = i + 1;
  for (;;) {
    const quote = text.indexOf('"', j);
    const backslash = nextBackslash(j);
    if (backslash === -1 || backslash > quote) return quote;
    if (text.charCodeAt(backslash + 1) !== 0x75 /* u */) {
      j = backslash + 2; // \" \\ \/ \b \f \n \r \t
      continue;
    }
    const unit = parseInt(text.slice(backslash + 2, backslash + 6), 16);
    if (unit >= 0xd800 && unit <= 0xdbff) {
      if (text.charCodeAt(backslash + 6) === 0x5c && text.charCodeAt(backslash + 7) === 0x75) {
        const low = parseInt(text.slice(backslash + 8, backslash + 12), 16);
        if (low >= 0xdc00 && low <= 0xdfff) {
          j = backslash + 12;
          continue;
        }
      }
      return { what: "lone leading surrogate in hex escape", at: backslash };
    }
    if (unit >= 0xdc00 && unit <= 0xdfff) {
      return { what: "lone trailing surrogate in hex escape", at: backslash };
    }
    j = backslash + 6;
  }
}

/** 1-based line and column (in UTF-16 units) of index `at`. */
function lineColumn(text, at) {
  let line = 1;
  let lineStart = 0;
  for (let k = text.indexOf("\n"); k !== -1 && k < at; k = text.indexOf("\n", k + 1)) {
    line++;
    lineStart = k + 1;
  }
  return { line, column: at - lineStart + 1 };
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
