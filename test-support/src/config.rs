//! A typed builder of `shardhost.toml` text, for the configs tests and benches set up (a config
//! that tests parsing itself, or holds a deliberate error, stays literal text in its test).

use std::fmt;
use std::path::Path;

use toml::{Table, Value};

/// A host config: its top-level sections and its subscriptions.
#[derive(Clone, Debug)]
pub struct HostToml {
    sections: Table,
    subscriptions: Vec<Subscription>,
}

impl HostToml {
    /// A host on the embedded stream (`[kinesis] endpoint = "memory"`).
    pub fn memory() -> HostToml {
        HostToml::empty().set("kinesis", "endpoint", "memory")
    }

    /// A host on a Kinesis endpoint (an emulator: `test_credentials = true`).
    pub fn kinesis(endpoint: &str) -> HostToml {
        HostToml::empty().set("kinesis", "endpoint", endpoint).set(
            "kinesis",
            "test_credentials",
            true,
        )
    }

    fn empty() -> HostToml {
        HostToml {
            sections: Table::new(),
            subscriptions: Vec::new(),
        }
    }

    /// `[host] owner_id`.
    pub fn owner(self, owner_id: &str) -> HostToml {
        self.set("host", "owner_id", owner_id)
    }

    /// Leases in a DynamoDB table (`[leases] store = "dynamodb"`) at `endpoint`.
    pub fn dynamodb_leases(self, table: &str, endpoint: &str) -> HostToml {
        self.set("leases", "store", "dynamodb")
            .set("leases", "table", table)
            .set("leases", "endpoint", endpoint)
    }

    /// One `[leases]` key (`ttl`, `renew_every`, `list_every`, `checkpoint_every`, `balance`).
    pub fn leases(self, key: &str, value: impl Into<Value>) -> HostToml {
        self.set("leases", key, value)
    }

    /// The admin API (`[admin] listen`), on a free loopback port.
    pub fn admin(self) -> HostToml {
        self.set("admin", "listen", "127.0.0.1:0")
    }

    /// The admin API with a token.
    pub fn admin_with_token(self, token: &str) -> HostToml {
        self.admin().set("admin", "token", token)
    }

    /// Any other key of a top-level section.
    pub fn set(mut self, section: &str, key: &str, value: impl Into<Value>) -> HostToml {
        let table = self
            .sections
            .entry(section)
            .or_insert_with(|| Value::Table(Table::new()));
        if let Value::Table(table) = table {
            table.insert(key.to_owned(), value.into());
        }
        self
    }

    /// Adds a `[[subscription]]`.
    pub fn subscription(mut self, subscription: Subscription) -> HostToml {
        self.subscriptions.push(subscription);
        self
    }

    /// The config text.
    pub fn render(&self) -> String {
        self.to_string()
    }
}

impl fmt::Display for HostToml {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut doc = self.sections.clone();
        let subscriptions = self
            .subscriptions
            .iter()
            .map(|s| Value::Table(s.keys.clone()));
        doc.insert("subscription".into(), Value::Array(subscriptions.collect()));
        write!(f, "{doc}")
    }
}

/// One `[[subscription]]`.
#[derive(Clone, Debug)]
pub struct Subscription {
    keys: Table,
}

impl Subscription {
    /// A subscription `name` reading `stream` with the component at `handler` (relative to the
    /// config file, or absolute).
    pub fn new(name: &str, stream: &str, handler: impl AsRef<Path>) -> Subscription {
        Subscription { keys: Table::new() }
            .set("name", name)
            .set("stream", stream)
            .set("handler", handler.as_ref().display().to_string())
    }

    /// Records put into the embedded stream at start, from an NDJSON file.
    pub fn feed(self, path: &str) -> Subscription {
        self.set("feed", path)
    }

    /// Creates the stream with `shards` shards when it is missing.
    pub fn create_if_missing(self, shards: u32) -> Subscription {
        self.set("create_if_missing", shards)
    }

    /// `start_at = "trim_horizon"`: a shard with no checkpoint is read from its oldest record.
    pub fn trim_horizon(self) -> Subscription {
        self.set("start_at", "trim_horizon")
    }

    /// `start_at` (`"latest"`, `"trim_horizon"`).
    pub fn start_at(self, position: &str) -> Subscription {
        self.set("start_at", position)
    }

    /// `start_at = { timestamp = "..." }` (RFC 3339).
    pub fn start_at_timestamp(self, rfc3339: &str) -> Subscription {
        let mut at = Table::new();
        at.insert("timestamp".into(), rfc3339.into());
        self.set("start_at", at)
    }

    pub fn batch(self, records: u32) -> Subscription {
        self.set("batch", records)
    }

    pub fn lanes(self, lanes: u32) -> Subscription {
        self.set("lanes", lanes)
    }

    pub fn poll_interval(self, every: &str) -> Subscription {
        self.set("poll_interval", every)
    }

    pub fn max_attempts(self, attempts: u32) -> Subscription {
        self.set("max_attempts", attempts)
    }

    pub fn dead_letter(self, stream: &str) -> Subscription {
        self.set("dead_letter", stream)
    }

    /// One `[subscription.limits]` key (`timeout`, `memory`, `fuel`, ...).
    pub fn limit(self, key: &str, value: impl Into<Value>) -> Subscription {
        self.nested("limits", key, value)
    }

    /// One `[subscription.wasi]` grant (`env`, ...).
    pub fn wasi(self, key: &str, value: impl Into<Value>) -> Subscription {
        self.nested("wasi", key, value)
    }

    /// One key of the subscription's table `table` (`[subscription.TABLE] key = value`).
    pub fn nested(mut self, table: &str, key: &str, value: impl Into<Value>) -> Subscription {
        let table = self
            .keys
            .entry(table)
            .or_insert_with(|| Value::Table(Table::new()));
        if let Value::Table(table) = table {
            table.insert(key.to_owned(), value.into());
        }
        self
    }

    /// Any other key.
    pub fn set(mut self, key: &str, value: impl Into<Value>) -> Subscription {
        self.keys.insert(key.to_owned(), value.into());
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_the_sections_and_each_subscription() {
        let text = HostToml::memory()
            .admin_with_token("t")
            .subscription(
                Subscription::new("a", "s", "a.wasm")
                    .batch(10)
                    .limit("timeout", "300ms")
                    .limit("memory", "16MiB")
                    .wasi("env", vec!["PATH"]),
            )
            .subscription(Subscription::new("b", "s", "/abs/b.wasm").trim_horizon())
            .subscription(
                Subscription::new("c", "s", "c.wasm").start_at_timestamp("2026-01-01T00:00:00Z"),
            )
            .render();
        let doc: Table = text.parse().unwrap();
        assert_eq!(doc["kinesis"]["endpoint"].as_str(), Some("memory"));
        assert_eq!(doc["admin"]["token"].as_str(), Some("t"));
        let subs = doc["subscription"].as_array().unwrap();
        assert_eq!(subs[0]["batch"].as_integer(), Some(10));
        assert_eq!(subs[0]["limits"]["timeout"].as_str(), Some("300ms"));
        assert_eq!(subs[0]["limits"]["memory"].as_str(), Some("16MiB"));
        assert_eq!(subs[0]["wasi"]["env"][0].as_str(), Some("PATH"));
        assert_eq!(subs[1]["handler"].as_str(), Some("/abs/b.wasm"));
        assert_eq!(subs[1]["start_at"].as_str(), Some("trim_horizon"));
        assert_eq!(
            subs[2]["start_at"]["timestamp"].as_str(),
            Some("2026-01-01T00:00:00Z")
        );
    }
}
