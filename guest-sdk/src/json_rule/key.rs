//! The keys of the open objects, told apart by a hash of their unescaped text.

use std::borrow::Cow;

use super::escape::unescape;

/// One key of an open object: the offsets of its quotes, whether it has escapes, and a hash of
/// its (unescaped) text, so most pairs of keys are told apart without looking at their text.
#[derive(Clone, Copy)]
pub(super) struct Key {
    pub(super) open: usize,
    close: usize,
    escaped: bool,
    pub(super) hash: u64,
}

impl Key {
    pub(super) fn new(text: &str, open: usize, close: usize, escaped: bool) -> Self {
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

    pub(super) fn raw(self, text: &str) -> &str {
        &text[self.open + 1..self.close]
    }

    /// Its text, unescaped; `None` for a bad escape (not JSON).
    pub(super) fn text(self, text: &str) -> Option<Cow<'_, str>> {
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
    pub(super) fn same_text(self, other: Key, text: &str) -> bool {
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
