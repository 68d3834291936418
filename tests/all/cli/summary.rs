//! What a `run` of the shipping example says about where it is: on stop, a line per shard it
//! held (where its checkpoint ended, what it holds) and a line per subscription (its outcome
//! totals); while it runs, the same in `shardhost status`.
//!
//! The oracle is the run's own log of each record's outcome (`shardhost::dispatch` at debug
//! level: `ack` / `drop` per record, `record held` for a retry), read as the records are answered.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Lines};
use std::process::{ChildStderr, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::{Killed, NO_CARRIER, config_in, good_config, shardhost, shipments, text};
use crate::support::{Scratch, guest, wait_until_else};

/// The records of `shipments.ndjson`.
const RECORDS: usize = 10;

/// Info for everything (what `run` shows without `-v`), and each record's outcome.
const LOG: &str = "info,shardhost::dispatch=debug";

/// One record's outcome as the run logged it.
#[derive(Clone, Debug)]
struct Answered {
    outcome: &'static str,
    partition_key: String,
}

/// Every record answered so far, by sequence number (they sort in shard order), and the log.
#[derive(Default)]
struct Log {
    lines: Vec<String>,
    answered: BTreeMap<String, Answered>,
}

impl Log {
    fn note(&mut self, line: String) {
        if let Some((seq, answered)) = answered(&line) {
            self.answered.insert(seq, answered);
        }
        self.lines.push(line);
    }

    fn count(&self, outcome: &str) -> usize {
        self.answered
            .values()
            .filter(|a| a.outcome == outcome)
            .count()
    }

    /// The one held record, and the sequence number of the record before it.
    fn held(&self) -> (String, String, String) {
        let mut before = None;
        for (seq, a) in &self.answered {
            if a.outcome == "retry" {
                let before: &String = before.expect("the held record is not the first");
                return (before.clone(), seq.clone(), a.partition_key.clone());
            }
            before = Some(seq);
        }
        panic!("no record held:\n{}", self.lines.join("\n"))
    }
}

/// `name=value` of a log line.
fn field<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(name)?.strip_prefix('='))
}

/// A record's outcome, if the line logs one.
fn answered(line: &str) -> Option<(String, Answered)> {
    let outcome = if line.contains("record held") {
        "retry"
    } else if line.contains("shardhost::dispatch::batch: ack ") {
        "ack"
    } else if line.contains("shardhost::dispatch::batch: drop ") {
        "drop"
    } else {
        return None;
    };
    let seq = field(line, "sequence_number")?.to_owned();
    let partition_key = field(line, "partition_key")?.to_owned();
    Some((
        seq,
        Answered {
            outcome,
            partition_key,
        },
    ))
}

/// The shipping example over its records, with `extra` config appended; its stderr's lines.
fn start(dir: &Scratch, extra: &str) -> (Killed, Lines<BufReader<ChildStderr>>) {
    std::fs::copy(shipments(), dir.0.join("shipments.ndjson")).unwrap();
    let body = good_config(&guest("ship"))
        + "feed = \"shipments.ndjson\"\npoll_interval = \"50ms\"\n"
        + &format!("[subscription.http]\nallow = [\"{NO_CARRIER}\"]\n[subscription.state]\n")
        + extra;
    let path = config_in(dir, &body);
    let mut child = shardhost()
        .arg("run")
        .arg(&path)
        .env("SHARDHOST_LOG", LOG)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = BufReader::new(child.stderr.take().unwrap()).lines();
    (Killed(child), lines)
}

/// Reads lines into `log` until `done` holds (at most 60 s).
fn read_until(
    lines: &mut Lines<BufReader<ChildStderr>>,
    log: &mut Log,
    what: &str,
    done: impl Fn(&Log) -> bool,
) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done(log) {
        assert!(
            Instant::now() < deadline,
            "waiting for {what}:\n{}",
            log.lines.join("\n")
        );
        match lines.next() {
            Some(Ok(l)) => log.note(l),
            _ => panic!("shardhost exited early:\n{}", log.lines.join("\n")),
        }
    }
}

fn interrupt(child: &Killed) {
    Command::new("kill")
        .arg("-INT")
        .arg(child.0.id().to_string())
        .status()
        .unwrap();
}

#[test]
fn a_stopped_run_says_where_each_checkpoint_ended_what_is_held_and_the_outcome_totals() {
    let dir = Scratch::new("summary");
    let (mut child, mut lines) = start(&dir, "");
    let mut log = Log::default();
    read_until(&mut lines, &mut log, "every record answered", |l| {
        l.answered.len() == RECORDS
    });
    let (checkpoint, held, held_key) = log.held();
    assert_eq!(held_key, "order-1006", "the example holds this one");
    interrupt(&child);
    let from = log.lines.len();
    for l in lines.map_while(Result::ok) {
        log.note(l);
    }
    let status = child.0.wait().unwrap();
    let all = log.lines.join("\n");
    assert_eq!(status.code(), Some(0), "{all}");
    let stopped = &log.lines[from..];
    let released = stopped
        .iter()
        .position(|l| l.contains("lease released"))
        .unwrap_or_else(|| panic!("no lease released:\n{all}"));
    let line = |prefix: &str| {
        stopped
            .iter()
            .position(|l| l.contains(prefix))
            .map(|i| (i, stopped[i].as_str()))
            .unwrap_or_else(|| panic!("no line with `{prefix}` after the stop:\n{all}"))
    };

    let (at, shard) = line("shard shardId-000000000000 of ship:");
    assert!(at > released, "said once the shards stopped:\n{all}");
    assert!(shard.contains(" INFO "), "shown without -v: {shard}");
    assert!(
        shard.contains(&format!("checkpoint at {checkpoint};")),
        "the checkpoint ended in front of the held record ({held}): {shard}"
    );
    assert!(
        shard.contains(&format!("held: {held} ({held_key})")),
        "names the held record: {shard}"
    );

    let (at, totals) = line("subscription ship:");
    assert!(at > released, "said once the shards stopped:\n{all}");
    assert!(totals.contains(" INFO "), "shown without -v: {totals}");
    let (ack, drop, retry) = (log.count("ack"), log.count("drop"), log.count("retry"));
    assert_eq!(ack + drop + retry, RECORDS);
    assert!(
        totals.contains(&format!(
            "subscription ship: {RECORDS} records: {ack} ack, {drop} drop, {retry} retry ({retry} held)"
        )),
        "the totals are the records' outcomes ({ack} ack, {drop} drop, {retry} retry): {totals}"
    );
}

/// `shardhost status` of the host whose admin API is at `url` (token `t0ken`).
fn status(url: &str, json: bool) -> String {
    let mut c = shardhost();
    c.args(["status", "--admin", url])
        .env("SHARDHOST_ADMIN_TOKEN", "t0ken");
    if json {
        c.arg("--json");
    }
    let out = c.output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    text(&out.stdout)
}

#[test]
fn status_shows_the_outcome_totals_and_the_held_record_while_a_host_runs() {
    let dir = Scratch::new("summary-status");
    let extra = "[admin]\nlisten = \"127.0.0.1:0\"\ntoken = \"t0ken\"\n";
    let (child, mut lines) = start(&dir, extra);
    let mut log = Log::default();
    read_until(&mut lines, &mut log, "the admin API", |l| {
        l.lines.iter().any(|l| l.contains("admin API listening"))
    });
    let url = log
        .lines
        .iter()
        .find_map(|l| field(l, "addr"))
        .map(|addr| format!("http://{addr}"))
        .expect("the admin API's address");
    read_until(&mut lines, &mut log, "every record answered", |l| {
        l.answered.len() == RECORDS
    });
    let (checkpoint, held, held_key) = log.held();
    let (ack, drop, retry) = (log.count("ack"), log.count("drop"), log.count("retry"));
    let log = Arc::new(Mutex::new(log));
    let drain = log.clone();
    std::thread::spawn(move || {
        for l in lines.map_while(Result::ok) {
            drain.lock().unwrap().note(l);
        }
    });
    let totals = format!("{RECORDS} records: {ack} ack, {drop} drop, {retry} retry ({retry} held)");
    let holds = format!("shardId-000000000000 holds {held} ({held_key})");
    let last = Mutex::new(String::new());
    // The checkpoint shows once written (at most one write per `checkpoint_every`).
    wait_until_else(
        "the totals, the checkpoint and the held record in `shardhost status`",
        Duration::from_secs(30),
        || {
            let table = status(&url, false);
            let shown =
                table.contains(&totals) && table.contains(&holds) && table.contains(&checkpoint);
            *last.lock().unwrap() = table;
            shown
        },
        || {
            format!(
                "wanted `{totals}`, `{checkpoint}` and `{holds}` in:\n{}\nlog:\n{}",
                last.lock().unwrap(),
                log.lock().unwrap().lines.join("\n")
            )
        },
    );

    let json: serde_json::Value = serde_json::from_str(&status(&url, true)).unwrap();
    let sub = &json["subscriptions"][0];
    let t = &sub["totals"];
    for (name, n) in [
        ("records", RECORDS),
        ("ack", ack),
        ("drop", drop),
        ("retry", retry),
        ("held", retry),
        ("failed", 0),
    ] {
        assert_eq!(t[name], n as u64, "totals.{name}: {json:#}");
    }
    let shard = &sub["shards"][0];
    assert_eq!(shard["checkpoint"], checkpoint.as_str(), "{json:#}");
    assert_eq!(shard["held_at"], held.as_str(), "{json:#}");
    assert_eq!(shard["held_key"], held_key.as_str(), "{json:#}");
    assert!(shard["held_since_ms"].as_u64().is_some(), "{json:#}");
    interrupt(&child);
}
