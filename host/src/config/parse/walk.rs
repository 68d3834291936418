//! Walking a parsed TOML tree while collecting problems.
//!
//! A [`Walker`] turns byte spans into lines and keeps every [`Problem`] it is told about. A
//! [`Section`] is one table (with its dotted key) whose unknown keys have already been
//! reported; a [`Field`] is one value in it. The typed readers (`text`, `integer`, `duration`,
//! …) report a problem and return `None` when a value does not fit, so a caller can go on and
//! find the next problem.

mod names;
mod read;

use std::collections::{HashMap, HashSet};
use std::ops::Range;
use std::path::{Path, PathBuf};

use toml::de::{DeTable, DeValue};

use crate::config::{Location, Problem};
pub use names::timestamp_millis;
pub(crate) use names::{describe, is_env_name, is_name, is_url, parse_listen, quote, quote_key};

/// Collects problems for one config file.
pub(crate) struct Walker<'a> {
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

/// A string of the file before and after interpolation, as the [`Walker`] keeps it (`interpolate` notes them).
pub(crate) struct Written {
    pub(crate) text: String,
    pub(crate) value: String,
}

impl Written {
    /// A message about this string with its value, as the readers quote it, replaced by what
    /// the file says (`"${TIMEOUT}"`): what came from the environment is never shown.
    pub(crate) fn hide(&self, message: &str) -> String {
        if self.value.is_empty() {
            return message.to_owned();
        }
        let head: String = self.value.chars().take(40).collect();
        let quoted = [
            quote(&self.value),
            format!("{:?}", self.value),
            format!("\"{}\"", self.value),
            format!("\"{head}…\""),
        ];
        let shown = quote(&self.text);
        quoted
            .iter()
            .fold(message.to_owned(), |m, q| m.replace(q.as_str(), &shown))
    }
}

/// One table of the config, e.g. `subscription[0].limits`.
pub(crate) struct Section<'t, 'i> {
    /// The dotted key; empty for the root table.
    pub(crate) key: String,
    table: &'t DeTable<'i>,
    /// Where the table starts (its `[header]`, or its first key); `None` for the root table.
    span: Option<Range<usize>>,
}

/// One value in a table or array.
pub(crate) struct Field<'t, 'i> {
    /// The full dotted key, e.g. `subscription[0].batch`.
    pub(crate) key: String,
    /// The last segment of the key: `batch`, or `env[2]`.
    pub(crate) name: String,
    pub(crate) value: &'t DeValue<'i>,
    pub(crate) span: Range<usize>,
}

impl<'t, 'i> Section<'t, 'i> {
    /// The value at `name`, if present.
    pub(crate) fn get(&self, name: &str) -> Option<Field<'t, 'i>> {
        let value = self.table.get(name)?;
        Some(Field {
            key: self.child_key(name),
            name: name.to_owned(),
            value: value.get_ref(),
            span: value.span(),
        })
    }

    /// Whether `name` is present at all, whatever its value.
    pub(crate) fn has(&self, name: &str) -> bool {
        self.table.get(name).is_some()
    }

    fn child_key(&self, name: &str) -> String {
        child_key(&self.key, name)
    }
}

/// The dotted key of `name` in the table at `parent` (empty for the root table).
pub(crate) fn child_key(parent: &str, name: &str) -> String {
    let name = quote_key(name);
    if parent.is_empty() {
        name
    } else {
        format!("{parent}.{name}")
    }
}

impl<'a> Walker<'a> {
    pub(crate) fn new(file: &'a Path, text: &str) -> Self {
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
    pub(crate) fn mark_from_env(&mut self, span: &Range<usize>, text: &str, value: &str) {
        let written = Written {
            text: text.to_owned(),
            value: value.to_owned(),
        };
        self.from_env.insert(span.start, written);
    }

    /// Reports a string whose `${...}` cannot be resolved; other problems with it go unsaid.
    pub(crate) fn report_unresolved(&mut self, span: Range<usize>, key: &str, message: String) {
        let at = self.location(Some(&span), key);
        self.unresolved.insert(span.start);
        self.problems.push(Problem { at, message });
    }

    /// Whether a field's value took anything from the environment (`${...}`).
    pub(crate) fn took_env(&self, field: &Field<'_, '_>) -> bool {
        self.from_env.contains_key(&field.span.start)
    }

    /// The 1-based line of a byte offset.
    pub(crate) fn line(&self, offset: usize) -> usize {
        self.line_starts.partition_point(|&start| start <= offset)
    }

    pub(crate) fn location(&self, span: Option<&Range<usize>>, key: &str) -> Location {
        Location {
            file: self.file.to_owned(),
            line: span.map(|s| self.line(s.start)),
            key: key.to_owned(),
        }
    }

    /// Where a field stands.
    pub(crate) fn at(&self, field: &Field<'_, '_>) -> Location {
        self.location(Some(&field.span), &field.key)
    }

    pub(crate) fn report(
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

    pub(crate) fn report_at(&mut self, field: &Field<'_, '_>, message: impl Into<String>) {
        self.report(Some(field.span.clone()), &field.key, message);
    }

    /// Every problem, in the order of their lines (problems without a line last).
    pub(crate) fn finish(mut self) -> Vec<Problem> {
        self.problems
            .sort_by_key(|p| p.at.line.unwrap_or(usize::MAX));
        self.problems
    }

    /// The root table, with its unknown keys reported.
    pub(crate) fn root<'t, 'i>(
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
    pub(crate) fn table<'t, 'i>(
        &mut self,
        parent: &Section<'t, 'i>,
        name: &str,
        known: &[&str],
    ) -> Option<Section<'t, 'i>> {
        let field = parent.get(name)?;
        self.open(&field, known)
    }

    /// A field as a table, with its unknown keys reported.
    pub(crate) fn open<'t, 'i>(
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
    pub(crate) fn missing(&mut self, section: &Section<'_, '_>, name: &str) {
        self.report(
            section.span.clone(),
            &section.child_key(name),
            format!("missing required key `{name}`"),
        );
    }

    /// The value at `name`, reporting it missing when absent.
    pub(crate) fn required<'t, 'i>(
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
    pub(crate) fn key_location(&self, section: &Section<'_, '_>, name: &str) -> Location {
        self.location(section.span.as_ref(), &section.child_key(name))
    }

    /// Reports a value of the wrong type.
    pub(crate) fn mismatch(&mut self, field: &Field<'_, '_>, expected: &str) {
        let found = describe(field.value);
        self.report_at(field, format!("expected {expected}, found {found}"));
    }
}

#[cfg(test)]
mod tests;
