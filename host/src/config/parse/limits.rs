//! `[subscription.limits]`: what one handler instance may take.

use toml::de::DeValue;

use super::walk::{Section, Walker, quote};
use super::{MAX_CALL_TIMEOUT, MAX_MEMORY, MIN_MEMORY};
use crate::config::Limits;

pub(super) const LIMITS_KEYS: &[&str] = &[
    "memory",
    "timeout",
    "fuel",
    "in_flight_records",
    "in_flight_bytes",
];

/// The limits of a subscription, each defaulted when absent.
pub(super) fn limits(w: &mut Walker<'_>, sec: &Section<'_, '_>) -> Limits {
    let mut limits = Limits::default();
    if let Some(f) = sec.get("memory")
        && let Some(bytes) = w.size(&f)
    {
        if (MIN_MEMORY..=MAX_MEMORY).contains(&bytes) {
            limits.memory = bytes;
        } else {
            let shown = match f.value {
                DeValue::String(s) => quote(s),
                _ => format!("{bytes} bytes"),
            };
            w.report_at(
                &f,
                format!("{shown} is out of range; the memory limit must be from 1MiB to 4GiB"),
            );
        }
    }
    if let Some(timeout) = sec
        .get("timeout")
        .and_then(|f| w.duration(&f, MAX_CALL_TIMEOUT))
    {
        limits.timeout = timeout;
    }
    if let Some(f) = sec.get("fuel") {
        limits.fuel = w.integer(&f, 1, i64::MAX).map(|n| n as u64);
    }
    if let Some(n) = sec
        .get("in_flight_records")
        .and_then(|f| w.integer(&f, 1, 1_000_000))
    {
        limits.in_flight_records = n as usize;
    }
    if let Some(f) = sec.get("in_flight_bytes")
        && let Some(bytes) = w.size(&f)
    {
        if (MIN_MEMORY..=MAX_MEMORY).contains(&bytes) {
            limits.in_flight_bytes = bytes;
        } else {
            w.report_at(&f, "in_flight_bytes must be from 1MiB to 4GiB");
        }
    }
    limits
}
