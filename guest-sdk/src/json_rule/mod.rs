//! The limits of the SDKs' JSON rule (`guest-sdk/JSON.md`) that serde_json does not keep by
//! itself: it skips the fields a type does not read without looking inside them, and keeps the
//! last of a repeated key in a map. One pass over the whole text checks, read or not:
//!
//! - no key twice in one object (compared after unescaping);
//! - no `\u` escape of a surrogate without its partner;
//! - every number finite as a double (correctly rounded, as serde_json's `float_roundtrip`);
//! - nesting at most [`MAX_DEPTH`] deep.
//!
//! The grammar itself is serde_json's to check: this pass is only exact on JSON text, and says
//! nothing (or anything: the text is refused either way) about text serde_json refuses.

mod escape;
mod key;
mod lex;
mod problem;
#[cfg(test)]
mod tests;

use std::cell::RefCell;

use key::Key;
use lex::{number, string_end};
pub(crate) use problem::MAX_DEPTH;
use problem::Problem;
pub use problem::RuleError;

/// Objects with more keys than this are checked for repeats once the object is closed (in a
/// table of their hashes); smaller ones key by key, against the keys before (no allocation).
const LINEAR_KEYS: usize = 16;

/// What `check` keeps while it runs: the open arrays and objects (for an object, where its
/// keys start in `keys`; [`ARRAY`] for an array) and the keys of the open objects. Kept per
/// thread between calls, so a record costs no allocation.
#[derive(Default)]
struct Scratch {
    open: Vec<usize>,
    keys: Vec<Key>,
}

const ARRAY: usize = usize::MAX;

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::default();
}

/// Checks `text` against the rule's limits (see the module docs).
pub(crate) fn check(text: &str) -> Result<(), RuleError> {
    let result = SCRATCH.with(|scratch| match scratch.try_borrow_mut() {
        Ok(mut scratch) => {
            let result = scan(text, &mut scratch);
            if scratch.keys.capacity() > 4096 {
                *scratch = Scratch::default(); // keep no huge buffer after a huge record
            }
            result
        }
        Err(_) => scan(text, &mut Scratch::default()),
    });
    result.map_err(|p| p.into_error(text))
}

fn scan(text: &str, scratch: &mut Scratch) -> Result<(), Problem> {
    let Scratch { open, keys } = scratch;
    open.clear();
    keys.clear();
    let b = text.as_bytes();
    let n = b.len();
    let mut want_key = false;
    let mut i = 0;
    while i < n {
        match b[i] {
            b'"' => {
                let Some((close, escaped)) = string_end(b, i)? else {
                    return Ok(()); // not closed: not JSON
                };
                if want_key {
                    want_key = false;
                    let key = Key::new(text, i, close, escaped);
                    let from = open.last().copied().unwrap_or(0);
                    let have = &keys[from..];
                    if have.len() < LINEAR_KEYS
                        && have
                            .iter()
                            .any(|k| k.hash == key.hash && k.same_text(key, text))
                    {
                        return Err(Problem::Duplicate(key));
                    }
                    keys.push(key);
                }
                i = close + 1;
            }
            c @ (b'{' | b'[') => {
                if open.len() == MAX_DEPTH {
                    return Err(Problem::TooDeep(i));
                }
                want_key = c == b'{';
                open.push(if want_key { keys.len() } else { ARRAY });
                i += 1;
            }
            b'}' | b']' => {
                match open.pop() {
                    Some(from) if from != ARRAY => {
                        if keys.len() - from > LINEAR_KEYS {
                            repeated(text, &keys[from..])?;
                        }
                        keys.truncate(from);
                    }
                    _ => {}
                }
                want_key = false;
                i += 1;
            }
            b',' => {
                want_key = open.last().is_some_and(|&o| o != ARRAY);
                i += 1;
            }
            b'-' | b'0'..=b'9' => i = number(text, i)?,
            _ => i += 1, // whitespace, ':', the letters of true, false and null
        }
    }
    Ok(())
}

/// The first repeated key (in text order) among the keys of one large object: an open
/// addressing table of their hashes, the text compared only where hashes are equal.
fn repeated(text: &str, keys: &[Key]) -> Result<(), Problem> {
    let size = (keys.len() * 2).next_power_of_two();
    let mut slots = vec![usize::MAX; size];
    for (i, key) in keys.iter().enumerate() {
        let mut slot = (key.hash >> (64 - size.trailing_zeros())) as usize; // the best-mixed bits
        while slots[slot] != usize::MAX {
            let other = keys[slots[slot]];
            if other.hash == key.hash && other.same_text(*key, text) {
                return Err(Problem::Duplicate(*key));
            }
            slot = (slot + 1) & (size - 1);
        }
        slots[slot] = i;
    }
    Ok(())
}
