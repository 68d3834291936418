//! `\u` escapes: their hex digits, and a key's text unescaped.

/// The four hex digits at `at` as a number.
pub(super) fn hex4(b: &[u8], at: usize) -> Option<u32> {
    let digits = b.get(at..at + 4)?;
    let mut v = 0;
    for &d in digits {
        v = v * 16 + (d as char).to_digit(16)?;
    }
    Some(v)
}

/// The text of a JSON string's content with its escapes resolved; `None` for a bad escape.
/// Surrogates come in pairs here (`string_end` checked them).
pub(super) fn unescape(raw: &str) -> Option<String> {
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
