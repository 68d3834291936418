//! The limits of the SDKs' JSON rule (`guest-sdk/JSON.md`) that serde_json does not keep by
//! itself: it skips the fields a type does not read without looking inside them, and keeps the
//! last of a repeated key in a map. One pass over the whole text checks, read or not:
//!
//! - no key twice in one object (compared after unescaping);
//! - no `\u` escape of a surrogate without its partner;
//! - every number finite as a double (correctly rounded, as serde_json's `float_roundtrip`);
//! - nesting at most [`MAX_DEPTH`] deep.
//!
//! The grammar itself is serde_json's to check: this pass is only exact on JSON text, and says
//! nothing (or anything: the text is refused either way) about text serde_json refuses.

use std::borrow::Cow;
use std::cell::RefCell;
use std::fmt;

/// The deepest nesting of arrays and objects the rule accepts (the outermost is level 1).
pub(crate) const MAX_DEPTH: usize = 128;

/// Objects with more keys than this are checked for repeats once the object is closed (in a
/// table of their hashes); smaller ones key by key, against the keys before (no allocation).
const LINEAR_KEYS: usize = 16;

/// A JSON text that breaks the rule: what, and where (1-based line and byte column, as
/// serde_json counts them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleError {
    what: String,
    line: usize,
    column: usize,
}

impl RuleError {
    /// What is wrong, e.g. `duplicate key "id"`.
    pub fn what(&self) -> &str {
        &self.what
    }

    /// The line it is on, from 1.
    pub fn line(&self) -> usize {
        self.line
    }

    /// The column (in bytes) where it starts, from 1.
    pub fn column(&self) -> usize {
        self.column
    }
}

impl fmt::Display for RuleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} at line {} column {}",
            self.what, self.line, self.column
        )
    }
}

impl std::error::Error for RuleError {}

/// What the pass found, cheaply (a `RuleError` is made of it only when there is one).
#[derive(Clone, Copy)]
enum Problem {
    Duplicate(Key),
    LoneLeading(usize),
    LoneTrailing(usize),
    /// The number from .0 to .1.
    OutOfRange(usize, usize),
    TooDeep(usize),
}

impl Problem {
    #[cold]
    #[inline(never)]
    fn into_error(self, text: &str) -> RuleError {
        let (at, what) = match self {
            Problem::Duplicate(key) => {
                let shown = key.text(text).unwrap_or(Cow::Borrowed(key.raw(text)));
                (key.open, format!("duplicate key {shown:?}"))
            }
            Problem::LoneLeading(at) => (at, "lone leading surrogate in hex escape".to_owned()),
            Problem::LoneTrailing(at) => (at, "lone trailing surrogate in hex escape".to_owned()),
            Problem::OutOfRange(at, end) => {
                let literal = &text[at..end];
                let shown = if literal.len() > 40 {
                    format!("{}...", &literal[..37])
                } else {
                    literal.to_owned()
                };
                (at, format!("number {shown} out of range"))
            }
            Problem::TooDeep(at) => (
                at,
                format!("nested more than {MAX_DEPTH} arrays/objects deep"),
            ),
        };
        let before = &text.as_bytes()[..at];
        let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
        let line_start = before
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |i| i + 1);
        RuleError {
            what,
            line,
            column: at - line_start + 1,
        }
    }
}

/// One key of an open object: the offsets of its quotes, whether it has escapes, and a hash of
/// its (unescaped) text, so most pairs of keys are told apart without looking at their text.
#[derive(Clone, Copy)]
struct Key {
    open: usize,
    close: usize,
    escaped: bool,
    hash: u64,
}

impl Key {
    fn new(text: &str, open: usize, close: usize, escaped: bool) -> Self {
        let hash = if escaped {
            unescape(&text[open + 1..close]).map_or(0, |t| hash(t.as_bytes())) // 0: not JSON
        } else {
            hash(&text.as_bytes()[open + 1..close])
        };
        Key {
            open,
            close,
            escaped,
            hash,
        }
    }

    fn raw(self, text: &str) -> &str {
        &text[self.open + 1..self.close]
    }

    /// Its text, unescaped; `None` for a bad escape (not JSON).
    fn text(self, text: &str) -> Option<Cow<'_, str>> {
        let raw = self.raw(text);
        if self.escaped {
            unescape(raw).map(Cow::Owned)
        } else {
            Some(Cow::Borrowed(raw))
        }
    }

    /// Whether two keys with the same hash have the same text.
    #[cold]
    #[inline(never)]
    fn same_text(self, other: Key, text: &str) -> bool {
        let b = text.as_bytes();
        if !self.escaped && !other.escaped {
            return b[self.open + 1..self.close] == b[other.open + 1..other.close];
        }
        match (self.text(text), other.text(text)) {
            (Some(a), Some(b)) => a == b,
            _ => false,
        }
    }
}

/// A hash of a key's bytes, eight at a time (FxHash's step, with the length mixed in first;
/// the last word is read overlapping the one before, and short keys in at most two reads).
fn hash(bytes: &[u8]) -> u64 {
    const K: u64 = 0x517c_c1b7_2722_0a95;
    let step = |h: u64, word: u64| (h.rotate_left(5) ^ word).wrapping_mul(K);
    let word = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap_or_default());
    let half = |at: usize| {
        u64::from(u32::from_le_bytes(
            bytes[at..at + 4].try_into().unwrap_or_default(),
        ))
    };
    let n = bytes.len();
    let mut h = step(0, n as u64);
    if n >= 8 {
        let mut at = 0;
        while at + 8 < n {
            h = step(h, word(at));
            at += 8;
        }
        step(h, word(n - 8))
    } else if n >= 4 {
        step(h, half(0) | half(n - 4) << 32)
    } else if n > 0 {
        let b = |at: usize| u64::from(bytes[at]);
        step(h, b(0) | b(n / 2) << 8 | b(n - 1) << 16)
    } else {
        h
    }
}

/// What `check` keeps while it runs: the open arrays and objects (for an object, where its
/// keys start in `keys`; [`ARRAY`] for an array) and the keys of the open objects. Kept per
/// thread between calls, so a record costs no allocation.
#[derive(Default)]
struct Scratch {
    open: Vec<usize>,
    keys: Vec<Key>,
}

const ARRAY: usize = usize::MAX;

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::default();
}

/// Checks `text` against the rule's limits (see the module docs).
pub(crate) fn check(text: &str) -> Result<(), RuleError> {
    let result = SCRATCH.with(|scratch| match scratch.try_borrow_mut() {
        Ok(mut scratch) => {
            let result = scan(text, &mut scratch);
            if scratch.keys.capacity() > 4096 {
                *scratch = Scratch::default(); // keep no huge buffer after a huge record
            }
            result
        }
        Err(_) => scan(text, &mut Scratch::default()),
    });
    result.map_err(|p| p.into_error(text))
}

fn scan(text: &str, scratch: &mut Scratch) -> Result<(), Problem> {
    let Scratch { open, keys } = scratch;
    open.clear();
    keys.clear();
    let b = text.as_bytes();
    let n = b.len();
    let mut want_key = false;
    let mut i = 0;
    while i < n {
        match b[i] {
            b'"' => {
                let Some((close, escaped)) = string_end(b, i)? else {
                    return Ok(()); // not closed: not JSON
                };
                if want_key {
                    want_key = false;
                    let key = Key::new(text, i, close, escaped);
                    let from = open.last().copied().unwrap_or(0);
                    let have = &keys[from..];
                    if have.len() < LINEAR_KEYS
                        && have
                            .iter()
                            .any(|k| k.hash == key.hash && k.same_text(key, text))
                    {
                        return Err(Problem::Duplicate(key));
                    }
                    keys.push(key);
                }
                i = close + 1;
            }
            c @ (b'{' | b'[') => {
                if open.len() == MAX_DEPTH {
                    return Err(Problem::TooDeep(i));
                }
                want_key = c == b'{';
                open.push(if want_key { keys.len() } else { ARRAY });
                i += 1;
            }
            b'}' | b']' => {
                match open.pop() {
                    Some(from) if from != ARRAY => {
                        if keys.len() - from > LINEAR_KEYS {
                            repeated(text, &keys[from..])?;
                        }
                        keys.truncate(from);
                    }
                    _ => {}
                }
                want_key = false;
                i += 1;
            }
            b',' => {
                want_key = open.last().is_some_and(|&o| o != ARRAY);
                i += 1;
            }
            b'-' | b'0'..=b'9' => i = number(text, i)?,
            _ => i += 1, // whitespace, ':', the letters of true, false and null
        }
    }
    Ok(())
}

/// The first repeated key (in text order) among the keys of one large object: an open
/// addressing table of their hashes, the text compared only where hashes are equal.
fn repeated(text: &str, keys: &[Key]) -> Result<(), Problem> {
    let size = (keys.len() * 2).next_power_of_two();
    let mut slots = vec![usize::MAX; size];
    for (i, key) in keys.iter().enumerate() {
        let mut slot = (key.hash >> (64 - size.trailing_zeros())) as usize; // the best-mixed bits
        while slots[slot] != usize::MAX {
            let other = keys[slots[slot]];
            if other.hash == key.hash && other.same_text(*key, text) {
                return Err(Problem::Duplicate(*key));
            }
            slot = (slot + 1) & (size - 1);
        }
        slots[slot] = i;
    }
    Ok(())
}

/// The index of the quote that closes the string opening at `start`, and whether it has
/// escapes; `None` when it is not closed (or an escape is cut short). A surrogate escape
/// without its partner is a problem.
#[inline]
fn string_end(b: &[u8], start: usize) -> Result<Option<(usize, bool)>, Problem> {
    let mut escaped = false;
    let mut i = start + 1;
    loop {
        i = quote_or_backslash(b, i);
        match b.get(i) {
            None => return Ok(None),
            Some(b'"') => return Ok(Some((i, escaped))),
            Some(_) => {}
        }
        escaped = true;
        if b.get(i + 1) != Some(&b'u') {
            i += 2; // \" \\ \/ \b \f \n \r \t (or not JSON)
            continue;
        }
        let Some(unit) = hex4(b, i + 2) else {
            return Ok(None);
        };
        match unit {
            0xD800..=0xDBFF => {
                let low = if b.get(i + 6) == Some(&b'\\') && b.get(i + 7) == Some(&b'u') {
                    hex4(b, i + 8)
                } else {
                    None
                };
                if !matches!(low, Some(0xDC00..=0xDFFF)) {
                    return Err(Problem::LoneLeading(i));
                }
                i += 12;
            }
            0xDC00..=0xDFFF => return Err(Problem::LoneTrailing(i)),
            _ => i += 6,
        }
    }
}

/// The index of the first `"` or `\\` at or after `i` (or the length): eight bytes at a time.
#[inline]
fn quote_or_backslash(b: &[u8], mut i: usize) -> usize {
    const ONES: u64 = u64::from_ne_bytes([1; 8]);
    const HIGH: u64 = ONES << 7;
    while let Some(chunk) = b.get(i..i + 8) {
        let v = u64::from_le_bytes(chunk.try_into().unwrap_or_default());
        let quote = v ^ (ONES * u64::from(b'"'));
        let backslash = v ^ (ONES * u64::from(b'\\'));
        // A zero byte of `quote` or `backslash` is a match; the lowest flagged byte is exact.
        let found =
            (quote.wrapping_sub(ONES) & !quote | backslash.wrapping_sub(ONES) & !backslash) & HIGH;
        if found != 0 {
            return i + (found.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while i < b.len() && b[i] != b'"' && b[i] != b'\\' {
        i += 1;
    }
    i
}

/// The four hex digits at `at` as a number.
fn hex4(b: &[u8], at: usize) -> Option<u32> {
    let digits = b.get(at..at + 4)?;
    let mut v = 0;
    for &d in digits {
        v = v * 16 + (d as char).to_digit(16)?;
    }
    Some(v)
}

/// The text of a JSON string's content with its escapes resolved; `None` for a bad escape.
/// Surrogates come in pairs here (`string_end` checked them).
fn unescape(raw: &str) -> Option<String> {
    let b = raw.as_bytes();
    let mut out = String::with_capacity(raw.len());
    let mut i = 0;
    while let Some(k) = raw[i..].find('\\') {
        out.push_str(&raw[i..i + k]);
        i += k;
        let (c, len) = match *b.get(i + 1)? {
            b'"' => ('"', 2),
            b'\\' => ('\\', 2),
            b'/' => ('/', 2),
            b'b' => ('\u{8}', 2),
            b'f' => ('\u{c}', 2),
            b'n' => ('\n', 2),
            b'r' => ('\r', 2),
            b't' => ('\t', 2),
            b'u' => match hex4(b, i + 2)? {
                high @ 0xD800..=0xDBFF => {
                    let low = hex4(b, i + 8).filter(|l| (0xDC00..=0xDFFF).contains(l))?;
                    let c = 0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00);
                    (char::from_u32(c)?, 12)
                }
                unit => (char::from_u32(unit)?, 6),
            },
            _ => return None,
        };
        out.push(c);
        i += len;
    }
    out.push_str(&raw[i..]);
    Some(out)
}

/// Skips the number that starts at `start`, checking that it is finite as a double; answers
/// the index after it.
#[inline]
fn number(text: &str, start: usize) -> Result<usize, Problem> {
    let b = text.as_bytes();
    let digits = |mut i: usize| {
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        i
    };
    let int_start = start + usize::from(b[start] == b'-');
    let int_end = digits(int_start);
    let mut i = int_end;
    let mut frac = i..i;
    if b.get(i) == Some(&b'.') {
        i = digits(i + 1);
        frac = int_end + 1..i;
    }
    let exponent = matches!(b.get(i), Some(b'e' | b'E'));
    let mut exp: i64 = 0;
    if exponent {
        i += 1;
        let negative = b.get(i) == Some(&b'-');
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        let exp_start = i;
        i = digits(i);
        for &d in &b[exp_start..i] {
            exp = exp.saturating_mul(10).saturating_add(i64::from(d - b'0'));
        }
        if negative {
            exp = -exp;
        }
    }
    // Without an exponent, fewer than 309 digits before the point stay below 10^308.
    if (exponent || int_end - int_start > 308)
        && rounds_to_infinity(&b[int_start..int_end], &b[frac], exp)
    {
        return Err(Problem::OutOfRange(start, i));
    }
    Ok(i)
}

/// The decimal digits of 2^1024 - 2^970, halfway between the largest double and 2^1024: a
/// number at least this large rounds to infinity (a tie goes to the even neighbour, 2^1024).
const INFINITY_EDGE: &str = concat!(
    "17976931348623158079372897140530341507993413271003782693617377898044496829276475",
    "09466490179775872070963302864166928879109465555478519404026306574886715058206819",
    "08902000708383676273854845817711531764475730270069855571366959622842914819860834",
    "936475292719074168444365510704342711559699508093042880177904174497792",
);

/// Whether the number with these digits before and after the point, times 10^`exp`, rounds to
/// infinity as a double (correctly rounded, as every SDK's parser does), decided exactly on
/// the digits.
fn rounds_to_infinity(int: &[u8], frac: &[u8], exp: i64) -> bool {
    let all = || int.iter().chain(frac);
    let leading = all().take_while(|&&d| d == b'0').count();
    if leading == int.len() + frac.len() {
        return false; // zero
    }
    // The number is 0.D × 10^place, D its digits from the first that is not 0.
    let place = (int.len() as i64)
        .saturating_sub(leading as i64)
        .saturating_add(exp);
    match place.cmp(&(INFINITY_EDGE.len() as i64)) {
        std::cmp::Ordering::Less => false,
        std::cmp::Ordering::Greater => true,
        std::cmp::Ordering::Equal => {
            let mut d = all().skip(leading);
            for &edge in INFINITY_EDGE.as_bytes() {
                match d.next() {
                    // D ends here (the rest zeros): below the edge, whose last digit is not 0
                    None => return false,
                    Some(&x) if x != edge => return x > edge,
                    Some(_) => {}
                }
            }
            true // the edge itself, or more
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdict(text: &str) -> Result<(), String> {
        check(text).map_err(|e| e.to_string())
    }

    #[test]
    fn duplicate_keys_at_any_depth() {
        assert_eq!(
            verdict(r#"{"id":1,"address":"A","carrier":"dhl","id":2}"#),
            Err(r#"duplicate key "id" at line 1 column 39"#.into())
        );
        assert!(verdict(r#"{"a":{"y":1,"y":2}}"#).is_err());
        assert!(verdict(r#"[{"a":1},{"b":1,"b":2}]"#).is_err());
        assert!(verdict(r#"{"id":1,"\u0069d":2}"#).is_err());
        assert!(verdict(r#"{"\ud83d\ude00":1,"😀":2}"#).is_err());
        assert_eq!(
            verdict("{\n \"a\": 1,\n \"a\": 2\n}"),
            Err(r#"duplicate key "a" at line 3 column 2"#.into())
        );
        // the same key in different objects, keys that only look alike
        assert!(verdict(r#"{"a":{"a":1},"b":[{"a":2},{"a":3}],"A":0}"#).is_ok());
        assert!(verdict(r#"{"\\":1,"\\\\":2,"\"":3,"a\"":4}"#).is_ok());
        assert!(verdict(r#"{"a":"x","b":{"c":1},"d":2,"c":3}"#).is_ok());
        // a value that is a string is not a key
        assert!(verdict(r#"{"a":"a","b":["a","a"]}"#).is_ok());
        // objects with many keys (sorted once closed)
        let many: Vec<String> = (0..100).map(|i| format!("\"k{i}\":{i}")).collect();
        assert!(verdict(&format!("{{{}}}", many.join(","))).is_ok());
        let again = format!("{{{},\"k7\":0}}", many.join(","));
        assert_eq!(
            verdict(&again),
            Err(format!(
                "duplicate key \"k7\" at line 1 column {}",
                again.len() - 6
            ))
        );
        let again_early = format!("{{\"k3\":0,{}}}", many.join(","));
        assert!(verdict(&again_early).is_err());
    }

    #[test]
    fn lone_surrogates() {
        for (text, what) in [
            (r#"{"address":"\ud800"}"#, "lone leading surrogate"),
            (r#""\ud800\u0041""#, "lone leading surrogate"),
            (r#""\ud800\ud800""#, "lone leading surrogate"),
            (r#""\ud800""#, "lone leading surrogate"),
            (r#""\udc00x""#, "lone trailing surrogate"),
            (r#""\ude00\ud83d""#, "lone trailing surrogate"),
            (r#"{"\ud800":1}"#, "lone leading surrogate"),
            (r#"["ok", "\\", "\uDBFF"]"#, "lone leading surrogate"),
        ] {
            let e = check(text).unwrap_err();
            assert!(e.what().starts_with(what), "{text}: {e}");
        }
        assert_eq!(check(r#"{"address":"\ud800"}"#).unwrap_err().column(), 13);
        assert!(verdict(r#""\uD83D\uDE00 \ud83d\ude9a""#).is_ok());
        assert!(verdict(r#""\\ud800""#).is_ok()); // an escaped backslash, then text
    }

    #[test]
    fn numbers_finite_as_doubles() {
        for ok in [
            "0",
            "-0",
            "1e308",
            "1.7976931348623157e308",
            "1.7976931348623158e308", // rounds to the largest double
            "-1.7976931348623158e308",
            "1e-400",
            "0e99999999999",
            "1e-99999999999",
            "18446744073709551616",
            &"1".repeat(79),
            &format!("1{}", "0".repeat(308)), // 1e308, 309 digits
            &format!("0.{}", "1".repeat(500)),
            &format!("0.{}1e400", "0".repeat(400)),
        ] {
            assert!(verdict(ok).is_ok(), "{ok}");
        }
        for bad in [
            "1e400",
            "-1e400",
            "[1E+309]",
            "1.7976931348623159e308",
            "1e99999999999",
            &"9".repeat(309),
            &"1".repeat(400),
            &format!("1{}.5", "0".repeat(400)),
        ] {
            let e = check(bad).unwrap_err();
            assert!(e.what().ends_with("out of range"), "{bad}: {e}");
        }
    }

    #[test]
    fn the_edge_of_infinity_is_decided_as_a_correctly_rounding_parser_does() {
        let edge = INFINITY_EDGE;
        assert_eq!(edge.len(), 309);
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = move |n: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % n
        };
        let mut infinite = 0;
        for k in 1..=320 {
            for bump in [-1i8, 0, 1] {
                // the edge's first k digits (the last one moved by `bump`), then random ones
                let mut d: Vec<u8> = edge.as_bytes()[..k.min(309)].to_vec();
                let last = d.len() - 1;
                d[last] = (d[last] as i8 + bump).clamp(b'0' as i8, b'9' as i8) as u8;
                for _ in 0..next(4) {
                    d.push(b'0' + next(10) as u8);
                }
                if d[0] == b'0' {
                    continue;
                }
                let d = String::from_utf8(d).unwrap();
                for literal in [
                    format!("{}.{}e308", &d[..1], &d[1..]),
                    format!("0.{d}e309"),
                    format!("{d}e{}", 309 - d.len() as i64),
                    if d.len() >= 309 {
                        format!("{}.{}", &d[..309], &d[309..])
                            .trim_end_matches('.')
                            .to_owned()
                    } else {
                        format!("{d}{}", "0".repeat(309 - d.len()))
                    },
                    format!("-{}.{}E+308", &d[..1], &d[1..]),
                ] {
                    let expected = literal.parse::<f64>().unwrap().is_infinite();
                    infinite += usize::from(expected);
                    assert_eq!(check(&literal).is_err(), expected, "{literal}");
                    // serde_json (float_roundtrip) reads it the same way, where a type reads it
                    let read = serde_json::from_str::<f64>(&literal);
                    assert_eq!(read.is_err(), expected, "serde_json: {literal}");
                    if let Ok(v) = read {
                        assert_eq!(v, literal.parse::<f64>().unwrap(), "serde_json: {literal}");
                    }
                }
            }
        }
        assert!(infinite > 1000, "{infinite}");
        for (literal, expected) in [
            ("0e99999999999999999999", false),
            ("1e99999999999999999999", true),
            ("1e-99999999999999999999", false),
            ("0.000000000000000000001e330", true),
            ("0.000000000000000000001e329", false),
            ("100e307", true),
            ("10e307", false),
        ] {
            assert_eq!(check(literal).is_err(), expected, "{literal}");
        }
    }

    #[test]
    fn depth() {
        let nested = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        assert!(verdict(&nested(MAX_DEPTH)).is_ok());
        assert_eq!(
            verdict(&nested(MAX_DEPTH + 1)),
            Err("nested more than 128 arrays/objects deep at line 1 column 129".into())
        );
        assert!(verdict(&nested(100_000)).is_err());
        let objects = |n: usize| format!("{}1{}", "{\"a\":".repeat(n), "}".repeat(n));
        assert!(verdict(&objects(MAX_DEPTH)).is_ok());
        assert!(verdict(&objects(MAX_DEPTH + 1)).is_err());
        // brackets inside strings do not nest
        assert!(verdict(&format!("[\"{}\"]", "[".repeat(300))).is_ok());
    }

    /// The rule decided another way, for the random test below: serde_json reads every value
    /// (so it refuses lone surrogates and out-of-range numbers itself) into a visitor that
    /// counts the depth and remembers the keys of each object.
    fn reference(text: &str) -> bool {
        use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
        use std::collections::HashSet;

        struct Strict(usize);

        impl<'de> DeserializeSeed<'de> for Strict {
            type Value = ();
            fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
                d.deserialize_any(self)
            }
        }

        impl<'de> Visitor<'de> for Strict {
            type Value = ();
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("JSON")
            }
            fn visit_bool<E>(self, _: bool) -> Result<(), E> {
                Ok(())
            }
            fn visit_u64<E>(self, _: u64) -> Result<(), E> {
                Ok(())
            }
            fn visit_i64<E>(self, _: i64) -> Result<(), E> {
                Ok(())
            }
            fn visit_f64<E>(self, _: f64) -> Result<(), E> {
                Ok(())
            }
            fn visit_str<E>(self, _: &str) -> Result<(), E> {
                Ok(())
            }
            fn visit_unit<E>(self) -> Result<(), E> {
                Ok(())
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
                if self.0 == MAX_DEPTH {
                    return Err(de::Error::custom("too deep"));
                }
                while seq.next_element_seed(Strict(self.0 + 1))?.is_some() {}
                Ok(())
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
                if self.0 == MAX_DEPTH {
                    return Err(de::Error::custom("too deep"));
                }
                let mut keys = HashSet::new();
                while let Some(key) = map.next_key::<String>()? {
                    if !keys.insert(key) {
                        return Err(de::Error::custom("duplicate key"));
                    }
                    map.next_value_seed(Strict(self.0 + 1))?;
                }
                Ok(())
            }
        }

        let mut de = serde_json::Deserializer::from_str(text);
        de.disable_recursion_limit();
        Strict(0).deserialize(&mut de).is_ok() && de.end().is_ok()
    }

    #[test]
    fn random_documents_agree_with_serde_json_reading_everything() {
        let mut state = 0x2026_0126_u64;
        let mut next = move |n: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % n as u64) as usize
        };
        let pieces = [
            "\"a\"",
            "\"b\"",
            "\"\\u0061\"",
            "\"\\ud83d\\ude00\"",
            "\"😀\"",
            "\"\\ud800\"",
            "\"\\udc00\"",
            "\"\\\\\"",
            "\"x\\\"y\"",
            "0",
            "-0",
            "1.5",
            "1e3",
            "1e400",
            "-1e400",
            "1.7976931348623158e308",
            "1.7976931348623159e308",
            "18446744073709551616",
            "true",
            "null",
        ];
        let mut refused = 0;
        for _ in 0..20_000 {
            // a random document: values from `pieces`, arrays and objects of them
            fn value(
                next: &mut dyn FnMut(usize) -> usize,
                pieces: &[&str],
                depth: usize,
            ) -> String {
                match next(10) {
                    0..=4 => pieces[next(pieces.len())].to_owned(),
                    5..=6 if depth < 6 => {
                        let items: Vec<String> = (0..next(4))
                            .map(|_| value(next, pieces, depth + 1))
                            .collect();
                        format!("[{}]", items.join(","))
                    }
                    7..=9 if depth < 6 => {
                        let items: Vec<String> = (0..next(5))
                            .map(|_| {
                                let key = pieces[next(9)];
                                format!("{key} : {}", value(next, pieces, depth + 1))
                            })
                            .collect();
                        format!("{{{}}}", items.join(",\n"))
                    }
                    _ => "1".to_owned(),
                }
            }
            let mut text = value(&mut next, &pieces, 0);
            if next(50) == 0 {
                let n = MAX_DEPTH - 2 + next(4);
                text = format!("{}{text}{}", "[".repeat(n), "]".repeat(n));
            }
            let expected = reference(&text);
            let syntax_ok = serde_json::from_str::<serde::de::IgnoredAny>(&text).is_ok();
            assert_eq!(check(&text).is_ok() && syntax_ok, expected, "{text}");
            refused += usize::from(!expected);
        }
        assert!(refused > 2000, "{refused}");
    }

    #[test]
    fn quote_or_backslash_finds_the_first() {
        let text = "abcdefgh\"ijklmnop\\qrstuvwxyz0123456789\"";
        for i in 0..text.len() {
            let naive = text[i..].find(['"', '\\']).map_or(text.len(), |k| i + k);
            assert_eq!(quote_or_backslash(text.as_bytes(), i), naive, "{i}");
        }
        assert_eq!(quote_or_backslash(b"0123456789abcdef", 0), 16);
    }

    #[test]
    fn text_that_is_not_json_is_left_to_serde_json() {
        for text in [
            "",
            "\"",
            "\"\\",
            "\"\\u12",
            "{\"a",
            "[1,",
            "-",
            "1e",
            "{\"\\x\":1}",
            "tru",
            "}}]]",
        ] {
            assert!(verdict(text).is_ok(), "{text:?}");
        }
    }
}
