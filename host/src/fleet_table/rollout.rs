//! A subscription's rollout (`deploy --canary`), in a row of its own beside its desired row:
//!
//! | `lease_key`                              | attributes |
//! |------------------------------------------|------------|
//! | `#shardhost#canary#SERVICE#SUBSCRIPTION` | `rollout` (S, a JSON [`Rollout`], at most 64 KiB), `revision` (N) |
//!
//! Every write is conditional on `revision` as read (or on no row), so two deciders, or a
//! decider and an operator, never both write a decision. The row outlives its rollout (its
//! `state` says how it ended) until the next rollout replaces it. Like a desired row, it is
//! untrusted input: [`Rollout::check`] bounds and checks every field before anything is
//! fetched.

use serde::{Deserialize, Serialize};

use super::FleetTable;
use super::desired::StoredComponent;
use super::desired::{is_id, is_version};
use super::doc::{DocRead, doc_key};
use crate::lease::LeaseError;
use crate::signing::{Intent, Signed};
/// The most shards a rollout names.
pub const MAX_SHARDS: usize = 4000;
/// The longest window a rollout may have: a week.
pub const MAX_WINDOW_MS: u64 = 7 * 24 * 3600 * 1000;

const ROLLOUT: &str = "rollout";

/// Where a rollout stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RolloutState {
    Running,
    /// Its window passed clean: its version was deployed to every shard.
    Promoted,
    /// A rule broke, or an operator stopped it: every shard runs the base version again.
    Aborted,
}

/// A rollout, as its row holds it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rollout {
    pub canary_id: String,
    /// The new version and its stored parts.
    pub version: String,
    pub size: u64,
    pub chunks: u32,
    pub upload: String,
    /// Per mille of the shards.
    pub share_permille: u32,
    /// The shards that run the new version.
    pub shards: Vec<String>,
    pub started_at_ms: u64,
    pub window_ms: u64,
    /// The rules ([`crate::canary::rules`]).
    pub abort_on: String,
    pub started_by: String,
    pub state: RolloutState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_at_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<String>,
    /// The rollout's signature (`deploy --canary --sign-key`): over the table, service,
    /// subscription, id, version, shards, share, start, window and rules.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signed: Option<Signed>,
    /// The deploy signature its promotion writes: the version as the desired row's next
    /// generation, signed when the rollout was (valid only while no other deploy came between).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub promote: Option<Intent>,
}

impl Rollout {
    /// The new version's stored parts.
    pub fn component(&self) -> StoredComponent {
        StoredComponent {
            version: self.version.clone(),
            size: self.size,
            chunks: self.chunks,
            upload: Some(self.upload.clone()),
        }
    }

    /// Every field within bounds; the first that is not, named.
    pub fn check(&self) -> Result<(), String> {
        let short = |field: &str, text: &str, max: usize| {
            if text.len() > max {
                Err(format!("`{field}` is longer than {max} bytes"))
            } else {
                Ok(())
            }
        };
        if !is_id(&self.canary_id) {
            return Err("`canary_id` is not an id".into());
        }
        if !is_version(&self.version) {
            return Err("`version` is not a sha256".into());
        }
        if !is_id(&self.upload) {
            return Err("`upload` is not an id".into());
        }
        if !(1..1000).contains(&self.share_permille) {
            return Err("`share_permille` is not between 1 and 999".into());
        }
        if self.shards.is_empty() || self.shards.len() > MAX_SHARDS {
            return Err(format!("`shards` holds 0 or more than {MAX_SHARDS} shards"));
        }
        for shard in &self.shards {
            short("shards", shard, 128)?;
        }
        if self.window_ms > MAX_WINDOW_MS {
            return Err("`window_ms` is longer than a week".into());
        }
        crate::canary::rules::AbortOn::parse(&self.abort_on)
            .map_err(|e| format!("`abort_on`: {e}"))?;
        short("started_by", &self.started_by, 256)?;
        short("reason", self.reason.as_deref().unwrap_or_default(), 1024)?;
        short(
            "decided_by",
            self.decided_by.as_deref().unwrap_or_default(),
            256,
        )?;
        if let Some(s) = &self.signed {
            short("signed", &s.key, 256)?;
            short("signed", &s.signature, 256)?;
        }
        if let Some(p) = &self.promote {
            if !is_id(&p.deploy_id) {
                return Err("`promote.deploy_id` is not an id".into());
            }
            short("promote", &p.signed.key, 256)?;
            short("promote", &p.signed.signature, 256)?;
        }
        Ok(())
    }
}

/// A rollout row as read: its revision (none: no row) and the rollout, or why it is unusable.
pub type RolloutRead = DocRead<Rollout>;

impl FleetTable {
    /// The rollout row of `subscription`.
    pub async fn rollout(
        &self,
        service: &str,
        subscription: &str,
    ) -> Result<RolloutRead, LeaseError> {
        let key = doc_key("canary", service, subscription);
        self.read_doc(&key, ROLLOUT, "the rollout", Rollout::check)
            .await
    }

    /// Writes `rollout` as the row of `subscription` if its revision is still `seen` (`None`:
    /// if there is no row); whether it was written.
    pub async fn set_rollout(
        &self,
        service: &str,
        subscription: &str,
        rollout: &Rollout,
        seen: Option<u64>,
    ) -> Result<bool, LeaseError> {
        let key = doc_key("canary", service, subscription);
        self.write_doc(&key, ROLLOUT, "the rollout", rollout, seen)
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rollout() -> Rollout {
        Rollout {
            canary_id: "0123abcd".into(),
            version: "a".repeat(64),
            size: 10,
            chunks: 1,
            upload: "feed".into(),
            share_permille: 100,
            shards: vec!["shardId-000000000000".into()],
            started_at_ms: 1,
            window_ms: 60_000,
            abort_on: "traps>1%".into(),
            started_by: "me".into(),
            state: RolloutState::Running,
            reason: None,
            decided_at_ms: None,
            decided_by: None,
            signed: None,
            promote: None,
        }
    }

    /// A change that breaks one field.
    type Breaks = Box<dyn Fn(&mut Rollout)>;

    #[test]
    fn a_rollout_row_is_checked_field_by_field_before_it_is_believed() {
        assert_eq!(rollout().check(), Ok(()));
        let broken: Vec<(&str, Breaks)> = vec![
            ("canary_id", Box::new(|r| r.canary_id = "../x".into())),
            ("version", Box::new(|r| r.version = "nope".into())),
            ("upload", Box::new(|r| r.upload = String::new())),
            ("share_permille", Box::new(|r| r.share_permille = 1000)),
            ("shards", Box::new(|r| r.shards.clear())),
            (
                "shards",
                Box::new(|r| r.shards = vec!["s".into(); MAX_SHARDS + 1]),
            ),
            ("shards", Box::new(|r| r.shards = vec!["x".repeat(200)])),
            ("window_ms", Box::new(|r| r.window_ms = MAX_WINDOW_MS + 1)),
            ("abort_on", Box::new(|r| r.abort_on = "lag>1%".into())),
            ("reason", Box::new(|r| r.reason = Some("x".repeat(2000)))),
        ];
        for (field, break_it) in broken {
            let mut r = rollout();
            break_it(&mut r);
            let e = r.check().expect_err(field);
            assert!(e.contains(field), "{field}: {e}");
        }
    }

    #[test]
    fn a_rollout_reads_back_as_written() {
        let r = rollout();
        let text = serde_json::to_string(&r).unwrap();
        assert!(text.contains(r#""state":"running""#), "{text}");
        assert_eq!(serde_json::from_str::<Rollout>(&text).unwrap(), r);
    }
}
