//! The typed readers of a [`Walker`]: each reports a problem and returns `None` when a value
//! does not fit, so a caller can go on and find the next problem.

use std::path::PathBuf;
use std::time::Duration;

use toml::de::DeValue;
use toml::value::Datetime;

use super::names::{TimestampError, epoch_millis, is_name, is_url, quote};
use super::{Field, Walker, child_key};
use crate::config::units::{parse_duration, parse_size};

impl Walker<'_> {
    /// Any string, empty or not.
    pub(crate) fn string<'t>(&mut self, field: &Field<'t, '_>) -> Option<&'t str> {
        match field.value {
            DeValue::String(s) => Some(s.as_ref()),
            _ => {
                self.mismatch(field, "a string");
                None
            }
        }
    }

    /// A non-empty string.
    pub(crate) fn text(&mut self, field: &Field<'_, '_>) -> Option<String> {
        let s = self.string(field)?;
        if s.trim().is_empty() {
            self.report_at(field, format!("`{}` must not be empty", field.name));
            return None;
        }
        Some(s.to_owned())
    }

    pub(crate) fn boolean(&mut self, field: &Field<'_, '_>) -> Option<bool> {
        match field.value {
            DeValue::Boolean(b) => Some(*b),
            _ => {
                self.mismatch(field, "a boolean (true or false)");
                None
            }
        }
    }

    /// An integer in `lo..=hi`.
    pub(crate) fn integer(&mut self, field: &Field<'_, '_>, lo: i64, hi: i64) -> Option<i64> {
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
    pub(crate) fn duration(&mut self, field: &Field<'_, '_>, max: Duration) -> Option<Duration> {
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
    pub(crate) fn size(&mut self, field: &Field<'_, '_>) -> Option<u64> {
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
    pub(crate) fn path(&mut self, field: &Field<'_, '_>) -> Option<PathBuf> {
        let s = self.text(field)?;
        Some(self.base.join(s))
    }

    /// A path to a file that must exist; `what` names it in the message ("handler").
    pub(crate) fn existing_file(&mut self, field: &Field<'_, '_>, what: &str) -> Option<PathBuf> {
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
    pub(crate) fn url(&mut self, field: &Field<'_, '_>) -> Option<String> {
        let s = self.string(field)?;
        if is_url(s) {
            return Some(s.to_owned());
        }
        let message = format!("{} is not an http:// or https:// URL", quote(s));
        self.report_at(field, message);
        None
    }

    /// A Kinesis stream name: 1 to 128 letters, digits, `_`, `.` or `-`.
    pub(crate) fn stream_name(&mut self, field: &Field<'_, '_>) -> Option<String> {
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
    pub(crate) fn timestamp(&mut self, field: &Field<'_, '_>) -> Option<u64> {
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
    pub(crate) fn entries<'t, 'i>(&mut self, field: &Field<'t, 'i>) -> Option<Vec<Field<'t, 'i>>> {
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
    pub(crate) fn array<'t, 'i>(&mut self, field: &Field<'t, 'i>) -> Option<Vec<Field<'t, 'i>>> {
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
