//! A subscription's `read` and `consumer`: polling (GetRecords, the default) or enhanced
//! fan-out (SubscribeToShard through a registered stream consumer).

use super::walk::{Section, Walker, is_name, quote};
use crate::config::ReadMode;

/// `read = "polling" | "fan-out"` and `consumer = "NAME"` (fan-out only; default
/// `SERVICE-SUBSCRIPTION`, the host's `[host] name` and the subscription's).
pub(super) fn read_mode(
    w: &mut Walker<'_>,
    sec: &Section<'_, '_>,
    service: &str,
    subscription: &str,
    memory: Option<bool>,
) -> ReadMode {
    let read = sec.get("read");
    let fan_out = match &read {
        None => false,
        Some(f) => match w.string(f) {
            Some("polling") => false,
            Some("fan-out") => true,
            Some(other) => {
                w.report_at(
                    f,
                    format!(
                        "unknown read {}; expected \"polling\" (GetRecords) or \"fan-out\" \
                         (SubscribeToShard through a registered consumer)",
                        quote(other)
                    ),
                );
                false
            }
            None => false,
        },
    };
    if let Some(f) = &read
        && fan_out
        && memory == Some(true)
    {
        w.report_at(
            f,
            "read = \"fan-out\" needs Kinesis (SubscribeToShard); the embedded stream is read \
             by polling only: remove `read` or set [kinesis] endpoint",
        );
    }
    let consumer = sec.get("consumer");
    if !fan_out {
        if let Some(f) = &consumer {
            w.report_at(
                f,
                "`consumer` is only used with read = \"fan-out\" (a polling subscription has no \
                 registered consumer)",
            );
        }
        return ReadMode::Polling;
    }
    let name = match &consumer {
        Some(f) => match w.text(f) {
            Some(name) if is_name(&name) => name,
            Some(name) => {
                w.report_at(f, invalid(&name, "a consumer name"));
                name
            }
            None => String::new(),
        },
        None => {
            let name = format!("{service}-{subscription}");
            if !is_name(&name) {
                let at = read.as_ref().expect("fan-out was read from `read`");
                w.report_at(
                    at,
                    format!(
                        "{}; set `consumer`",
                        invalid(
                            &name,
                            "the default consumer name ([host] name-subscription name)"
                        )
                    ),
                );
            }
            name
        }
    };
    ReadMode::FanOut { consumer: name }
}

fn invalid(name: &str, what: &str) -> String {
    format!(
        "{} is not valid as {what}: Kinesis takes 1 to 128 letters, digits, `_`, `.` or `-`",
        quote(name)
    )
}
