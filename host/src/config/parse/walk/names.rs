//! The rules for names, URLs, listen addresses and timestamps, and how messages quote values.

use std::net::{Ipv4Addr, SocketAddr};

use toml::de::DeValue;
use toml::value::{Datetime, Offset};

/// A value as named in a message: `the integer 5`, `the string "yes"`, `a table`.
pub(crate) fn describe(value: &DeValue<'_>) -> String {
    match value {
        DeValue::String(s) => format!("the string {}", quote(s)),
        DeValue::Integer(i) => format!("the integer {i}"),
        DeValue::Float(f) => format!("the float {f}"),
        DeValue::Boolean(b) => format!("the boolean {b}"),
        DeValue::Datetime(d) => format!("the datetime {d}"),
        DeValue::Array(_) => "an array".to_owned(),
        DeValue::Table(_) => "a table".to_owned(),
    }
}

/// A string in double quotes, escaped, at most 60 characters.
pub(crate) fn quote(s: &str) -> String {
    let escaped = s.escape_debug().to_string();
    let mut chars = escaped.chars();
    let head: String = chars.by_ref().take(60).collect();
    if chars.next().is_some() {
        format!("\"{head}…\"")
    } else {
        format!("\"{head}\"")
    }
}

/// A key as written in a dotted path: bare when it can be, else quoted.
pub(crate) fn quote_key(name: &str) -> String {
    let bare = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if bare { name.to_owned() } else { quote(name) }
}

/// `"127.0.0.1:9750"`, `"[::1]:9750"`, `"0.0.0.0:9750"`, `"localhost:9750"` or `":9750"`
/// (127.0.0.1).
pub(crate) fn parse_listen(s: &str) -> Result<SocketAddr, String> {
    let loopback_port = s.strip_prefix(':').or_else(|| s.strip_prefix("localhost:"));
    let parsed = match loopback_port {
        Some(port) => port
            .parse::<u16>()
            .ok()
            .map(|port| SocketAddr::from((Ipv4Addr::LOCALHOST, port))),
        None => s.parse().ok(),
    };
    parsed.ok_or_else(|| {
        format!(
            "{} is not a listen address; expected \"IP:PORT\", e.g. \"127.0.0.1:9750\" \
             (\":9750\" means 127.0.0.1:9750)",
            quote(s)
        )
    })
}

pub(crate) fn is_url(s: &str) -> bool {
    ["http://", "https://"]
        .iter()
        .filter_map(|scheme| s.strip_prefix(scheme))
        .any(|rest| {
            !rest.is_empty() && !rest.starts_with('/') && !rest.contains(char::is_whitespace)
        })
}

/// A subscription or stream name: 1 to 128 letters, digits, `_`, `.` or `-`.
pub(crate) fn is_name(s: &str) -> bool {
    (1..=128).contains(&s.len())
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

/// An environment variable name: letters, digits and `_`, not starting with a digit.
pub(crate) fn is_env_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// An RFC 3339 time with a UTC offset as ms since the Unix epoch (for the command line).
pub fn timestamp_millis(text: &str) -> Option<u64> {
    epoch_millis(&text.parse::<Datetime>().ok()?).ok()
}

pub(crate) enum TimestampError {
    Incomplete,
    /// A date and time TOML takes but the calendar does not (a leap second, 23:59:60).
    NoSuchTime,
    BeforeEpoch,
}

pub(crate) fn epoch_millis(datetime: &Datetime) -> Result<u64, TimestampError> {
    let (Some(d), Some(t), Some(offset)) = (datetime.date, datetime.time, datetime.offset) else {
        return Err(TimestampError::Incomplete);
    };
    let no_such = |_| TimestampError::NoSuchTime;
    let month = time::Month::try_from(d.month).map_err(no_such)?;
    let date = time::Date::from_calendar_date(i32::from(d.year), month, d.day).map_err(no_such)?;
    let clock = time::Time::from_hms_nano(
        t.hour,
        t.minute,
        t.second.unwrap_or(0),
        t.nanosecond.unwrap_or(0),
    )
    .map_err(no_such)?;
    let offset_minutes = match offset {
        Offset::Z => 0,
        Offset::Custom { minutes } => i32::from(minutes),
    };
    let offset = time::UtcOffset::from_whole_seconds(offset_minutes * 60).map_err(no_such)?;
    let at = time::PrimitiveDateTime::new(date, clock).assume_offset(offset);
    u64::try_from(at.unix_timestamp_nanos().div_euclid(1_000_000))
        .map_err(|_| TimestampError::BeforeEpoch)
}
