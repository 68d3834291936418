//! `watch = true`: a handler file that changes on disk is deployed like an upload (with a
//! DynamoDB lease table, to the whole fleet).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio_util::sync::CancellationToken;

use super::Deployer;

/// How often a watched handler file is looked at.
const WATCH_EVERY: Duration = Duration::from_millis(250);

impl Deployer {
    /// Whether any subscription has `watch = true`.
    pub fn watches(&self) -> bool {
        self.targets.values().any(|t| t.watch)
    }

    /// Reloads each watched handler when its file changes on disk (size or modification time),
    /// validated like a deploy. A file caught half-written fails validation and is tried again
    /// at its next change. Runs until `stop` fires.
    pub async fn watch(self: Arc<Self>, stop: CancellationToken) {
        let mut seen: BTreeMap<&str, Option<(u64, SystemTime)>> = self
            .targets
            .iter()
            .filter(|(_, t)| t.watch)
            .map(|(name, t)| (name.as_str(), stamp(&t.path)))
            .collect();
        let mut tick = tokio::time::interval(WATCH_EVERY);
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tick.tick() => {}
            }
            for (name, last) in seen.iter_mut() {
                let target = &self.targets[*name];
                let now = stamp(&target.path);
                if now == *last || now.is_none() {
                    continue;
                }
                *last = now;
                let bytes = match std::fs::read(&target.path) {
                    Ok(b) => b,
                    Err(e) => {
                        tracing::warn!(subscription = name, file = %target.path.display(), "cannot read the watched handler: {e}");
                        continue;
                    }
                };
                tracing::info!(subscription = name, file = %target.path.display(), "handler file changed; deploying it");
                // A refused reload is logged and shown in status by `deploy`.
                let _ = self
                    .deploy(
                        name,
                        &bytes,
                        &target.path.display().to_string(),
                        &crate::fleet::Sign::No,
                    )
                    .await;
            }
        }
    }
}

fn stamp(path: &std::path::Path) -> Option<(u64, SystemTime)> {
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.len(), meta.modified().ok()?))
}
