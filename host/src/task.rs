//! What a spawned task that ended badly says: the words a coordinator, a supervisor or a
//! reader puts into its log line and its failure reason.

use tokio::task::JoinError;

/// What a panicked task said, or why it was cancelled.
pub fn panic_message(e: JoinError) -> String {
    if !e.is_panic() {
        return e.to_string();
    }
    let payload = e.into_panic();
    if let Some(s) = payload.downcast_ref::<&str>() {
        format!("panicked: {s}")
    } else if let Some(s) = payload.downcast_ref::<String>() {
        format!("panicked: {s}")
    } else {
        "panicked".to_owned()
    }
}
