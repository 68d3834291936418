//! What a handler's version is: the sha256 of its component's bytes, and the short form every
//! log line and report names it by.

use sha2::{Digest, Sha256};

/// A handler's version: the sha256 of its bytes, in hex.
pub fn version_of(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The first 12 hex digits of a version, for logs and reports: its first 12 characters, cut at
/// a character boundary (a version read from the table or a record may be any text).
pub fn short_version(version: &str) -> &str {
    let end = version
        .char_indices()
        .nth(12)
        .map_or(version.len(), |(at, _)| at);
    &version[..end]
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_short_version_is_twelve_characters_cut_at_a_character_boundary() {
        let short = super::short_version;
        assert_eq!(short(&"ab".repeat(32)), "abababababab");
        assert_eq!(short("abc"), "abc");
        assert_eq!(short(""), "");
        // Byte 12 falls inside `é`, `€`, `🦀`: each is kept whole, never split (a panic before).
        assert_eq!(short("aaaaaaaaaaaé-rest"), "aaaaaaaaaaaé");
        assert_eq!(short(&"é".repeat(40)), "é".repeat(12));
        assert_eq!(short(&"€".repeat(5)), "€€€€€");
        assert_eq!(
            short(&format!("a{}", "🦀".repeat(20))),
            format!("a{}", "🦀".repeat(11))
        );
    }
}
