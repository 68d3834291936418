//! Side tasks that must not die unnoticed (the fleet sync): a panic makes the host unhealthy
//! (`/healthz` names it) and the task starts again after a pause, so the instance keeps
//! converging and heart-beating.

use std::future::Future;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::status::{Failure, StatusBoard};
use crate::task::panic_message;

/// The first pause before a restart; it doubles up to [`MAX_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_secs(1);
const MAX_PAUSE: Duration = Duration::from_secs(30);

/// Runs the task `make` makes until it ends by itself (on `stop`); each time it panics, records
/// a failure named `name` and makes it anew.
pub(super) async fn supervise<F, Fut>(
    name: &'static str,
    status: StatusBoard,
    stop: CancellationToken,
    make: F,
) where
    F: Fn() -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let mut pause = FIRST_PAUSE;
    loop {
        let reason = match tokio::spawn(make()).await {
            Ok(()) => return,
            Err(e) if e.is_cancelled() => return,
            Err(e) => panic_message(e),
        };
        tracing::error!(
            task = name,
            "{reason}; the host is unhealthy; restarting the task"
        );
        status.fail(Failure {
            subscription: name.to_owned(),
            shard: None,
            reason: format!("{name} failed: {reason} (restarted)"),
        });
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(pause) => {}
        }
        pause = (pause * 2).min(MAX_PAUSE);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;

    #[tokio::test]
    async fn a_panicking_task_is_reported_and_restarted() {
        let status = StatusBoard::new();
        let runs = Arc::new(AtomicU32::new(0));
        let counted = runs.clone();
        supervise(
            "fleet sync",
            status.clone(),
            CancellationToken::new(),
            move || {
                let run = counted.fetch_add(1, Ordering::SeqCst);
                async move {
                    if run == 0 {
                        panic!("size overflow");
                    }
                }
            },
        )
        .await;
        assert_eq!(runs.load(Ordering::SeqCst), 2);
        let failures = status.failures();
        assert_eq!(failures.len(), 1);
        assert!(failures[0].reason.contains("size overflow"), "{failures:?}");
    }
}
