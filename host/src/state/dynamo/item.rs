//! The item's layout: attribute names, the expression names every request uses, and the
//! small values a request is made of.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;

/// Attribute names, always through expression names (`key` is a reserved word).
pub(super) const KEY: &str = "key";
pub(super) const VALUE: &str = "value";
pub(super) const COUNT: &str = "count";
pub(super) const EXPIRES: &str = "expires";
/// The token of the conditional write that wrote the item (`put_if`).
pub(super) const WRITER: &str = "writer";

/// A token no other write shares: 128 random bits.
pub(super) fn write_token() -> String {
    let mut bytes = [0u8; 16];
    if getrandom::getrandom(&mut bytes).is_err() {
        // No randomness: a token unique in this process still tells our write from others'
        // of this process; another process's is told apart by the time.
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        return format!("{}-{t}-{n}", std::process::id());
    }
    hex::encode(bytes)
}

/// The expression names every request uses.
pub(super) fn names() -> HashMap<String, String> {
    [("#k", KEY), ("#v", VALUE), ("#c", COUNT), ("#e", EXPIRES)]
        .into_iter()
        .map(|(a, b)| (a.to_owned(), b.to_owned()))
        .collect()
}

/// "The item is live": no expiry, or one still ahead.
pub(super) const LIVE: &str = "(attribute_not_exists(#e) OR #e > :now)";

pub(super) fn s(v: &str) -> AttributeValue {
    AttributeValue::S(v.to_owned())
}

pub(super) fn n(v: u64) -> AttributeValue {
    AttributeValue::N(v.to_string())
}

/// The version a write committed with the checkpoint gives its item (`state::commit`): one
/// more than the last, through `ADD`.
pub(super) const VERSION: &str = "ver";
