//! What the pass finds: a [`Problem`], cheap to carry, made into a [`RuleError`] (what and
//! where, for people) only when there is one.

use std::borrow::Cow;
use std::fmt;

use super::key::Key;

/// The deepest nesting of arrays and objects the rule accepts (the outermost is level 1).
pub(crate) const MAX_DEPTH: usize = 128;

/// A JSON text that breaks the rule: what, and where (1-based line and byte column, as
/// serde_json counts them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleError {
    what: String,
    line: usize,
    column: usize,
}

impl RuleError {
    /// What is wrong, e.g. `duplicate key "id"`.
    pub fn what(&self) -> &str {
        &self.what
    }

    /// The line it is on, from 1.
    pub fn line(&self) -> usize {
        self.line
    }

    /// The column (in bytes) where it starts, from 1.
    pub fn column(&self) -> usize {
        self.column
    }
}

impl fmt::Display for RuleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} at line {} column {}",
            self.what, self.line, self.column
        )
    }
}

impl std::error::Error for RuleError {}

/// What the pass found, cheaply (a `RuleError` is made of it only when there is one).
#[derive(Clone, Copy)]
pub(super) enum Problem {
    Duplicate(Key),
    LoneLeading(usize),
    LoneTrailing(usize),
    /// The number from .0 to .1.
    OutOfRange(usize, usize),
    TooDeep(usize),
}

impl Problem {
    #[cold]
    #[inline(never)]
    pub(super) fn into_error(self, text: &str) -> RuleError {
        let (at, what) = match self {
            Problem::Duplicate(key) => {
                let shown = key.text(text).unwrap_or(Cow::Borrowed(key.raw(text)));
                (key.open, format!("duplicate key {shown:?}"))
            }
            Problem::LoneLeading(at) => (at, "lone leading surrogate in hex escape".to_owned()),
            Problem::LoneTrailing(at) => (at, "lone trailing surrogate in hex escape".to_owned()),
            Problem::OutOfRange(at, end) => {
                let literal = &text[at..end];
                let shown = if literal.len() > 40 {
                    format!("{}...", &literal[..37])
                } else {
                    literal.to_owned()
                };
                (at, format!("number {shown} out of range"))
            }
            Problem::TooDeep(at) => (
                at,
                format!("nested more than {MAX_DEPTH} arrays/objects deep"),
            ),
        };
        let before = &text.as_bytes()[..at];
        let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
        let line_start = before
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |i| i + 1);
        RuleError {
            what,
            line,
            column: at - line_start + 1,
        }
    }
}
