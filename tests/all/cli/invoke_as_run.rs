//! `invoke` and `run` over the same records, one of which makes the handler fail: each record
//! gets the same outcome from both (issue 32, 1: `invoke` used to retry the whole batch).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::{Killed, shardhost, text};
use crate::support::{self, Scratch, guest};

/// `name=value` of a log line, quotes dropped.
fn field(line: &str, name: &str) -> Option<String> {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(name)?.strip_prefix('='))
        .map(|v| v.trim_matches('"').to_owned())
}

#[test]
fn invoke_and_run_answer_every_record_alike_when_the_handler_fails_on_one() {
    let dir = Scratch::new("invoke-as-run");
    let records = [
        support::text_record("a", "ack"),
        support::text_record("b", "panic"),
        support::text_record("c", "drop"),
        support::text_record("d", "ack"),
    ];
    dir.write("r.ndjson", records.join("\n"));
    let out = shardhost()
        .arg("invoke")
        .arg(guest("scripted"))
        .args(["--batch", "100", "--json", "--records"])
        .arg(dir.0.join("r.ndjson"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let invoked: BTreeMap<String, String> = text(&out.stdout)
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            (
                v["partition_key"].as_str().unwrap().to_owned(),
                v["outcome"].as_str().unwrap().to_owned(),
            )
        })
        .collect();

    let config = dir.write(
        "shardhost.toml",
        format!(
            "[kinesis]\nendpoint = \"memory\"\n\n[[subscription]]\nname = \"s\"\nstream = \"s\"\n\
             handler = \"{}\"\nfeed = \"r.ndjson\"\ncreate_if_missing = 1\n\
             start_at = \"trim_horizon\"\nbatch = 100\npoll_interval = \"50ms\"\n",
            guest("scripted").display()
        ),
    );
    let mut child = shardhost()
        .arg("run")
        .arg(&config)
        .env("SHARDHOST_LOG", "info,shardhost::dispatch=debug")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Read on a thread, so that a host that says nothing cannot hold the test past its
    // deadline.
    let stderr = child.stderr.take().unwrap();
    let child = Killed(child);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut ran = BTreeMap::new();
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while ran.len() < records.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        let Ok(line) = rx.recv_timeout(left) else {
            break;
        };
        let outcome = if line.contains("record held") {
            Some("retry")
        } else if line.contains("shardhost::dispatch::batch: ack ") {
            Some("ack")
        } else if line.contains("shardhost::dispatch::batch: drop ") {
            Some("drop")
        } else {
            None
        };
        if let (Some(outcome), Some(key)) = (outcome, field(&line, "partition_key")) {
            ran.insert(key, outcome.to_owned());
        }
        seen.push(line);
    }
    Command::new("kill")
        .args(["-INT", &child.0.id().to_string()])
        .status()
        .unwrap();
    assert_eq!(ran.len(), records.len(), "{}", seen.join("\n"));
    assert_eq!(ran, invoked, "run and invoke");
    assert_eq!(invoked["b"], "retry");
    assert_eq!(invoked["a"], "ack");
    assert_eq!(invoked["c"], "drop");
}
