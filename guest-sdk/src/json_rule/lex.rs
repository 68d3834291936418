//! Reading the text's strings and numbers: where a string ends (and its surrogate escapes
//! paired), where a number ends (and whether it is finite as a double).

use super::escape::hex4;
use super::problem::Problem;

/// The index of the quote that closes the string opening at `start`, and whether it has
/// escapes; `None` when it is not closed (or an escape is cut short). A surrogate escape
/// without its partner is a problem.
#[inline]
pub(super) fn string_end(b: &[u8], start: usize) -> Result<Option<(usize, bool)>, Problem> {
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
pub(super) fn quote_or_backslash(b: &[u8], mut i: usize) -> usize {
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

/// Skips the number that starts at `start`, checking that it is finite as a double; answers
/// the index after it.
#[inline]
pub(super) fn number(text: &str, start: usize) -> Result<usize, Problem> {
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
pub(super) const INFINITY_EDGE: &str = concat!(
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
