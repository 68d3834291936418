//! One way to wait for a condition instead of sleeping for it.

use std::time::{Duration, Instant};

/// Waits up to `timeout` for `condition` to hold, polling (every 5 ms at first, backing off to
/// every 50 ms); panics naming `what` when it does not.
pub fn wait_until(what: &str, timeout: Duration, condition: impl FnMut() -> bool) {
    wait_until_else(what, timeout, condition, String::new)
}

/// As [`wait_until`]; on timeout the panic message ends with `report()` (a status snapshot, a
/// log).
pub fn wait_until_else(
    what: &str,
    timeout: Duration,
    mut condition: impl FnMut() -> bool,
    report: impl FnOnce() -> String,
) {
    let deadline = Instant::now() + timeout;
    let mut pause = Duration::from_millis(5);
    while !condition() {
        if Instant::now() >= deadline {
            panic!("timed out ({timeout:?}) waiting for {what}\n{}", report());
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(50));
    }
}

/// As [`wait_until`], for async code: awaits `condition` and sleeps on the tokio timer between
/// polls.
pub async fn wait_until_async(
    what: &str,
    timeout: Duration,
    mut condition: impl AsyncFnMut() -> bool,
) {
    let deadline = Instant::now() + timeout;
    let mut pause = Duration::from_millis(5);
    while !condition().await {
        if Instant::now() >= deadline {
            panic!("timed out ({timeout:?}) waiting for {what}");
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(50));
    }
}
