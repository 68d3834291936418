//! Durations (`"200ms"`, `"1.5s"`, `"1m30s"`) and sizes (`"64MiB"`, `"100MB"`, `"65536"`) as
//! written in the config.
//!
//! Both take a decimal number followed by a unit; fractions are computed exactly (no floating
//! point), so `"1.5MiB"` is 1 572 864 bytes and `"0.1s"` is 100 ms.

use std::time::Duration;

const DURATION_FORMS: &str = "expected a number with a unit (ns, us, ms, s, m, h or d), \
                              e.g. \"200ms\", \"1.5s\", \"10s\" or \"1m30s\"";

const SIZE_FORMS: &str = "expected a number of bytes, or a number with a unit: B, KB, MB, GB, TB \
                          (powers of 1000) or KiB, MiB, GiB, TiB (powers of 1024), \
                          e.g. \"64MiB\" or \"65536\"";

/// At most this many fractional digits are taken into account (more are ignored).
const MAX_FRACTION_DIGITS: usize = 18;

/// Parses a duration such as `"200ms"`, `"10s"`, `"1.5s"`, `"1m"`, `"1h"`, `"500us"` or a sum of
/// such parts, `"1m30s"` / `"1h 30m"`. A number without a unit is an error: it is ambiguous.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let shown = shorten(s);
    let text = s.trim();
    if text.is_empty() {
        return Err(format!("the duration is empty; {DURATION_FORMS}"));
    }
    let mut total: u128 = 0;
    let mut rest = text;
    while !rest.is_empty() {
        let Some((number, after)) = Decimal::split(rest) else {
            return Err(format!("\"{shown}\" is not a duration; {DURATION_FORMS}"));
        };
        let (unit, after) = split_unit(after.trim_start());
        if unit.is_empty() {
            return Err(if after.is_empty() {
                format!("\"{shown}\" has no unit; {DURATION_FORMS}")
            } else {
                format!("\"{shown}\" is not a duration; {DURATION_FORMS}")
            });
        }
        let Some(nanos_per_unit) = duration_unit(unit) else {
            return Err(format!(
                "\"{shown}\" has an unknown unit \"{unit}\"; {DURATION_FORMS}"
            ));
        };
        let part = number.times(nanos_per_unit);
        total = part
            .and_then(|(nanos, _)| total.checked_add(nanos))
            .ok_or_else(|| format!("\"{shown}\" is too long a duration"))?;
        rest = after.trim_start();
    }
    let secs = u64::try_from(total / 1_000_000_000)
        .map_err(|_| format!("\"{shown}\" is too long a duration"))?;
    let nanos = (total % 1_000_000_000) as u32;
    Ok(Duration::new(secs, nanos))
}

/// Parses a size in bytes such as `"64MiB"`, `"1GiB"`, `"512KiB"`, `"100MB"`, `"1.5MiB"` or a
/// plain number of bytes, `"65536"`. Units are case-insensitive; KB, MB, GB, TB are powers of
/// 1000 and KiB, MiB, GiB, TiB powers of 1024.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let shown = shorten(s);
    let text = s.trim();
    if text.is_empty() {
        return Err(format!("the size is empty; {SIZE_FORMS}"));
    }
    let Some((number, after)) = Decimal::split(text) else {
        return Err(format!("\"{shown}\" is not a size; {SIZE_FORMS}"));
    };
    let (unit, after) = split_unit(after.trim_start());
    if !after.trim().is_empty() {
        return Err(format!("\"{shown}\" is not a size; {SIZE_FORMS}"));
    }
    let Some(bytes_per_unit) = size_unit(unit) else {
        return Err(format!(
            "\"{shown}\" has an unknown unit \"{unit}\"; {SIZE_FORMS}"
        ));
    };
    match number.times(bytes_per_unit) {
        Some((bytes, false)) => {
            u64::try_from(bytes).map_err(|_| format!("\"{shown}\" is too large a size"))
        }
        Some((_, true)) => Err(format!("\"{shown}\" is not a whole number of bytes")),
        None => Err(format!("\"{shown}\" is too large a size")),
    }
}

/// A size as written in a config: whole GiB, MiB or KiB when it is one, else bytes.
pub fn show_size(bytes: u64) -> String {
    for (unit, shift) in [("GiB", 30), ("MiB", 20), ("KiB", 10)] {
        if bytes >= 1 << shift && bytes.is_multiple_of(1 << shift) {
            return format!("{} {unit}", bytes >> shift);
        }
    }
    if bytes == 1 {
        "1 byte".to_owned()
    } else {
        format!("{bytes} bytes")
    }
}

/// Nanoseconds in one of a duration's units.
fn duration_unit(unit: &str) -> Option<u128> {
    Some(match unit {
        "ns" => 1,
        "us" | "µs" | "μs" => 1_000,
        "ms" => 1_000_000,
        "s" | "sec" | "secs" | "second" | "seconds" => 1_000_000_000,
        "m" | "min" | "mins" | "minute" | "minutes" => 60_000_000_000,
        "h" | "hr" | "hrs" | "hour" | "hours" => 3_600_000_000_000,
        "d" | "day" | "days" => 86_400_000_000_000,
        _ => return None,
    })
}

/// Bytes in one of a size's units (case-insensitive; no unit means bytes).
fn size_unit(unit: &str) -> Option<u128> {
    Some(match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        "kib" => 1 << 10,
        "mib" => 1 << 20,
        "gib" => 1 << 30,
        "tib" => 1 << 40,
        _ => return None,
    })
}

/// Splits off the leading run of letters (the unit).
fn split_unit(s: &str) -> (&str, &str) {
    let end = s
        .char_indices()
        .find(|(_, c)| !c.is_alphabetic())
        .map_or(s.len(), |(i, _)| i);
    s.split_at(end)
}

/// A non-negative decimal number, kept as digits so that scaling it is exact.
struct Decimal<'s> {
    whole: &'s str,
    fraction: &'s str,
}

impl<'s> Decimal<'s> {
    /// Splits a leading `123`, `1.5` or `.5` off `s`.
    fn split(s: &'s str) -> Option<(Decimal<'s>, &'s str)> {
        let digits = |t: &'s str| {
            let end = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
            t.split_at(end)
        };
        let (whole, rest) = digits(s);
        let (fraction, rest) = match rest.strip_prefix('.') {
            Some(after_dot) => digits(after_dot),
            None => ("", rest),
        };
        if whole.is_empty() && fraction.is_empty() {
            return None;
        }
        Some((Decimal { whole, fraction }, rest))
    }

    /// `self × scale`, as a whole number and whether a fractional part was dropped; `None` on
    /// overflow.
    fn times(&self, scale: u128) -> Option<(u128, bool)> {
        let whole_digits = self.whole.trim_start_matches('0');
        let whole: u128 = if whole_digits.is_empty() {
            0
        } else if whole_digits.len() > 30 {
            return None;
        } else {
            whole_digits.parse().ok()?
        };
        let fraction_digits = &self.fraction[..self.fraction.len().min(MAX_FRACTION_DIGITS)];
        let fraction: u128 = if fraction_digits.is_empty() {
            0
        } else {
            fraction_digits.parse().ok()?
        };
        let denominator = 10u128.pow(fraction_digits.len() as u32);
        let scaled_fraction = fraction.checked_mul(scale)?;
        let dropped = scaled_fraction % denominator != 0
            || self.fraction[fraction_digits.len()..].contains(|c: char| c != '0');
        let value = whole
            .checked_mul(scale)?
            .checked_add(scaled_fraction / denominator)?;
        Some((value, dropped))
    }
}

/// The value as shown in an error message: at most 40 characters.
fn shorten(s: &str) -> String {
    let mut chars = s.chars();
    let head: String = chars.by_ref().take(40).collect();
    if chars.next().is_some() {
        format!("{head}…")
    } else {
        head
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_show_in_the_largest_whole_unit() {
        assert_eq!(show_size(10 << 20), "10 MiB");
        assert_eq!(show_size(1 << 30), "1 GiB");
        assert_eq!(show_size(1536), "1536 bytes");
        assert_eq!(show_size(2048), "2 KiB");
        assert_eq!(show_size(1), "1 byte");
    }

    #[test]
    fn durations_take_the_documented_units() {
        assert_eq!(parse_duration("200ms"), Ok(Duration::from_millis(200)));
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("1m"), Ok(Duration::from_secs(60)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("500us"), Ok(Duration::from_micros(500)));
        assert_eq!(parse_duration("500µs"), Ok(Duration::from_micros(500)));
        assert_eq!(parse_duration("7ns"), Ok(Duration::from_nanos(7)));
        assert_eq!(parse_duration("2d"), Ok(Duration::from_secs(2 * 86_400)));
        assert_eq!(parse_duration(" 10s "), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("10 seconds"), Ok(Duration::from_secs(10)));
    }

    #[test]
    fn durations_may_have_fractions_and_several_parts() {
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("0.1s"), Ok(Duration::from_millis(100)));
        assert_eq!(parse_duration(".25s"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("1h 30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("0s"), Ok(Duration::ZERO));
    }

    #[test]
    fn a_duration_without_a_unit_is_ambiguous() {
        let err = parse_duration("10").unwrap_err();
        assert!(err.contains("\"10\" has no unit"), "{err}");
        assert!(err.contains("ms, s, m, h"), "{err}");
    }

    #[test]
    fn bad_durations_name_the_value_and_the_accepted_forms() {
        for bad in ["fast", "10x", "-1s", "1s5", "s", "1.s.", "10 parsecs"] {
            let err = parse_duration(bad).unwrap_err();
            assert!(err.contains(&format!("\"{bad}\"")), "{bad}: {err}");
            assert!(err.contains("e.g. \"200ms\""), "{bad}: {err}");
        }
        assert!(
            parse_duration("10x")
                .unwrap_err()
                .contains("unknown unit \"x\"")
        );
        assert!(parse_duration("").unwrap_err().contains("empty"));
    }

    #[test]
    fn absurdly_long_durations_are_refused() {
        let err = parse_duration("99999999999999999999999d").unwrap_err();
        assert!(err.contains("too long"), "{err}");
    }

    #[test]
    fn sizes_take_si_and_iec_units() {
        assert_eq!(parse_size("64MiB"), Ok(64 << 20));
        assert_eq!(parse_size("1GiB"), Ok(1 << 30));
        assert_eq!(parse_size("512KiB"), Ok(512 << 10));
        assert_eq!(parse_size("100MB"), Ok(100_000_000));
        assert_eq!(parse_size("2KB"), Ok(2_000));
        assert_eq!(parse_size("3GB"), Ok(3_000_000_000));
        assert_eq!(parse_size("1TiB"), Ok(1 << 40));
        assert_eq!(parse_size("65536"), Ok(65_536));
        assert_eq!(parse_size("10B"), Ok(10));
        assert_eq!(parse_size("64 MiB"), Ok(64 << 20));
        assert_eq!(parse_size("64mib"), Ok(64 << 20));
    }

    #[test]
    fn sizes_may_have_exact_fractions() {
        assert_eq!(parse_size("1.5MiB"), Ok(3 << 19));
        assert_eq!(parse_size("0.5KB"), Ok(500));
        let err = parse_size("1.5B").unwrap_err();
        assert!(err.contains("not a whole number of bytes"), "{err}");
    }

    #[test]
    fn bad_sizes_name_the_value_and_the_accepted_forms() {
        for bad in ["big", "64M", "64 MiB extra", "-1MiB", "MiB"] {
            let err = parse_size(bad).unwrap_err();
            assert!(err.contains(&format!("\"{bad}\"")), "{bad}: {err}");
            assert!(err.contains("KiB, MiB, GiB"), "{bad}: {err}");
        }
        assert!(
            parse_size("64M")
                .unwrap_err()
                .contains("unknown unit \"M\"")
        );
        let err = parse_size("99999999999TiB").unwrap_err();
        assert!(err.contains("too large"), "{err}");
    }
}
