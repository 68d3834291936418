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
mod tests;
