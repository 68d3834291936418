//! A heartbeat row as untrusted input: what [`check`] accepts (bounded texts, versions that are
//! sha256s, counts whose sums over a whole roster cannot overflow), how an instance writes its
//! own so that it always passes ([`as_written`]), and how a bad row is shown ([`shown`]).

use crate::canary::rules::{Arm, BUCKETS};
use crate::fleet_table::{MAX_GENERATION, is_id, is_version};
use crate::status::fleet::{Heartbeat, Refusal, Running};

/// The longest owner or admin address a heartbeat may name (bytes).
const MAX_NAME_BYTES: usize = 256;
/// The longest subscription name (bytes): what a config accepts.
const MAX_SUBSCRIPTION_BYTES: usize = 128;
/// The most subscriptions one heartbeat may list.
const MAX_SUBSCRIPTIONS: usize = 1_000;
/// The most shards one instance may say it holds.
const MAX_HELD_SHARDS: usize = 100_000;
/// The longest refusal error a heartbeat carries (bytes): an instance cuts a longer one.
const MAX_ERROR_BYTES: usize = 2_048;
/// The largest count (records, calls, answers) one heartbeat may report: 2^40, so that summed
/// over the most instances a roster lists (10 000) and an arm's time buckets it stays far below
/// `u64::MAX`.
const MAX_COUNT: u64 = 1 << 40;
/// How much of a bad row's key and problem a report shows (characters).
const MAX_SHOWN_CHARS: usize = 160;

/// `beat` as its row holds it: refusal errors cut to [`MAX_ERROR_BYTES`] (at a character
/// boundary) and control characters but newlines and tabs blanked, so that [`check`] passes it.
pub(super) fn as_written(beat: &Heartbeat) -> String {
    let mut beat = beat.clone();
    for refusal in beat
        .subscriptions
        .values_mut()
        .flat_map(|r| r.refused.iter_mut().chain(r.refused_trials.iter_mut()))
    {
        let fits = |e: &str| e.len() <= MAX_ERROR_BYTES && e.chars().all(error_char);
        if fits(&refusal.error) {
            continue;
        }
        let mut cut = String::new();
        for c in refusal.error.chars() {
            if cut.len() + c.len_utf8() > MAX_ERROR_BYTES - '…'.len_utf8() {
                cut.push('…');
                break;
            }
            cut.push(if error_char(c) { c } else { ' ' });
        }
        refusal.error = cut;
    }
    serde_json::to_string(&beat).expect("a heartbeat serializes")
}

/// A character a refusal error may hold: no control characters but newlines and tabs.
fn error_char(c: char) -> bool {
    !c.is_control() || c == '\n' || c == '\t'
}

/// Every field of a heartbeat read from the table within bounds; the first that is not, named.
pub(super) fn check(beat: &Heartbeat) -> Result<(), String> {
    name("`owner`", &beat.owner, MAX_NAME_BYTES)?;
    if let Some(admin) = &beat.admin {
        name("`admin`", admin, MAX_NAME_BYTES)?;
    }
    if beat.subscriptions.len() > MAX_SUBSCRIPTIONS {
        return Err(format!(
            "`subscriptions` lists more than {MAX_SUBSCRIPTIONS}"
        ));
    }
    for (subscription, running) in &beat.subscriptions {
        name("a subscription name", subscription, MAX_SUBSCRIPTION_BYTES)?;
        check_running(running).map_err(|e| format!("subscription `{subscription}`: {e}"))?;
    }
    Ok(())
}

/// What a heartbeat says one subscription runs, within bounds.
fn check_running(r: &Running) -> Result<(), String> {
    if !is_version(&r.version) {
        return Err("`version` is not a sha256".into());
    }
    if r.generation > MAX_GENERATION {
        return Err("`generation` is out of range".into());
    }
    if r.shards > MAX_HELD_SHARDS {
        return Err(format!("`shards` is more than {MAX_HELD_SHARDS}"));
    }
    if let Some(f) = &r.refused {
        refusal("refused", f)?;
    }
    if r.refused_trials.len() > 2 {
        return Err("`refused_trials` lists more than a rollout and a shadow".into());
    }
    for f in &r.refused_trials {
        refusal("refused_trials", f)?;
    }
    if let Some(c) = &r.canary {
        if !is_id(&c.canary_id) {
            return Err("`canary.canary_id` is not an id".into());
        }
        arm("canary.canary", &c.canary)?;
        arm("canary.base", &c.base)?;
    }
    if let Some(s) = &r.shadow {
        if !is_version(&s.version) {
            return Err("`shadow.version` is not a sha256".into());
        }
        let counts = [
            s.agree,
            s.differ,
            s.trapped,
            s.timed_out,
            s.skipped,
            s.batches_dropped,
        ];
        if counts.iter().any(|n| *n > MAX_COUNT) {
            return Err(format!("a `shadow` count is more than {MAX_COUNT}"));
        }
        if s.http_answer.as_ref().is_some_and(|a| a.len() > 256) {
            return Err("`shadow.http_answer` is longer than 256 bytes".into());
        }
    }
    Ok(())
}

/// A refusal, within bounds (`field` names it).
fn refusal(field: &str, f: &Refusal) -> Result<(), String> {
    if !(f.version.is_empty() || is_version(&f.version)) {
        return Err(format!("`{field}.version` is not a sha256"));
    }
    if f.generation > MAX_GENERATION {
        return Err(format!("`{field}.generation` is out of range"));
    }
    if f.error.len() > MAX_ERROR_BYTES || !f.error.chars().all(error_char) {
        return Err(format!(
            "`{field}.error` is longer than {MAX_ERROR_BYTES} bytes or holds control characters"
        ));
    }
    Ok(())
}

/// A rollout arm's counts, within bounds.
fn arm(field: &str, a: &Arm) -> Result<(), String> {
    if a.calls.len() > BUCKETS {
        return Err(format!("`{field}.calls` holds more than {BUCKETS} buckets"));
    }
    let counts = [a.records, a.failed, a.retried];
    if counts.iter().chain(&a.calls).any(|n| *n > MAX_COUNT) {
        return Err(format!("a `{field}` count is more than {MAX_COUNT}"));
    }
    Ok(())
}

/// A name: not empty, at most `max` bytes, no control characters.
fn name(field: &str, text: &str, max: usize) -> Result<(), String> {
    if text.is_empty() || text.len() > max {
        return Err(format!("{field} is empty or longer than {max} bytes"));
    }
    if text.chars().any(char::is_control) {
        return Err(format!("{field} holds control characters"));
    }
    Ok(())
}

/// Table text as a report shows it: at most [`MAX_SHOWN_CHARS`] characters (cut at a character
/// boundary, `…` marking the cut), control characters escaped.
pub(super) fn shown(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars().take(MAX_SHOWN_CHARS) {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    if text.chars().nth(MAX_SHOWN_CHARS).is_some() {
        out.push('…');
    }
    if out.is_empty() {
        out.push_str("(empty)");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::fleet::{CanaryArms, Refusal, ShadowCounts};

    fn beat() -> Heartbeat {
        let running = Running {
            version: "a".repeat(64),
            generation: 3,
            shards: 4,
            refused: Some(Refusal {
                version: "b".repeat(64),
                generation: 4,
                error: "too big\n  for 4 MiB".into(),
            }),
            canary: Some(CanaryArms {
                canary_id: "c0ffee".into(),
                canary: Arm {
                    records: 10,
                    calls: vec![1; BUCKETS],
                    ..Arm::default()
                },
                base: Arm::default(),
            }),
            shadow: Some(ShadowCounts {
                version: "c".repeat(64),
                agree: 5,
                ..ShadowCounts::default()
            }),
            refused_trials: vec![Refusal {
                version: "d".repeat(64),
                generation: 0,
                error: "rollout c0ffee of dddddddddddd is refused: it is not signed".into(),
            }],
        };
        Heartbeat {
            owner: "ip-10-0-1-7-3f2a".into(),
            admin: Some("http://10.0.1.7:9750".into()),
            started_ms: 1,
            beat_ms: 2,
            beat_every_ms: 1_000,
            subscriptions: [("orders".to_owned(), running)].into(),
        }
    }

    /// A change that breaks one field.
    type Breaks = Box<dyn Fn(&mut Heartbeat)>;

    fn orders(b: &mut Heartbeat) -> &mut Running {
        b.subscriptions.get_mut("orders").unwrap()
    }

    #[test]
    fn a_heartbeat_row_is_checked_field_by_field_before_it_is_believed() {
        assert_eq!(check(&beat()), Ok(()));
        let broken: Vec<(&str, Breaks)> = vec![
            ("`owner`", Box::new(|b| b.owner = "é".repeat(200))),
            ("`owner`", Box::new(|b| b.owner = String::new())),
            ("`owner`", Box::new(|b| b.owner = "a\u{1b}[2J".into())),
            ("`admin`", Box::new(|b| b.admin = Some("x".repeat(300)))),
            (
                "subscriptions",
                Box::new(|b| {
                    let one = b.subscriptions["orders"].clone();
                    b.subscriptions = (0..=MAX_SUBSCRIPTIONS)
                        .map(|i| (format!("s{i}"), one.clone()))
                        .collect();
                }),
            ),
            (
                "subscription name",
                Box::new(|b| {
                    let one = b.subscriptions["orders"].clone();
                    b.subscriptions.insert("s".repeat(129), one);
                }),
            ),
            (
                "`version`",
                Box::new(|b| orders(b).version = format!("{}é", "a".repeat(11))),
            ),
            (
                "`generation`",
                Box::new(|b| orders(b).generation = MAX_GENERATION + 1),
            ),
            ("`shards`", Box::new(|b| orders(b).shards = usize::MAX)),
            (
                "`refused.version`",
                Box::new(|b| orders(b).refused.as_mut().unwrap().version = "é".repeat(32)),
            ),
            (
                "`refused_trials.error`",
                Box::new(|b| orders(b).refused_trials[0].error = "\u{1b}[2J".into()),
            ),
            (
                "`refused.error`",
                Box::new(|b| orders(b).refused.as_mut().unwrap().error = "x".repeat(3_000)),
            ),
            (
                "`canary.canary_id`",
                Box::new(|b| orders(b).canary.as_mut().unwrap().canary_id = "../x".into()),
            ),
            (
                "`canary.canary`",
                Box::new(|b| orders(b).canary.as_mut().unwrap().canary.records = u64::MAX),
            ),
            (
                "`canary.base.calls`",
                Box::new(|b| orders(b).canary.as_mut().unwrap().base.calls = vec![0; 65]),
            ),
            (
                "`shadow.version`",
                Box::new(|b| orders(b).shadow.as_mut().unwrap().version = "nope".into()),
            ),
            (
                "`shadow`",
                Box::new(|b| orders(b).shadow.as_mut().unwrap().differ = MAX_COUNT + 1),
            ),
        ];
        for (field, break_it) in broken {
            let mut b = beat();
            break_it(&mut b);
            let e = check(&b).expect_err(field);
            assert!(e.contains(field), "{field}: {e}");
        }
    }

    #[test]
    fn an_instance_writes_a_long_refusal_cut_at_a_character_boundary_so_its_row_checks() {
        let mut b = beat();
        let error = format!("bad\u{1b}[31m {}", "é".repeat(5_000));
        orders(&mut b).refused.as_mut().unwrap().error = error;
        let written: Heartbeat = serde_json::from_str(&as_written(&b)).unwrap();
        assert_eq!(check(&written), Ok(()));
        let cut = &written.subscriptions["orders"]
            .refused
            .as_ref()
            .unwrap()
            .error;
        assert!(cut.len() <= MAX_ERROR_BYTES, "{}", cut.len());
        assert!(
            cut.starts_with("bad [31m éé") && cut.ends_with("é…"),
            "{cut}"
        );
        // A heartbeat within bounds is written as it is.
        assert_eq!(as_written(&beat()), serde_json::to_string(&beat()).unwrap());
    }

    #[test]
    fn a_bad_rows_name_and_problem_are_shown_cut_and_escaped() {
        assert_eq!(shown("ip-1"), "ip-1");
        assert_eq!(shown(""), "(empty)");
        assert_eq!(shown("a\u{1b}[2Jb\n"), "a\\u{1b}[2Jb\\n");
        let long = "é".repeat(1_000);
        assert_eq!(shown(&long), format!("{}…", "é".repeat(MAX_SHOWN_CHARS)));
    }
}
