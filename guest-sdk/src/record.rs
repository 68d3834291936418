//! The records a handler receives and where they come from.

use std::fmt;
use std::str::Utf8Error;

use serde::Deserialize;

use crate::__private::wit;
use crate::json_rule::{self, RuleError};

/// One Kinesis record, as the host delivered it.
///
/// The record owns its data (it was moved out of the call's arguments, not copied).
/// [`Record::new`] and the `with_*` methods build one for native unit tests of a handler.
#[derive(Clone, PartialEq, Eq)]
pub struct Record {
    inner: wit::KinesisRecord,
    attempt: u32,
}

impl Record {
    /// A record with this partition key, sequence number and data; sub-sequence number and
    /// arrival time are 0. Handlers get their records from the host; this is for tests.
    pub fn new(
        partition_key: impl Into<String>,
        sequence_number: impl Into<String>,
        data: impl Into<Vec<u8>>,
    ) -> Self {
        Self {
            inner: wit::KinesisRecord {
                partition_key: partition_key.into(),
                sequence_number: sequence_number.into(),
                sub_sequence_number: 0,
                approximate_arrival_timestamp: 0,
                data: data.into(),
            },
            attempt: 1,
        }
    }

    /// The same record with this sub-sequence number.
    #[must_use]
    pub fn with_sub_sequence_number(mut self, sub_sequence_number: u32) -> Self {
        self.inner.sub_sequence_number = sub_sequence_number;
        self
    }

    /// The same record with this arrival time (milliseconds since the Unix epoch).
    #[must_use]
    pub fn with_arrival_millis(mut self, millis: u64) -> Self {
        self.inner.approximate_arrival_timestamp = millis;
        self
    }

    /// The same record with this attempt number.
    #[must_use]
    pub fn with_attempt(mut self, attempt: u32) -> Self {
        self.attempt = attempt;
        self
    }

    /// Which delivery of the record this is: 1 the first time; under a retry cap
    /// (`max_attempts`) a retried record comes back with 2, 3, ... (the same as its batch's
    /// [`BatchInfo::attempt`]).
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// The partition key the producer gave the record.
    pub fn partition_key(&self) -> &str {
        &self.inner.partition_key
    }

    /// The record's sequence number in its shard (a decimal string, as Kinesis writes it).
    pub fn sequence_number(&self) -> &str {
        &self.inner.sequence_number
    }

    /// The position of this user record inside a KPL aggregate; 0 for a plain record.
    pub fn sub_sequence_number(&self) -> u32 {
        self.inner.sub_sequence_number
    }

    /// When Kinesis accepted the record, in milliseconds since the Unix epoch (approximate).
    pub fn arrival_millis(&self) -> u64 {
        self.inner.approximate_arrival_timestamp
    }

    /// The record's data, as the producer put it.
    pub fn data(&self) -> &[u8] {
        &self.inner.data
    }

    /// Takes the record's data out of the record.
    pub fn into_data(self) -> Vec<u8> {
        self.inner.data
    }

    /// The record's data as UTF-8 text.
    ///
    /// # Errors
    ///
    /// When the data is not valid UTF-8.
    pub fn text(&self) -> Result<&str, Utf8Error> {
        std::str::from_utf8(&self.inner.data)
    }

    /// Decodes the record's data as JSON into `T`, under the JSON rule every shardhost SDK
    /// follows (`guest-sdk/JSON.md`): serde_json's strict JSON, and in the *whole* document,
    /// fields `T` does not read included, no key twice in one object, no lone surrogate
    /// escape, no number beyond a double's range and nesting at most 128 deep. Integer fields
    /// take integer literals only (`1.0` and `1e3` are floats, as serde_json reads them);
    /// floats are rounded correctly (serde_json's `float_roundtrip`).
    ///
    /// `T` may borrow from the record (for example `&str` fields), or own its data.
    ///
    /// # Errors
    ///
    /// [`DecodeError::NotUtf8`] when the data is not UTF-8 text, [`DecodeError::Rule`] when it
    /// breaks one of the rule's limits, [`DecodeError::Json`] when it is not JSON or does not
    /// have the shape of `T`.
    pub fn json<'a, T: Deserialize<'a>>(&'a self) -> Result<T, DecodeError> {
        let text = self.text().map_err(DecodeError::NotUtf8)?;
        json_rule::check(text).map_err(DecodeError::Rule)?;
        let mut de = serde_json::Deserializer::from_str(text);
        // The rule's depth (128) was checked; serde_json's own limit would stop at 127.
        de.disable_recursion_limit();
        let value = T::deserialize(&mut de).map_err(DecodeError::Json)?;
        de.end().map_err(DecodeError::Json)?;
        Ok(value)
    }

    pub(crate) fn from_wit(record: wit::KinesisRecord, attempt: u32) -> Self {
        Self {
            inner: record,
            attempt,
        }
    }
}

impl fmt::Debug for Record {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = f.debug_struct("Record");
        s.field("partition_key", &self.partition_key())
            .field("sequence_number", &self.sequence_number());
        if self.sub_sequence_number() != 0 {
            s.field("sub_sequence_number", &self.sub_sequence_number());
        }
        s.field("arrival_millis", &self.arrival_millis());
        match self.text() {
            Ok(text) => s.field("data", &text),
            Err(_) => s.field("data", &self.data()),
        };
        s.finish()
    }
}

impl AsRef<[u8]> for Record {
    fn as_ref(&self) -> &[u8] {
        self.data()
    }
}

/// Why [`Record::json`] could not decode a record.
#[derive(Debug)]
#[non_exhaustive]
pub enum DecodeError {
    /// The data is not UTF-8 text, so it cannot be JSON.
    NotUtf8(Utf8Error),
    /// The data is text, but not JSON, or JSON of another shape than the type asked for
    /// (see [`serde_json::Error::classify`]).
    Json(serde_json::Error),
    /// The data is JSON that the SDKs' JSON rule refuses (`guest-sdk/JSON.md`), anywhere in
    /// the document: a key twice in one object, a lone surrogate escape, a number beyond a
    /// double's range, or nesting deeper than 128.
    Rule(RuleError),
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotUtf8(e) => write!(
                f,
                "record data is not UTF-8 text (invalid byte at offset {})",
                e.valid_up_to()
            ),
            Self::Json(e) if e.is_data() => {
                write!(f, "record data is JSON of another shape: {e}")
            }
            Self::Json(e) => write!(f, "record data is not valid JSON: {e}"),
            Self::Rule(e) => write!(f, "record data is not valid JSON: {e}"),
        }
    }
}

impl std::error::Error for DecodeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::NotUtf8(e) => Some(e),
            Self::Json(e) => Some(e),
            Self::Rule(e) => Some(e),
        }
    }
}

/// Where a batch comes from, and which delivery it is.
#[derive(Clone, PartialEq, Eq)]
#[repr(transparent)]
pub struct BatchInfo(wit::BatchInfo);

impl BatchInfo {
    /// Batch information for this stream and shard: first attempt, lag unknown. Handlers get
    /// theirs from the host; this is for tests.
    pub fn new(stream: impl Into<String>, shard_id: impl Into<String>) -> Self {
        Self(wit::BatchInfo {
            stream: stream.into(),
            shard_id: shard_id.into(),
            millis_behind_latest: None,
            attempt: 1,
        })
    }

    /// The same information with this lag.
    #[must_use]
    pub fn with_millis_behind_latest(mut self, millis: Option<u64>) -> Self {
        self.0.millis_behind_latest = millis;
        self
    }

    /// The same information with this attempt number.
    #[must_use]
    pub fn with_attempt(mut self, attempt: u32) -> Self {
        self.0.attempt = attempt;
        self
    }

    /// The stream the records were read from.
    pub fn stream(&self) -> &str {
        &self.0.stream
    }

    /// The shard the records were read from.
    pub fn shard_id(&self) -> &str {
        &self.0.shard_id
    }

    /// How far the reader is behind the tip of the shard, when Kinesis said so.
    pub fn millis_behind_latest(&self) -> Option<u64> {
        self.0.millis_behind_latest
    }

    /// 1 for a first delivery; higher for a copy published under a retry cap.
    pub fn attempt(&self) -> u32 {
        self.0.attempt
    }

    pub(crate) fn from_wit(info: wit::BatchInfo) -> Self {
        Self(info)
    }
}

impl fmt::Debug for BatchInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BatchInfo")
            .field("stream", &self.stream())
            .field("shard_id", &self.shard_id())
            .field("millis_behind_latest", &self.millis_behind_latest())
            .field("attempt", &self.attempt())
            .finish()
    }
}

#[cfg(test)]
mod tests {
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
}
