//! Walking a parsed TOML tree while collecting problems.
//!
//! A [`Walker`] turns byte spans into lines and keeps every [`Problem`] it is told about. A
//! [`Section`] is one table (with its dotted key) whose unknown keys have already been
//! reported; a [`Field`] is one value in it. The typed readers (`text`, `integer`, `duration`,
//! …) report a problem and return `None` when a value does not fit, so a caller can go on and
//! find the next problem.

use std::collections::{HashMap, HashSet};
use std::net::{Ipv4Addr, SocketAddr};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Duration;

use toml::de::{DeTable, DeValue};
use toml::value::{Datetime, Offset};

use super::super::units::{parse_duration, parse_size};
use super::super::{Location, Problem};
use super::interpolate::Written;

/// Collects problems for one config file.
pub(super) struct Walker<'a> {
    file: &'a Path,
    /// The directory relative paths resolve against.
    base: PathBuf,
    /// Byte offset of the start of each line.
    line_starts: Vec<usize>,
    problems: Vec<Problem>,
    /// The strings that took something from the environment, by where they start: what was
    /// written and what it became.
    from_env: HashMap<usize, Written>,
    /// The strings whose `${...}` could not be resolved (reported once, by `interpolate`).
    unresolved: HashSet<usize>,
}

/// One table of the config, e.g. `subscription[0].limits`.
pub(super) struct Section<'t, 'i> {
    /// The dotted key; empty for the root table.
    pub(super) key: String,
    table: &'t DeTable<'i>,
    /// Where the table starts (its `[header]`, or its first key); `None` for the root table.
    span: Option<Range<usize>>,
}

/// One value in a table or array.
pub(super) struct Field<'t, 'i> {
    /// The full dotted key, e.g. `subscription[0].batch`.
    pub(super) key: String,
    /// The last segment of the key: `batch`, or `env[2]`.
    pub(super) name: String,
    pub(super) value: &'t DeValue<'i>,
    pub(super) span: Range<usize>,
}

impl<'t, 'i> Section<'t, 'i> {
    /// The value at `name`, if present.
    pub(super) fn get(&self, name: &str) -> Option<Field<'t, 'i>> {
        let value = self.table.get(name)?;
        Some(Field {
            key: self.child_key(name),
            name: name.to_owned(),
            value: value.get_ref(),
            span: value.span(),
        })
    }

    /// Whether `name` is present at all, whatever its value.
    pub(super) fn has(&self, name: &str) -> bool {
        self.table.get(name).is_some()
    }

    fn child_key(&self, name: &str) -> String {
        child_key(&self.key, name)
    }
}

/// The dotted key of `name` in the table at `parent` (empty for the root table).
pub(super) fn child_key(parent: &str, name: &str) -> String {
    let name = quote_key(name);
    if parent.is_empty() {
        name
    } else {
        format!("{parent}.{name}")
    }
}

impl<'a> Walker<'a> {
    pub(super) fn new(file: &'a Path, text: &str) -> Self {
        let line_starts = std::iter::once(0)
            .chain(text.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        Walker {
            file,
            base: file.parent().map(Path::to_owned).unwrap_or_default(),
            line_starts,
            problems: Vec::new(),
            from_env: HashMap::new(),
            unresolved: HashSet::new(),
        }
    }

    /// Notes that the string at `span` was written `text` and took `value` from the environment.
    pub(super) fn mark_from_env(&mut self, span: &Range<usize>, text: &str, value: &str) {
        let written = Written {
            text: text.to_owned(),
            value: value.to_owned(),
        };
        self.from_env.insert(span.start, written);
    }

    /// Reports a string whose `${...}` cannot be resolved; other problems with it go unsaid.
    pub(super) fn report_unresolved(&mut self, span: Range<usize>, key: &str, message: String) {
        let at = self.location(Some(&span), key);
        self.unresolved.insert(span.start);
        self.problems.push(Problem { at, message });
    }

    /// Whether a field's value took anything from the environment (`${...}`).
    pub(super) fn took_env(&self, field: &Field<'_, '_>) -> bool {
        self.from_env.contains_key(&field.span.start)
    }

    /// The 1-based line of a byte offset.
    pub(super) fn line(&self, offset: usize) -> usize {
        self.line_starts.partition_point(|&start| start <= offset)
    }

    pub(super) fn location(&self, span: Option<&Range<usize>>, key: &str) -> Location {
        Location {
            file: self.file.to_owned(),
            line: span.map(|s| self.line(s.start)),
            key: key.to_owned(),
        }
    }

    /// Where a field stands.
    pub(super) fn at(&self, field: &Field<'_, '_>) -> Location {
        self.location(Some(&field.span), &field.key)
    }

    pub(super) fn report(
        &mut self,
        span: Option<Range<usize>>,
        key: &str,
        message: impl Into<String>,
    ) {
        let mut message = message.into();
        if let Some(start) = span.as_ref().map(|s| s.start) {
            if self.unresolved.contains(&start) {
                return;
            }
            if let Some(written) = self.from_env.get(&start) {
                message = written.hide(&message);
            }
        }
        let at = self.location(span.as_ref(), key);
        self.problems.push(Problem { at, message });
    }

    pub(super) fn report_at(&mut self, field: &Field<'_, '_>, message: impl Into<String>) {
        self.report(Some(field.span.clone()), &field.key, message);
    }

    /// Every problem, in the order of their lines (problems without a line last).
    pub(super) fn finish(mut self) -> Vec<Problem> {
        self.problems
            .sort_by_key(|p| p.at.line.unwrap_or(usize::MAX));
        self.problems
    }

    /// The root table, with its unknown keys reported.
    pub(super) fn root<'t, 'i>(
        &mut self,
        table: &'t DeTable<'i>,
        known: &[&str],
    ) -> Section<'t, 'i> {
        let section = Section {
            key: String::new(),
            table,
            span: None,
        };
        self.check_keys(&section, known);
        section
    }

    /// The sub-table `name` of `parent`, if present and a table, with its unknown keys reported.
    pub(super) fn table<'t, 'i>(
        &mut self,
        parent: &Section<'t, 'i>,
        name: &str,
        known: &[&str],
    ) -> Option<Section<'t, 'i>> {
        let field = parent.get(name)?;
        self.open(&field, known)
    }

    /// A field as a table, with its unknown keys reported.
    pub(super) fn open<'t, 'i>(
        &mut self,
        field: &Field<'t, 'i>,
        known: &[&str],
    ) -> Option<Section<'t, 'i>> {
        let DeValue::Table(table) = field.value else {
            self.mismatch(field, "a table");
            return None;
        };
        let section = Section {
            key: field.key.clone(),
            table,
            span: Some(field.span.clone()),
        };
        self.check_keys(&section, known);
        Some(section)
    }

    fn check_keys(&mut self, section: &Section<'_, '_>, known: &[&str]) {
        for (key, _) in section.table.iter() {
            if !known.contains(&key.get_ref().as_ref()) {
                self.report(
                    Some(key.span()),
                    &section.child_key(key.get_ref()),
                    format!(
                        "unknown key `{}`; expected one of: {}",
                        key.get_ref(),
                        known.join(", ")
                    ),
                );
            }
        }
    }

    /// Reports a required key that is absent, at the line of the table that lacks it.
    pub(super) fn missing(&mut self, section: &Section<'_, '_>, name: &str) {
        self.report(
            section.span.clone(),
            &section.child_key(name),
            format!("missing required key `{name}`"),
        );
    }

    /// The value at `name`, reporting it missing when absent.
    pub(super) fn required<'t, 'i>(
        &mut self,
        section: &Section<'t, 'i>,
        name: &str,
    ) -> Option<Field<'t, 'i>> {
        let field = section.get(name);
        if field.is_none() {
            self.missing(section, name);
        }
        field
    }

    /// Where a key of a section would be (for values that are absent).
    pub(super) fn key_location(&self, section: &Section<'_, '_>, name: &str) -> Location {
        self.location(section.span.as_ref(), &section.child_key(name))
    }

    /// Reports a value of the wrong type.
    pub(super) fn mismatch(&mut self, field: &Field<'_, '_>, expected: &str) {
        let found = describe(field.value);
        self.report_at(field, format!("expected {expected}, found {found}"));
    }

    /// Any string, empty or not.
    pub(super) fn string<'t>(&mut self, field: &Field<'t, '_>) -> Option<&'t str> {
        match field.value {
            DeValue::String(s) => Some(s.as_ref()),
            _ => {
                self.mismatch(field, "a string");
                None
            }
        }
    }

    /// A non-empty string.
    pub(super) fn text(&mut self, field: &Field<'_, '_>) -> Option<String> {
        let s = self.string(field)?;
        if s.trim().is_empty() {
            self.report_at(field, format!("`{}` must not be empty", field.name));
            return None;
        }
        Some(s.to_owned())
    }

    pub(super) fn boolean(&mut self, field: &Field<'_, '_>) -> Option<bool> {
        match field.value {
            DeValue::Boolean(b) => Some(*b),
            _ => {
                self.mismatch(field, "a boolean (true or false)");
                None
            }
        }
    }

    /// An integer in `lo..=hi`.
    pub(super) fn integer(&mut self, field: &Field<'_, '_>, lo: i64, hi: i64) -> Option<i64> {
        let DeValue::Integer(i) = field.value else {
            self.mismatch(field, "an integer");
            return None;
        };
        let range = if hi == i64::MAX {
            format!("at least {lo}")
        } else {
            format!("from {lo} to {hi}")
        };
        match i64::from_str_radix(i.as_str(), i.radix()) {
            Ok(n) if (lo..=hi).contains(&n) => Some(n),
            _ => {
                let message = format!("{i} is out of range; `{}` must be {range}", field.name);
                self.report_at(field, message);
                None
            }
        }
    }

    /// A duration string longer than zero and at most `max`.
    pub(super) fn duration(&mut self, field: &Field<'_, '_>, max: Duration) -> Option<Duration> {
        let parsed = match field.value {
            DeValue::String(s) => parse_duration(s),
            DeValue::Integer(i) => Err(format!(
                "a bare number is ambiguous as a duration; write it with a unit, \
                 e.g. \"{i}s\" or \"{i}ms\""
            )),
            _ => {
                self.mismatch(field, "a duration like \"10s\"");
                return None;
            }
        };
        match parsed {
            Ok(d) if d.is_zero() => {
                let message = format!("`{}` must be longer than zero", field.name);
                self.report_at(field, message);
                None
            }
            Ok(d) if d > max => {
                let message = format!(
                    "`{}` must be at most {}",
                    field.name,
                    humantime::format_duration(max)
                );
                self.report_at(field, message);
                None
            }
            Ok(d) => Some(d),
            Err(message) => {
                self.report_at(field, message);
                None
            }
        }
    }

    /// A size string, or an integer number of bytes.
    pub(super) fn size(&mut self, field: &Field<'_, '_>) -> Option<u64> {
        let parsed = match field.value {
            DeValue::String(s) => parse_size(s),
            DeValue::Integer(i) => u64::from_str_radix(i.as_str(), i.radix())
                .map_err(|_| format!("{i} is not a number of bytes")),
            _ => {
                self.mismatch(field, "a size like \"64MiB\" or a number of bytes");
                return None;
            }
        };
        parsed.map_err(|m| self.report_at(field, m)).ok()
    }

    /// A non-empty path, resolved against the config file's directory.
    pub(super) fn path(&mut self, field: &Field<'_, '_>) -> Option<PathBuf> {
        let s = self.text(field)?;
        Some(self.base.join(s))
    }

    /// A path to a file that must exist; `what` names it in the message ("handler").
    pub(super) fn existing_file(&mut self, field: &Field<'_, '_>, what: &str) -> Option<PathBuf> {
        let path = self.path(field)?;
        if !path.exists() {
            self.report_at(field, format!("{what} file not found: {}", path.display()));
            None
        } else if !path.is_file() {
            self.report_at(field, format!("{what} is not a file: {}", path.display()));
            None
        } else {
            Some(path)
        }
    }

    /// An `http://` or `https://` URL.
    pub(super) fn url(&mut self, field: &Field<'_, '_>) -> Option<String> {
        let s = self.string(field)?;
        if is_url(s) {
            return Some(s.to_owned());
        }
        let message = format!("{} is not an http:// or https:// URL", quote(s));
        self.report_at(field, message);
        None
    }

    /// A Kinesis stream name: 1 to 128 letters, digits, `_`, `.` or `-`.
    pub(super) fn stream_name(&mut self, field: &Field<'_, '_>) -> Option<String> {
        let s = self.text(field)?;
        if is_name(&s) {
            return Some(s);
        }
        let message = format!(
            "{} is not a valid stream name; use 1 to 128 letters, digits, `_`, `.` or `-`",
            quote(&s)
        );
        self.report_at(field, message);
        None
    }

    /// An RFC 3339 timestamp (a string or a TOML offset datetime) as ms since the Unix epoch.
    pub(super) fn timestamp(&mut self, field: &Field<'_, '_>) -> Option<u64> {
        const EXAMPLE: &str = "e.g. \"2026-12-01T00:00:00Z\"";
        let (shown, parsed) = match field.value {
            DeValue::String(s) => (quote(s), s.parse::<Datetime>().ok()),
            DeValue::Datetime(d) => (d.to_string(), Some(*d)),
            _ => {
                self.mismatch(field, &format!("an RFC 3339 timestamp ({EXAMPLE})"));
                return None;
            }
        };
        let message = match parsed.map(|d| epoch_millis(&d)) {
            Some(Ok(ms)) => return Some(ms),
            None => format!("{shown} is not an RFC 3339 timestamp ({EXAMPLE})"),
            Some(Err(TimestampError::Incomplete)) => format!(
                "{shown} needs a date, a time and a UTC offset such as `Z` or `+02:00` \
                 ({EXAMPLE})"
            ),
            Some(Err(TimestampError::BeforeEpoch)) => format!("{shown} is before 1970"),
            Some(Err(TimestampError::NoSuchTime)) => {
                format!("{shown} is not a date and time that exists ({EXAMPLE})")
            }
        };
        self.report_at(field, message);
        None
    }

    /// The entries of a table whatever their keys, keyed `name.key` (for tables of names the
    /// user chooses, such as `[subscription.config]`).
    pub(super) fn entries<'t, 'i>(&mut self, field: &Field<'t, 'i>) -> Option<Vec<Field<'t, 'i>>> {
        let DeValue::Table(table) = field.value else {
            self.mismatch(field, "a table");
            return None;
        };
        let entries = table
            .iter()
            .map(|(name, value)| Field {
                key: child_key(&field.key, name.get_ref()),
                name: name.get_ref().to_string(),
                value: value.get_ref(),
                span: value.span(),
            })
            .collect();
        Some(entries)
    }

    /// The elements of an array, keyed `name[i]`.
    pub(super) fn array<'t, 'i>(&mut self, field: &Field<'t, 'i>) -> Option<Vec<Field<'t, 'i>>> {
        let DeValue::Array(items) = field.value else {
            self.mismatch(field, "an array");
            return None;
        };
        let elements = items
            .iter()
            .enumerate()
            .map(|(i, item)| Field {
                key: format!("{}[{i}]", field.key),
                name: format!("{}[{i}]", field.name),
                value: item.get_ref(),
                span: item.span(),
            })
            .collect();
        Some(elements)
    }
}

/// A value as named in a message: `the integer 5`, `the string "yes"`, `a table`.
pub(super) fn describe(value: &DeValue<'_>) -> String {
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
pub(super) fn quote(s: &str) -> String {
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
fn quote_key(name: &str) -> String {
    let bare = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if bare { name.to_owned() } else { quote(name) }
}

/// `"127.0.0.1:9750"`, `"[::1]:9750"`, `"0.0.0.0:9750"`, `"localhost:9750"` or `":9750"`
/// (127.0.0.1).
pub(super) fn parse_listen(s: &str) -> Result<SocketAddr, String> {
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

pub(super) fn is_url(s: &str) -> bool {
    ["http://", "https://"]
        .iter()
        .filter_map(|scheme| s.strip_prefix(scheme))
        .any(|rest| {
            !rest.is_empty() && !rest.starts_with('/') && !rest.contains(char::is_whitespace)
        })
}

/// A subscription or stream name: 1 to 128 letters, digits, `_`, `.` or `-`.
pub(super) fn is_name(s: &str) -> bool {
    (1..=128).contains(&s.len())
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

/// An environment variable name: letters, digits and `_`, not starting with a digit.
pub(super) fn is_env_name(s: &str) -> bool {
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

enum TimestampError {
    Incomplete,
    /// A date and time TOML takes but the calendar does not (a leap second, 23:59:60).
    NoSuchTime,
    BeforeEpoch,
}

fn epoch_millis(datetime: &Datetime) -> Result<u64, TimestampError> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_count_from_one() {
        let w = Walker::new(Path::new("x.toml"), "a = 1\nb = 2\n\nc = 3");
        let lines: Vec<_> = [0, 5, 6, 12, 13, 17].map(|offset| w.line(offset)).into();
        assert_eq!(lines, [1, 1, 2, 3, 4, 4]);
    }

    #[test]
    fn listen_takes_ip_and_port_or_a_loopback_port() {
        let ok = |s: &str| parse_listen(s).unwrap().to_string();
        assert_eq!(ok("127.0.0.1:9750"), "127.0.0.1:9750");
        assert_eq!(ok(":9750"), "127.0.0.1:9750");
        assert_eq!(ok("localhost:80"), "127.0.0.1:80");
        assert_eq!(ok("[::1]:9750"), "[::1]:9750");
        for bad in ["9750", "localhost", "example.com:80", ":99999", "127.0.0.1"] {
            let err = parse_listen(bad).unwrap_err();
            assert!(
                err.starts_with(&format!("\"{bad}\" is not a listen address")),
                "{err}"
            );
        }
    }

    #[test]
    fn timestamps_become_milliseconds_since_the_epoch() {
        let ms = |s: &str| epoch_millis(&s.parse().unwrap()).ok();
        assert_eq!(ms("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(ms("2026-12-01T00:00:00Z"), Some(1_796_083_200_000));
        assert_eq!(ms("2000-02-29T12:34:56.789Z"), Some(951_827_696_789));
        assert_eq!(ms("2024-03-01T00:30:00-02:30"), Some(1_709_262_000_000));
        assert_eq!(ms("1969-12-31T23:00:00Z"), None);
        assert_eq!(ms("2026-12-01T00:00:00"), None);
        assert_eq!(ms("2026-12-01"), None);
        assert!(matches!(
            epoch_millis(&"2016-12-31T23:59:60Z".parse().unwrap()),
            Err(TimestampError::NoSuchTime)
        ));
    }

    #[test]
    fn names_urls_and_env_names_follow_their_rules() {
        assert!(is_name("shipments.dead-2_x") && !is_name("") && !is_name("a b"));
        assert!(is_name(&"a".repeat(128)) && !is_name(&"a".repeat(129)));
        assert!(is_url("http://127.0.0.1:4567") && is_url("https://kinesis.aws"));
        assert!(!is_url("http://") && !is_url("ftp://x") && !is_url("localhost:4567"));
        assert!(is_env_name("RUST_LOG") && is_env_name("_x1"));
        assert!(!is_env_name("1X") && !is_env_name("A-B") && !is_env_name(""));
    }
}
