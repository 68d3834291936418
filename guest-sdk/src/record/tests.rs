//! `Record`: its fields, `text`, `json` and the JSON rule's categories through `json`.

use super::*;

#[derive(Debug, PartialEq, Deserialize)]
struct Shipment {
    id: u64,
    address: String,
    carrier: String,
}

#[derive(Debug, PartialEq, Deserialize)]
struct Borrowed<'a> {
    carrier: &'a str,
}

#[test]
fn json_decodes_a_matching_record() {
    let r = Record::new(
        "pk",
        "1",
        r#"{"id":7,"address":"Main St 1","carrier":"dhl"}"#,
    );
    let s: Shipment = r.json().unwrap();
    assert_eq!(
        s,
        Shipment {
            id: 7,
            address: "Main St 1".into(),
            carrier: "dhl".into()
        }
    );
    let b = r.json::<Borrowed<'_>>().unwrap();
    assert_eq!(b.carrier, "dhl");
}

#[test]
fn json_reports_bad_json_and_wrong_shape() {
    let r = Record::new("pk", "1", "{not json");
    let e = r.json::<Shipment>().unwrap_err();
    assert!(matches!(&e, DecodeError::Json(j) if j.is_syntax()), "{e:?}");
    assert!(
        e.to_string().starts_with("record data is not valid JSON"),
        "{e}"
    );

    let r = Record::new("pk", "1", r#"{"id":7,"address":"x"}"#);
    let e = r.json::<Shipment>().unwrap_err();
    assert!(matches!(&e, DecodeError::Json(j) if j.is_data()), "{e:?}");
    assert!(e.to_string().contains("missing field `carrier`"), "{e}");
    assert!(std::error::Error::source(&e).is_some());
}

#[test]
fn json_reports_non_utf8_data() {
    let r = Record::new("pk", "1", vec![b'{', b'"', 0xff, 0xfe, b'"', b'}']);
    let e = r.json::<Shipment>().unwrap_err();
    match &e {
        DecodeError::NotUtf8(u) => assert_eq!(u.valid_up_to(), 2),
        other => panic!("expected NotUtf8, got {other:?}"),
    }
    assert_eq!(
        e.to_string(),
        "record data is not UTF-8 text (invalid byte at offset 2)"
    );
    assert!(r.text().is_err());
}

/// The verdict of the shipping example's type on `data`: "ok", "rule" (the SDKs' JSON
/// rule), "json" (serde_json: syntax or shape).
fn shipment(data: &str) -> &'static str {
    match Record::new("pk", "1", data).json::<Shipment>() {
        Ok(_) => "ok",
        Err(DecodeError::Rule(_)) => "rule",
        Err(DecodeError::Json(_)) => "json",
        Err(e) => panic!("{e}"),
    }
}

fn with_id(id: &str) -> String {
    format!(r#"{{"id":{id},"address":"1 Main St","carrier":"dhl"}}"#)
}

fn with_unread(x: &str) -> String {
    format!(r#"{{"id":7,"address":"1 Main St","carrier":"dhl","x":{x}}}"#)
}

// One test per category of the JSON rule (guest-sdk/JSON.md); the Python and JavaScript
// SDKs' tests check the same cases.

#[test]
fn rule_integer_fields_take_integer_literals_only() {
    assert_eq!(shipment(&with_id("7")), "ok");
    for float in ["1.0", "1e3", "1E0", "10e-1", "-0", "0.0", "7.5"] {
        assert_eq!(shipment(&with_id(float)), "json", "{float}");
    }
    // floats are fine where the handler reads none, or reads a float
    assert_eq!(shipment(&with_unread("1.0")), "ok");
    let v: f64 = Record::new("pk", "1", "7").json().unwrap();
    assert_eq!(v, 7.0);
}

#[test]
fn rule_integers_past_2_53_and_past_64_bits() {
    for id in ["9007199254740993", "18446744073709551615"] {
        assert_eq!(shipment(&with_id(id)), "ok", "{id}");
    }
    let r = Record::new("pk", "1", with_id("18446744073709551615"));
    assert_eq!(r.json::<Shipment>().unwrap().id, u64::MAX);
    // past 64 bits an integer literal is a float: refused by a u64, fine unread
    assert_eq!(shipment(&with_id("18446744073709551616")), "json");
    assert_eq!(shipment(&with_id(&"1".repeat(30))), "json");
    for x in ["18446744073709551616", "-9223372036854775809"] {
        assert_eq!(shipment(&with_unread(x)), "ok", "{x}");
    }
    let v: serde_json::Value = Record::new("pk", "1", "-9223372036854775808")
        .json()
        .unwrap();
    assert_eq!(v.as_i64(), Some(i64::MIN));
    let v: serde_json::Value = Record::new("pk", "1", "-0").json().unwrap();
    assert!(v.is_f64());
}

#[test]
fn rule_lone_surrogates_anywhere() {
    for x in [
        r#""\ud800""#,
        r#""\udc00""#,
        r#""\ud800\u0041""#,
        r#"{"\ud800":1}"#,
    ] {
        assert_eq!(shipment(&with_unread(x)), "rule", "{x}");
    }
    let read = r#"{"id":7,"address":"\ud83d St","carrier":"dhl"}"#;
    assert_eq!(shipment(read), "rule");
    let pair = r#"{"id":7,"address":"\ud83d\ude9a St","carrier":"dhl"}"#;
    assert_eq!(shipment(pair), "ok");
}

#[test]
fn rule_duplicate_keys_at_the_top_and_nested() {
    let top = r#"{"id":7,"address":"1 Main St","carrier":"dhl","x":1,"x":2}"#;
    assert_eq!(shipment(top), "rule");
    let id_twice = r#"{"id":7,"address":"1 Main St","carrier":"dhl","id":8}"#;
    assert_eq!(shipment(id_twice), "rule");
    for x in [
        r#"{"a":1,"a":2}"#,
        r#"{"a":1,"\u0061":2}"#,
        r#"[{"b":{"c":1,"c":1}}]"#,
    ] {
        assert_eq!(shipment(&with_unread(x)), "rule", "{x}");
    }
    assert_eq!(shipment(&with_unread(r#"[{"a":1},{"a":2}]"#)), "ok");
    let e = Record::new("pk", "1", r#"{"a":{"b":1,"b":2}}"#)
        .json::<serde_json::Value>()
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        r#"record data is not valid JSON: duplicate key "b" at line 1 column 13"#
    );
    assert!(std::error::Error::source(&e).is_some());
}

#[test]
fn rule_numbers_finite_as_doubles() {
    for x in [
        "1e400",
        "-1e400",
        "1.7976931348623159e308",
        &"1".repeat(400),
    ] {
        assert_eq!(shipment(&with_unread(x)), "rule", "{x}");
    }
    for x in ["1.7976931348623158e308", "1e-400", &"1".repeat(79)] {
        assert_eq!(shipment(&with_unread(x)), "ok", "{x}");
    }
    // read, the largest double is read as every language rounds it
    let v: f64 = Record::new("pk", "1", "1.7976931348623158e308")
        .json()
        .unwrap();
    assert_eq!(v, f64::MAX);
    let v: f64 = Record::new("pk", "1", "2.2250738585072011e-308")
        .json()
        .unwrap();
    assert_eq!(v, "2.2250738585072011e-308".parse::<f64>().unwrap());
}

#[test]
fn rule_long_digit_runs() {
    for x in [
        "1".repeat(79),
        format!("0.{}", "1".repeat(500)),
        format!("1{}", "0".repeat(308)),
    ] {
        assert_eq!(shipment(&with_unread(&x)), "ok", "{x}");
    }
    assert_eq!(shipment(&with_unread(&"9".repeat(309))), "rule");
}

#[test]
fn rule_nesting_depth() {
    let nested = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
    // the shipment object is level 1
    assert_eq!(shipment(&with_unread(&nested(127))), "ok");
    assert_eq!(shipment(&with_unread(&nested(128))), "rule");
    // read whole, 128 levels are fine too (serde_json alone stops at 127)
    let v: serde_json::Value = Record::new("pk", "1", nested(128)).json().unwrap();
    assert!(v.is_array());
    let e = Record::new("pk", "1", nested(129))
        .json::<serde_json::Value>()
        .unwrap_err();
    assert!(matches!(e, DecodeError::Rule(_)), "{e}");
    assert!(e.to_string().contains("nested more than 128"), "{e}");
    let e = Record::new("pk", "1", nested(1_000_000))
        .json::<serde_json::Value>()
        .unwrap_err();
    assert!(matches!(e, DecodeError::Rule(_)), "{e}");
}

#[test]
fn accessors_and_builders() {
    let r = Record::new("cust-1", "4960", b"hi".to_vec())
        .with_sub_sequence_number(3)
        .with_arrival_millis(1_700_000_000_000);
    assert_eq!(r.partition_key(), "cust-1");
    assert_eq!(r.sequence_number(), "4960");
    assert_eq!(r.sub_sequence_number(), 3);
    assert_eq!(r.arrival_millis(), 1_700_000_000_000);
    assert_eq!(r.data(), b"hi");
    assert_eq!(r.text().unwrap(), "hi");
    assert!(format!("{r:?}").contains("\"hi\""));
    assert_eq!(r.into_data(), b"hi");

    let i = BatchInfo::new("s", "shardId-000000000001")
        .with_attempt(2)
        .with_millis_behind_latest(Some(5));
    assert_eq!(
        (
            i.stream(),
            i.shard_id(),
            i.attempt(),
            i.millis_behind_latest()
        ),
        ("s", "shardId-000000000001", 2, Some(5))
    );
}
