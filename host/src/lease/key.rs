//! Lease row keys: whose row a subscription reads a shard through.

use std::fmt;

use super::LeaseError;

/// Whose rows a subscription's leases and checkpoints are (`lease_key` of a subscription).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum LeaseRows {
    /// The shared `stream:shard` rows, as ruststream-kinesis 0.7 (and shardhost before
    /// subscriptions had rows of their own) keys them.
    #[default]
    Stream,
    /// Rows of the subscription's own: `stream:shard#SUBSCRIPTION`.
    Subscription,
}

impl LeaseRows {
    /// `stream` or `subscription`, as the config writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            LeaseRows::Stream => "stream",
            LeaseRows::Subscription => "subscription",
        }
    }
}

/// The separator between a shard's key and the subscription owning the row. Kinesis stream
/// names and shard ids, and subscription names, are letters, digits, `_`, `.` and `-`: none
/// holds it (nor `:`), and every row shardhost keeps for itself starts with it.
pub const SUBSCRIPTION_SEPARATOR: char = '#';

/// The key of one lease row: `stream:shard`, or `stream:shard#SUBSCRIPTION` for a subscription
/// whose rows are its own ([`LeaseRows::Subscription`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LeaseKey {
    pub stream: String,
    pub shard_id: String,
    /// The subscription that reads the shard through this row: a store that can writes it
    /// into the rows it takes, and refuses a row another subscription took. `None`: a reader
    /// that names none (tools, tests, ruststream-kinesis).
    pub subscription: Option<String>,
    /// Whose row it is: the shared `stream:shard`, or the subscription's own.
    pub rows: LeaseRows,
}

impl LeaseKey {
    /// The shared `stream:shard` row, read by no subscription in particular.
    pub fn new(stream: &str, shard_id: &str) -> Self {
        LeaseKey {
            stream: stream.to_owned(),
            shard_id: shard_id.to_owned(),
            subscription: None,
            rows: LeaseRows::Stream,
        }
    }

    /// The row through which `subscription` reads a shard.
    pub fn of(stream: &str, shard_id: &str, subscription: &str, rows: LeaseRows) -> Self {
        LeaseKey {
            subscription: Some(subscription.to_owned()),
            rows,
            ..LeaseKey::new(stream, shard_id)
        }
    }

    /// The shared `stream:shard` row of the same shard, read by the same subscription.
    pub fn shared(&self) -> LeaseKey {
        LeaseKey {
            rows: LeaseRows::Stream,
            ..self.clone()
        }
    }
}

impl fmt::Display for LeaseKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.subscription, self.rows) {
            (Some(sub), LeaseRows::Subscription) => write!(
                f,
                "{}:{}{SUBSCRIPTION_SEPARATOR}{}",
                escape(&self.stream),
                escape(&self.shard_id),
                escape(sub)
            ),
            _ => write!(f, "{}:{}", self.stream, self.shard_id),
        }
    }
}

/// A part of a subscription's own row key, with `%`, `:` and the separator percent-escaped
/// (none of them is in a Kinesis name, so a Kinesis key is never changed: this only keeps
/// another source's odd shard ids from making two keys one).
fn escape(part: &str) -> std::borrow::Cow<'_, str> {
    if !part.contains(['%', ':', SUBSCRIPTION_SEPARATOR]) {
        return part.into();
    }
    let mut out = String::with_capacity(part.len() + 6);
    for c in part.chars() {
        match c {
            '%' => out.push_str("%25"),
            ':' => out.push_str("%3A"),
            SUBSCRIPTION_SEPARATOR => out.push_str("%23"),
            c => out.push(c),
        }
    }
    out.into()
}

/// The refusal of a row that `theirs`, another subscription, took: a store writes the name of
/// the subscription taking a row into it, and never gives one subscription's row to another.
pub(crate) fn claimed_by_another(place: &str, key: &LeaseKey, theirs: &str) -> LeaseError {
    let ours = key.subscription.as_deref().unwrap_or_default();
    let own = LeaseKey {
        rows: LeaseRows::Subscription,
        ..key.clone()
    };
    LeaseError::Refused(format!(
        "lease row `{key}`{place} belongs to subscription `{theirs}` (another host's, or this \
         subscription's name before a rename), and subscription `{ours}` does not share it: \
         two subscriptions on one row would take each other's shards and skip each other's \
         records. Set `lease_key = \"subscription\"` on `{ours}` to give it rows of its own \
         (`{own}`, starting at its start_at), or rename it back to `{theirs}` if it is the same one"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_subscription_of_its_own_rows_has_a_key_no_shared_row_has() {
        let shared = LeaseKey::of("orders", "shardId-000000000000", "one", LeaseRows::Stream);
        assert_eq!(shared.to_string(), "orders:shardId-000000000000");
        let own = LeaseKey::of(
            "orders",
            "shardId-000000000000",
            "one",
            LeaseRows::Subscription,
        );
        assert_eq!(own.to_string(), "orders:shardId-000000000000#one");
        assert_eq!(own.shared().to_string(), shared.to_string());
        let odd = LeaseKey::of("orders", "a#b:c%", "one", LeaseRows::Subscription);
        assert_eq!(odd.to_string(), "orders:a%23b%3Ac%25#one");
    }
}
