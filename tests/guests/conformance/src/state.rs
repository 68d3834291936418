//! The `state` command: each record's data is a state operation; ack when its result is the
//! `expect` it carries (JSON values compared), else drop.

use shardhost_guest::serde::Deserialize;
use shardhost_guest::serde_json::{Value, json};
use shardhost_guest::state::{self, Bucket};
use shardhost_guest::{Outcome, Record};

#[derive(Deserialize)]
#[serde(crate = "shardhost_guest::serde")]
struct Operation {
    op: String,
    bucket: Option<String>,
    key: Option<String>,
    key_size: Option<usize>,
    value: Option<String>,
    value_size: Option<usize>,
    expected: Option<String>,
    #[serde(default = "one")]
    delta: u64,
    #[serde(default)]
    keys: Vec<String>,
    #[serde(default)]
    entries: Vec<(String, String)>,
    #[serde(default)]
    fail: bool,
    #[serde(default)]
    expect: Value,
}

fn one() -> u64 {
    1
}

/// Why an operation gave no result: the store's error, or (`once`) the effect's.
enum Failed {
    State(state::Error),
    Effect,
}

impl From<state::Error> for Failed {
    fn from(e: state::Error) -> Failed {
        Failed::State(e)
    }
}

pub fn run(record: &Record) -> Outcome {
    let operation = match record.json::<Operation>() {
        Ok(operation) => operation,
        Err(e) => {
            shardhost_guest::warn!("state: not an operation: {e}");
            return Outcome::Drop;
        }
    };
    let got = result(&operation);
    if got == operation.expect {
        Outcome::Ack
    } else {
        shardhost_guest::warn!(
            "state: {} gave {got}, expected {}",
            String::from_utf8_lossy(record.data()),
            operation.expect
        );
        Outcome::Drop
    }
}

/// The operation's result as JSON (`tests/conformance/README.md`, "State").
fn result(operation: &Operation) -> Value {
    let bucket = state::bucket(operation.bucket.as_deref().unwrap_or(state::DEFAULT_BUCKET));
    match perform(operation, &bucket) {
        Ok(value) => value,
        Err(Failed::Effect) => json!({"error": "effect"}),
        Err(Failed::State(e)) => {
            shardhost_guest::info!("state: {} failed: {e}", operation.op);
            json!({"error": e.kind()})
        }
    }
}

fn perform(operation: &Operation, bucket: &Bucket) -> Result<Value, Failed> {
    let key = match operation.key_size {
        Some(n) => "k".repeat(n),
        None => operation.key.clone().unwrap_or_default(),
    };
    let value = match operation.value_size {
        Some(n) => "x".repeat(n),
        None => operation.value.clone().unwrap_or_default(),
    };
    let expected = operation.expected.as_deref().unwrap_or_default();
    let keys = &operation.keys;
    Ok(match operation.op.as_str() {
        "get" => text(bucket.get(&key)?),
        "exists" => Value::Bool(bucket.exists(&key)?),
        "set" => bucket.set(&key, &value).map(|()| Value::Null)?,
        "delete" => bucket.delete(&key).map(|()| Value::Null)?,
        "increment" => json!(bucket.increment(&key, operation.delta)?),
        "set_if_absent" => Value::Bool(bucket.set_if_absent(&key, &value)?),
        "compare_and_set" => Value::Bool(bucket.compare_and_set(&key, expected, &value)?),
        "get_many" => Value::Array(bucket.get_many(keys)?.into_iter().map(text).collect()),
        "set_many" => bucket
            .set_many(operation.entries.iter().map(|(k, v)| (k, v)))
            .map(|()| Value::Null)?,
        "delete_many" => bucket.delete_many(keys).map(|()| Value::Null)?,
        "once" => Value::Bool(bucket.once(&key, || {
            if operation.fail {
                Err(Failed::Effect)
            } else {
                Ok(())
            }
        })?),
        other => json!({"error": format!("unknown op {other:?}")}),
    })
}

/// A value as text, or null.
fn text(value: Option<Vec<u8>>) -> Value {
    match value {
        Some(bytes) => Value::String(String::from_utf8_lossy(&bytes).into_owned()),
        None => Value::Null,
    }
}
