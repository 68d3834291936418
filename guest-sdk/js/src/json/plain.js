// The fast path of the rule (see ../json.js): proving from JSON.parse's value, and a few native
// string calls, that the text needs no scan (./scan.js).

import { MAX_DEPTH } from "./scan.js";

/** The largest integer a JavaScript number holds exactly, 2^53 - 1. */
const MAX_SAFE = Number.MAX_SAFE_INTEGER;

/**
 * The fast path, for text JSON.parse accepted: true when the text certainly has none of the
 * problems `scan` looks for and needs none of its fixes, proven mostly from the parsed value
 * (guest JavaScript runs in an interpreter; a walk of the value and a few native string calls
 * cost less than regular expressions over the text, which run in an interpreter too):
 *
 * - no escaped surrogate: the text has no `\u` at all, or none of `\uD800`-`\uDFFF`;
 * - no number out of range and no integer literal past 2^53 - 1: every number parsed lies
 *   within +-(2^53 - 1) (such a literal parses beyond it, an out-of-range one to Infinity);
 * - nesting at most MAX_DEPTH deep, measured by the walk;
 * - no float that holds an integer (`1.0`, `1e3`): the value holds no whole number, or the
 *   text has no more marks of a float (a digit followed by `.`, `e` or `E`) than the value has
 *   numbers that are not whole (`wholeFloat`);
 * - no repeated key: the parsed objects hold as many keys as the text has colons, or as it has
 *   key ends (`"` + whitespace + `:`). Every key is followed by one colon and one key end,
 *   so both counts are upper bounds (a colon or a quote inside a string makes them larger);
 *   a repeated key collapses into one, so an equal count proves there is none.
 *
 * Text written as JSON.stringify writes it (compact, as most producers do) proves the last
 * two at once when it is what JSON.stringify makes of the value again: a repeated key or a
 * float written `1.0` would come back otherwise. One native call, where the value holds a
 * whole number and the text looks compact.
 *
 * A false answer only means "scan it".
 */
export function plain(text, value) {
  if (text.indexOf("\\u") !== -1 && SURROGATE.test(text)) return false;
  walk(value);
  if (walked.keys < 0) return false;
  if (walked.whole) {
    if (compact(text) && JSON.stringify(value) === text) return true;
    if (wholeFloat(text, walked.fractions)) return false;
  }
  const keys = walked.keys;
  if (keys === 0) return true;
  let colons = 0;
  for (let i = text.indexOf(":"); i !== -1; i = text.indexOf(":", i + 1)) colons++;
  return colons === keys || keyEnds(text) === keys;
}

const SURROGATE = /\\u[dD][89a-fA-F]/;

/** Whether the text looks compact: no space after its first colon (Python writes `": "`). */
function compact(text) {
  const colon = text.indexOf(":");
  return colon !== -1 && text.charCodeAt(colon + 1) !== 0x20;
}
const KEY_END = /"[ \t\n\r]*:/g;

function keyEnds(text) {
  const ends = text.match(KEY_END);
  return ends === null ? 0 : ends.length;
}

/**
 * Whether the text may hold a float that is a whole number (`1.0`, `1e3`), given how many
 * numbers of the parsed value are not whole. Every number written with a fraction or an
 * exponent has a digit followed by `.`, `e` or `E`: count those marks (some may be inside
 * strings, and `1.5e3` has two). Each number that is not whole was written so; when there are
 * no more marks than such numbers, no float is whole. Counted with indexOf: guest JavaScript
 * runs in an interpreter, where a regular expression costs more than a few native calls (a
 * match for these marks cost 2 µs on the shipping record, 40 µs on a 1 KB one). The letters
 * e and E are common in keys and text, though: past a few, one regular expression test says
 * whether any follows a digit (if one does, "scan it").
 */
function wholeFloat(text, fractions) {
  let marks = 0;
  for (let i = text.indexOf(".", 1); i !== -1; i = text.indexOf(".", i + 1)) {
    const d = text.charCodeAt(i - 1);
    if (d <= 0x39 && d >= 0x30 && ++marks > fractions) return true;
  }
  let letters = 0;
  for (let k = 0; k < 2; k++) {
    const c = k === 0 ? "e" : "E";
    for (let i = text.indexOf(c, 1); i !== -1; i = text.indexOf(c, i + 1)) {
      const d = text.charCodeAt(i - 1);
      if (d <= 0x39 && d >= 0x30) {
        if (++marks > fractions) return true;
      } else if (++letters > 4) {
        return EXPONENT_MARK.test(text) || marks !== fractions;
      }
    }
  }
  return marks !== fractions;
}

const EXPONENT_MARK = /[0-9][eE]/;

/**
 * What `walk` found: the keys of all objects (-1: see `walk`), whether a number is whole, and
 * how many are not.
 */
const walked = { keys: 0, whole: false, fractions: 0 };

/**
 * Walks a parsed value: counts the keys its objects have together and the numbers that are not
 * whole, and notes whether it holds a whole number. The count is -1 when it holds a number
 * beyond +-(2^53 - 1) (or not finite), or nests deeper than MAX_DEPTH. A recursion (bounded by
 * MAX_DEPTH) knows each level for free: one call per array or object.
 */
function walk(value) {
  keyCount = 0;
  whole = false;
  fractions = 0;
  walked.keys = walkIn([value], 0) ? keyCount : -1;
  walked.whole = whole;
  walked.fractions = fractions;
}

let keyCount = 0;
let whole = false;
let fractions = 0;

/** Walks `values`, the elements of the arrays or objects `level` deep (0: the document). */
function walkIn(values, level) {
  for (let i = 0; i < values.length; i++) {
    const e = values[i];
    if (typeof e === "object") {
      if (e === null) continue;
      if (level === MAX_DEPTH) return false;
      let inner = e;
      if (!Array.isArray(e)) {
        inner = Object.values(e); // one native call; indexing beats keyed lookups here
        keyCount += inner.length;
      }
      if (!walkIn(inner, level + 1)) return false;
    } else if (typeof e === "number") {
      if (!(e <= MAX_SAFE && e >= -MAX_SAFE)) return false;
      if ((e | 0) === e || Math.floor(e) === e) whole = true;
      else fractions++;
    }
  }
  return true;
}
