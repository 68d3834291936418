//! The JSON rule's pass (`super`) against cases of each limit, the edge of infinity, and
//! random documents read in full by serde_json.

use std::fmt;

use super::lex::{INFINITY_EDGE, quote_or_backslash};
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
        fn value(next: &mut dyn FnMut(usize) -> usize, pieces: &[&str], depth: usize) -> String {
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
