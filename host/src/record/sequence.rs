//! Sequence numbers as numbers: the decimal digits of a Kinesis sequence number packed two to a
//! byte, inline, so that a [`Position`](super::Position) is copied and compared without touching
//! the heap (the tracker keeps one per record in flight).
//!
//! Kinesis sequence numbers are decimal strings (56 digits today, up to 129 allowed) that grow
//! within a shard and compare as numbers. Up to [`PACKED_DIGITS`] significant digits are packed;
//! anything longer, or not decimal, is kept as text and still compares as before: by the number
//! of digits after the leading zeros, then digit by digit.

use std::cmp::Ordering;
use std::fmt;

/// Significant digits kept inline.
pub const PACKED_DIGITS: usize = 60;

/// A sequence number; its text comes back exactly as given (leading zeros included).
#[derive(Clone)]
pub enum SequenceNumber {
    Packed {
        /// Leading zeros of the text (they do not change the number).
        zeros: u8,
        /// Significant digits.
        len: u8,
        /// Two digits a byte, the first in the high nibble; unused nibbles are 0.
        digits: [u8; PACKED_DIGITS / 2],
    },
    Text(Box<str>),
}

impl SequenceNumber {
    pub fn new(text: &str) -> SequenceNumber {
        let significant = text.trim_start_matches('0');
        let zeros = text.len() - significant.len();
        if significant.len() > PACKED_DIGITS
            || zeros > u8::MAX as usize
            || !significant.bytes().all(|b| b.is_ascii_digit())
        {
            return SequenceNumber::Text(text.into());
        }
        let mut digits = [0u8; PACKED_DIGITS / 2];
        for (i, b) in significant.bytes().enumerate() {
            let d = b - b'0';
            digits[i / 2] |= if i % 2 == 0 { d << 4 } else { d };
        }
        SequenceNumber::Packed {
            zeros: zeros as u8,
            len: significant.len() as u8,
            digits,
        }
    }

    /// The significant digits as text, unpacked into `buf` when packed.
    fn significant<'a>(&'a self, buf: &'a mut [u8; PACKED_DIGITS]) -> &'a [u8] {
        match self {
            SequenceNumber::Packed { len, digits, .. } => {
                let len = *len as usize;
                for (i, slot) in buf[..len].iter_mut().enumerate() {
                    let byte = digits[i / 2];
                    *slot = b'0' + if i % 2 == 0 { byte >> 4 } else { byte & 0x0F };
                }
                &buf[..len]
            }
            SequenceNumber::Text(text) => text.trim_start_matches('0').as_bytes(),
        }
    }

    /// Compares with a sequence number given as text, as numbers, without packing it.
    pub fn cmp_text(&self, text: &str) -> Ordering {
        let mut buf = [0u8; PACKED_DIGITS];
        let mine = self.significant(&mut buf);
        let theirs = text.trim_start_matches('0').as_bytes();
        (mine.len(), mine).cmp(&(theirs.len(), theirs))
    }
}

impl Ord for SequenceNumber {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (
                SequenceNumber::Packed { len, digits, .. },
                SequenceNumber::Packed {
                    len: other_len,
                    digits: other_digits,
                    ..
                },
            ) => {
                // Same length: the packed bytes compare as the digits do (padding is equal).
                len.cmp(other_len).then_with(|| digits.cmp(other_digits))
            }
            _ => {
                let (mut a, mut b) = ([0u8; PACKED_DIGITS], [0u8; PACKED_DIGITS]);
                let (a, b) = (self.significant(&mut a), other.significant(&mut b));
                (a.len(), a).cmp(&(b.len(), b))
            }
        }
    }
}

impl PartialOrd for SequenceNumber {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for SequenceNumber {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for SequenceNumber {}

impl fmt::Display for SequenceNumber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SequenceNumber::Packed { zeros, .. } => {
                for _ in 0..*zeros {
                    f.write_str("0")?;
                }
                let mut buf = [0u8; PACKED_DIGITS];
                let digits = self.significant(&mut buf);
                // Unpacked from decimal digits only: always ASCII.
                f.write_str(std::str::from_utf8(digits).map_err(|_| fmt::Error)?)
            }
            SequenceNumber::Text(text) => f.write_str(text),
        }
    }
}

impl fmt::Debug for SequenceNumber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KINESIS: &str = "49590338271490256608559692538361571095921575989136588898";

    #[test]
    fn a_sequence_number_comes_back_as_the_same_text() {
        for text in [
            KINESIS,
            "0",
            "",
            "007",
            "10",
            &"9".repeat(60),
            &"1".repeat(61),
            "4a2",
        ] {
            assert_eq!(SequenceNumber::new(text).to_string(), text);
        }
        assert!(matches!(
            SequenceNumber::new(KINESIS),
            SequenceNumber::Packed { .. }
        ));
    }

    #[test]
    fn sequence_numbers_compare_as_numbers_packed_or_not() {
        let long = format!("1{}", "0".repeat(70));
        let ordered = ["0", "7", "9", "10", "0011", "99", KINESIS, &long];
        for (i, a) in ordered.iter().enumerate() {
            for (j, b) in ordered.iter().enumerate() {
                let (sa, sb) = (SequenceNumber::new(a), SequenceNumber::new(b));
                assert_eq!(sa.cmp(&sb), i.cmp(&j), "{a} vs {b}");
                assert_eq!(sa.cmp_text(b), i.cmp(&j), "{a} vs text {b}");
            }
        }
        assert_eq!(SequenceNumber::new("0010"), SequenceNumber::new("10"));
        assert_eq!(
            SequenceNumber::new("0").cmp(&SequenceNumber::new("")),
            Ordering::Equal
        );
    }
}
