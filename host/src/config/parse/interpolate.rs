//! `${VAR}` and `${VAR:-default}` in the strings of `shardhost.toml`.
//!
//! [`resolve`] runs once over the whole parsed tree before any table is read: every string
//! value, in every table and array, is replaced by its interpolated form, so the readers (and
//! everything after them) only ever see resolved strings. A string that used any reference is
//! noted on the [`Walker`] (`Walker::took_env`): `[subscription.config]` marks its values
//! `from_env` by it, and a problem reported about such a string never shows its value. A
//! string that cannot be resolved is reported once, naming the variable; nothing else is said
//! about it.
//!
//! The rules, as a shell has them where they overlap:
//! - `${NAME}` is the variable's value; unset is an error, set but empty is the empty string.
//! - `${NAME:-default}` is the default when the variable is unset *or empty*; the default is
//!   literal text up to the first `}` (it cannot hold another `${`).
//! - `$${` is a literal `${`; a `$` not followed by `{` is a literal `$`.
//! - NAME is letters, digits and `_`, not starting with a digit; anything else between `${`
//!   and `}`, or a `${` never closed, is an error.

use std::borrow::Cow;
use std::env::VarError;

use toml::Spanned;
use toml::de::{DeTable, DeValue};

use super::walk::{Walker, child_key, is_env_name, quote};

/// How a variable is looked up: `std::env::var` for a host, a map in tests.
pub(super) type Lookup<'a> = &'a dyn Fn(&str) -> Result<String, VarError>;

/// A string with its references replaced.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Resolved {
    pub(super) value: String,
    /// It held at least one reference (even one that took its default).
    pub(super) from_env: bool,
}

/// Why a string cannot be interpolated.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub(super) enum InterpolateError {
    #[error(
        "the environment variable {name} is not set (write \"${{{name}:-default}}\" for a default)"
    )]
    Unset { name: String },
    #[error("the environment variable {name} is not valid UTF-8")]
    NotUnicode { name: String },
    #[error(
        "{reference} is not a reference to an environment variable: write \"${{NAME}}\" or \
         \"${{NAME:-default}}\", NAME being letters, digits and `_`, not starting with a digit \
         (\"$${{\" is a literal \"${{\")"
    )]
    BadReference { reference: String },
    #[error(
        "the default of {reference} holds another \"${{\": a default is literal text (write \
         the value itself)"
    )]
    NestedDefault { reference: String },
    #[error(
        "{rest} opens a \"${{\" that is never closed with \"}}\" (\"$${{\" is a literal \"${{\")"
    )]
    Unclosed { rest: String },
}

/// `s` with every `${...}` replaced by what it refers to.
pub(super) fn interpolate(s: &str, env: Lookup<'_>) -> Result<Resolved, InterpolateError> {
    let mut value = String::with_capacity(s.len());
    let mut from_env = false;
    let mut rest = s;
    while let Some(dollar) = rest.find('$') {
        value.push_str(&rest[..dollar]);
        let after = &rest[dollar + 1..];
        if let Some(tail) = after.strip_prefix("${") {
            value.push_str("${");
            rest = tail;
        } else if let Some(body) = after.strip_prefix('{') {
            let Some(end) = body.find('}') else {
                return Err(InterpolateError::Unclosed {
                    rest: quote(&rest[dollar..]),
                });
            };
            value.push_str(&reference(&body[..end], env)?);
            from_env = true;
            rest = &body[end + 1..];
        } else {
            value.push('$');
            rest = after;
        }
    }
    value.push_str(rest);
    Ok(Resolved { value, from_env })
}

/// The value of what stands between `${` and `}`.
fn reference(inside: &str, env: Lookup<'_>) -> Result<String, InterpolateError> {
    let (name, default) = match inside.split_once(":-") {
        Some((name, default)) => (name, Some(default)),
        None => (inside, None),
    };
    let shown = || quote(&format!("${{{inside}}}"));
    if !is_env_name(name) {
        return Err(InterpolateError::BadReference { reference: shown() });
    }
    if default.is_some_and(|d| d.contains("${")) {
        return Err(InterpolateError::NestedDefault { reference: shown() });
    }
    match (env(name), default) {
        (Ok(value), Some(default)) if value.is_empty() => Ok(default.to_owned()),
        (Ok(value), _) => Ok(value),
        (Err(VarError::NotPresent), Some(default)) => Ok(default.to_owned()),
        (Err(VarError::NotPresent), None) => Err(InterpolateError::Unset {
            name: name.to_owned(),
        }),
        (Err(VarError::NotUnicode(_)), _) => Err(InterpolateError::NotUnicode {
            name: name.to_owned(),
        }),
    }
}

/// Interpolates every string value of the tree in place, noting on `w` which took anything
/// from the environment and reporting those that cannot be resolved.
pub(super) fn resolve(w: &mut Walker<'_>, root: &mut DeTable<'_>, env: Lookup<'_>) {
    resolve_table(w, root, "", env);
}

fn resolve_table(w: &mut Walker<'_>, table: &mut DeTable<'_>, key: &str, env: Lookup<'_>) {
    for (name, value) in table.iter_mut() {
        resolve_value(w, value, &child_key(key, name.get_ref()), env);
    }
}

fn resolve_value(w: &mut Walker<'_>, value: &mut Spanned<DeValue<'_>>, key: &str, env: Lookup<'_>) {
    let span = value.span();
    match value.get_mut() {
        DeValue::String(s) if s.contains('$') => match interpolate(s, env) {
            Ok(resolved) => {
                if resolved.from_env {
                    w.mark_from_env(&span, s, &resolved.value);
                }
                *s = Cow::Owned(resolved.value);
            }
            Err(e) => w.report_unresolved(span, key, e.to_string()),
        },
        DeValue::Array(items) => {
            for (i, item) in items.iter_mut().enumerate() {
                resolve_value(w, item, &format!("{key}[{i}]"), env);
            }
        }
        DeValue::Table(table) => resolve_table(w, table, key, env),
        _ => {}
    }
}

#[cfg(test)]
mod tests;
