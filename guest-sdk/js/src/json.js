// Strict JSON for record data: JSON.parse, then one scan for what JSON.parse lets through but
// serde_json (the Rust SDK) rejects, or what JavaScript cannot represent faithfully.
// The rule is written down in README.md ("The JSON rule"); keep the two in step.

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

/**
 * Parses `text` as one JSON value under the SDK's rule, or throws a DecodeError ("not-json").
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
  const problem = scan(text);
  if (problem !== undefined) {
    const { line, column } = lineColumn(text, problem.at);
    throw new DecodeError(
      "not-json",
      `record data is not valid JSON: ${problem.what} at line ${line} column ${column}`,
      { line, column },
    );
  }
  return value;
}

/**
 * The fast path, for text JSON.parse accepted: true when the text certainly has none of the
 * problems `scan` looks for, found with a few native regular-expression calls instead of a
 * walk in interpreted JavaScript. No escaped surrogate (\\uD800-\\uDFFF), no run of 16 digits
 * (integers past 2^53 - 1 and overlong numbers have one), no digit before an `e` (exponents),
 * and as many keys in the text as in the parsed value (a repeated key collapses into one).
 * A false answer only means "scan it".
 */
export function plain(text, value) {
  if (SUSPECT.test(text)) return false;
  const keys = textKeys(text);
  return keys === 0 || keys === valueKeys(value);
}

const SUSPECT = /\\u[dD][89a-fA-F]|\d{16}|\d[eE]/;

/**
 * An upper bound on the keys in the text: every key's closing quote is followed by optional
 * whitespace and a colon, and nothing else in JSON that JSON.parse accepted is, but for a quote
 * inside or at the start of a string value (`"b\\":"`, `":"`), which only makes the count
 * larger. So a count equal to the parsed value's keys proves no key was repeated; a larger one
 * sends the text to `scan`. (A regular expression instead of a walk: guest JavaScript runs in
 * an interpreter, the expression natively; one such pass costs less than the exact count by
 * string tokens it replaced: `json()` went from 41.6 to 31.0 µs a record in the dispatch bench.)
 */
const KEY_END = /"[ \t\n\r]*:/g;

function textKeys(text) {
  const ends = text.match(KEY_END);
  return ends === null ? 0 : ends.length;
}

/** How many keys the objects in a parsed value have together (without recursion). */
function valueKeys(value) {
  if (value === null || typeof value !== "object") return 0;
  let count = 0;
  const pending = [value];
  while (pending.length !== 0) {
    const v = pending.pop();
    if (Array.isArray(v)) {
      for (let i = 0; i < v.length; i++) {
        const e = v[i];
        if (e !== null && typeof e === "object") pending.push(e);
      }
    } else {
      const names = Object.keys(v);
      count += names.length;
      for (let i = 0; i < names.length; i++) {
        const e = v[names[i]];
        if (e !== null && typeof e === "object") pending.push(e);
      }
    }
  }
  return count;
}

/**
 * Scans text that JSON.parse accepted for: a key repeated in one object; an escaped surrogate
 * without its partner; an integer literal beyond +-(2^53 - 1); a number beyond the range of a
 * double. Returns the first problem ({what, at}) or undefined.
 *
 * Strings are skipped with indexOf (native speed); only structure and numbers are looked at
 * character by character, since guest JavaScript runs in an interpreter.
 */
export function scan(text) {
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
        wantKey = false;
      }
      i = end + 1;
    } else if (c === 0x7b /* { */) {
      stack.push(keys);
      keys = new Set();
      wantKey = true;
      i++;
    } else if (c === 0x5b /* [ */) {
      stack.push(keys);
      keys = null;
      i++;
    } else if (c === 0x7d /* } */ || c === 0x5d /* ] */) {
      keys = stack.pop();
      wantKey = false;
      i++;
    } else if (c === 0x2c /* , */) {
      if (keys !== null) wantKey = true;
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
      if (integer) {
        // 2^53 - 1 has 16 digits: shorter integers are always exact.
        if (intDigits >= 16 && !Number.isSafeInteger(Number(text.slice(start, i)))) {
          return {
            what: `integer ${text.slice(start, i)} is beyond +-(2^53 - 1), where JavaScript numbers lose precision`,
            at: start,
          };
        }
      } else if ((exponent || i - start > 308) && !Number.isFinite(Number(text.slice(start, i)))) {
        return { what: `number ${text.slice(start, i)} out of range`, at: start };
      }
    } else {
      i++; // whitespace, ':', and the letters of true, false and null
    }
  }
  return undefined;
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
