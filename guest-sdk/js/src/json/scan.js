// The full rule, for text JSON.parse accepted that the fast path (./plain.js) could not prove:
// one pass over the text for what JSON.parse cannot see (repeated keys, lone surrogate escapes,
// numbers out of range, depth), and for the numbers `json()` must fix. See ../json.js.

/** The deepest nesting of arrays and objects the rule accepts (the outermost is level 1). */
export const MAX_DEPTH = 128;

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
export function lineColumn(text, at) {
  let line = 1;
  let lineStart = 0;
  for (let k = text.indexOf("\n"); k !== -1 && k < at; k = text.indexOf("\n", k + 1)) {
    line++;
    lineStart = k + 1;
  }
  return { line, column: at - lineStart + 1 };
}
