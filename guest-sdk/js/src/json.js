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
 * problems `scan` looks for, proven mostly from the parsed value (guest JavaScript runs in an
 * interpreter; a walk of the value and a few native string calls cost less than regular
 * expressions over the text, which run in an interpreter too):
 *
 * - no escaped surrogate: the text has no `\u` at all, or none of `\uD800`-`\uDFFF`;
 * - no number out of range and no integer literal past 2^53 - 1: every number parsed lies
 *   within +-(2^53 - 1) (such a literal parses beyond it, an out-of-range one to Infinity);
 * - no repeated key: the parsed objects hold as many keys as the text has colons, or as it has
 *   key ends (`"` + whitespace + `:`). Every key is followed by one colon and one key end,
 *   so both counts are upper bounds (a colon or a quote inside a string makes them larger);
 *   a repeated key collapses into one, so an equal count proves there is none.
 *
 * A false answer only means "scan it".
 */
export function plain(text, value) {
  if (text.indexOf("\\u") !== -1 && SURROGATE.test(text)) return false;
  const keys = valueKeys(value);
  if (keys <= 0) return keys === 0;
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
 * How many keys the objects in a parsed value have together (without recursion), or -1 when
 * it holds a number beyond +-(2^53 - 1) (or not finite). Nested objects and arrays are only
 * queued when there are some: most records are one flat object.
 */
function valueKeys(value) {
  let count = 0;
  let pending = null;
  let values = [value];
  for (;;) {
    for (let i = 0; i < values.length; i++) {
      const e = values[i];
      if (typeof e === "object") {
        if (e !== null) (pending ??= []).push(e);
      } else if (typeof e === "number" && !(e <= MAX_SAFE && e >= -MAX_SAFE)) return -1;
    }
    if (pending === null || pending.length === 0) return count;
    const v = pending.pop();
    if (Array.isArray(v)) {
      values = v;
    } else {
      values = Object.values(v); // one native call; indexing beats keyed lookups here
      count += values.length;
    }
  }
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
