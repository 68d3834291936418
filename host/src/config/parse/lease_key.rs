//! A subscription's `lease_key`: whose lease rows it reads through. A subscription alone on its
//! stream in the config keeps the shared `stream:shard` rows (those of ruststream-kinesis and
//! of earlier versions); two or more on one stream each get rows of their own
//! (`stream:shard#SUBSCRIPTION`), unless one of them says `lease_key = "stream"`.

use std::collections::HashMap;

use super::walk::{Section, Walker, quote};
use crate::config::SubscriptionConfig;
use crate::lease::LeaseRows;

/// Reads `lease_key` into `s` (the subscription just read) and refuses a second subscription
/// of one stream asking for the shared rows; `shared` maps each stream to the subscription
/// that asked for its shared rows, and that line.
pub(super) fn read(
    w: &mut Walker<'_>,
    sec: &Section<'_, '_>,
    s: &mut SubscriptionConfig,
    shared: &mut HashMap<String, (String, usize)>,
) {
    let Some(f) = sec.get("lease_key") else {
        return;
    };
    let rows = match w.string(&f) {
        Some("stream") => LeaseRows::Stream,
        Some("subscription") => LeaseRows::Subscription,
        Some(other) => {
            let message = format!(
                "unknown lease_key {}; expected \"stream\" (the shared `stream:shard` rows) or \
                 \"subscription\" (rows of its own, `stream:shard#SUBSCRIPTION`)",
                quote(other)
            );
            w.report_at(&f, message);
            return;
        }
        None => return,
    };
    s.lease_key = Some(rows);
    if rows != LeaseRows::Stream || s.stream.is_empty() {
        return;
    }
    let line = w.line(f.span.start);
    if let Some((first, first_line)) = shared.get(&s.stream) {
        let message = format!(
            "subscriptions `{first}` (line {first_line}) and `{}` both read stream `{}` through \
             its shared lease rows (lease_key = \"stream\"): they would take each other's shards \
             and skip each other's records; at most one subscription of a stream may, the others \
             need lease_key = \"subscription\" (or no lease_key: rows of their own)",
            s.name, s.stream
        );
        w.report_at(&f, message);
    } else {
        shared.insert(s.stream.clone(), (s.name.clone(), line));
    }
}

/// The rows each subscription reads through: as set, else the shared rows when it is the only
/// subscription of its stream, else its own.
pub(super) fn resolve(subscriptions: &[SubscriptionConfig]) -> Vec<LeaseRows> {
    let mut on_stream: HashMap<&str, usize> = HashMap::new();
    for s in subscriptions {
        *on_stream.entry(s.stream.as_str()).or_default() += 1;
    }
    subscriptions
        .iter()
        .map(|s| match s.lease_key {
            Some(rows) => rows,
            None if on_stream[s.stream.as_str()] > 1 => LeaseRows::Subscription,
            None => LeaseRows::Stream,
        })
        .collect()
}
