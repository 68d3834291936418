//! A per-record handler whose records script what it does. Each record's data, as UTF-8 text:
//!
//! | data                     | the handler                                                  |
//! |--------------------------|--------------------------------------------------------------|
//! | `ack`                    | answers ack                                                  |
//! | `drop`                   | answers drop                                                 |
//! | `retry`                  | answers retry                                                |
//! | `retry-after:N`          | answers retry-after(N) (N in ms; an unparsable N: ack)       |
//! | `panic`                  | panics with "poison record" (the guest traps)                |
//! | `spin`                   | loops forever (for the call timeout)                         |
//! | `hog`                    | allocates and touches 1 MiB after 1 MiB until an allocation fails, then panics (for the memory limit) |
//! | `env:NAME=VALUE`          | ack when the environment has NAME=VALUE, retry otherwise (for WASI grants) |
//! | `file:PATH`              | ack when PATH can be read, retry otherwise (for WASI grants)  |
//! | `connect:HOST:PORT`      | ack when a TCP connection to HOST:PORT opens, retry otherwise (for WASI grants) |
//! | `log:TEXT`               | logs TEXT at info level, answers ack                         |
//! | `log-many:N:TEXT`        | logs TEXT N times at info level, answers ack                 |
//! | `seek-self`              | seeks to its own sequence number (every time), answers ack   |
//! | `publish:STREAM:TEXT`    | publishes TEXT to STREAM under the record's partition key; ack, or retry (and a warn line) when the host refuses |
//! | `seek:SEQUENCE_NUMBER`   | seeks the shard there; ack, or retry (and a warn line) when the host refuses |
//! | `retry-until:N`          | answers retry while the record's attempt is below N, then ack |
//! | `retry-once`             | answers retry the first time this instance sees the record, ack after |
//! | `seek-once:SEQUENCE_NUMBER` | seeks there the first time this instance sees the record, ack after |
//! | `sleep:MS`               | sleeps MS milliseconds (WASI clocks), answers ack            |
//! | `stdout:TEXT`            | prints TEXT and a line break to stdout, answers ack          |
//! | `stderr:TEXT`            | prints TEXT and a line break to stderr, answers ack          |
//! | `abort`                  | aborts: the guest traps with no panic message                |
//! | `A;B;...`                | runs each command in turn and answers the last one's outcome  |
//! | anything else, not UTF-8 | answers ack                                                  |

use std::collections::HashSet;
use std::hint::black_box;
use std::sync::Mutex;

use shardhost_guest::{Outcome, Record};

const MIB: usize = 1 << 20;

/// Sequence numbers this instance has seen with a `*-once` command.
static SEEN: Mutex<Option<HashSet<String>>> = Mutex::new(None);

/// Whether this instance sees `record` for the first time.
fn first_time(record: &Record) -> bool {
    SEEN.lock()
        .unwrap()
        .get_or_insert_with(HashSet::new)
        .insert(record.sequence_number().to_owned())
}

fn script(record: &Record) -> Outcome {
    let Ok(text) = record.text() else {
        return Outcome::Ack;
    };
    let mut outcome = Outcome::Ack;
    for step in text.split(';') {
        outcome = one(record, step);
    }
    outcome
}

fn one(record: &Record, text: &str) -> Outcome {
    if text == "retry-once" {
        return if first_time(record) {
            Outcome::Retry
        } else {
            Outcome::Ack
        };
    }
    match text {
        "ack" => Outcome::Ack,
        "drop" => Outcome::Drop,
        "retry" => Outcome::Retry,
        "panic" => panic!("poison record"),
        "abort" => std::process::abort(),
        "spin" => spin(),
        "hog" => hog(),
        _ => command(record, text),
    }
}

fn command(record: &Record, text: &str) -> Outcome {
    if let Some(n) = text.strip_prefix("retry-until:") {
        let n: u32 = n.parse().unwrap_or(1);
        shardhost_guest::info!("attempt {} of a record retried until {n}", record.attempt());
        return if record.attempt() < n {
            Outcome::Retry
        } else {
            Outcome::Ack
        };
    }
    if let Some(line) = text.strip_prefix("stdout:") {
        println!("{line}");
        return Outcome::Ack;
    }
    if let Some(line) = text.strip_prefix("stderr:") {
        eprintln!("{line}");
        return Outcome::Ack;
    }
    if let Some(ms) = text.strip_prefix("sleep:") {
        std::thread::sleep(std::time::Duration::from_millis(ms.parse().unwrap_or(0)));
        return Outcome::Ack;
    }
    if let Some(sequence_number) = text.strip_prefix("seek-once:") {
        if !first_time(record) {
            return Outcome::Ack;
        }
        return match shardhost_guest::seek(sequence_number) {
            Ok(()) => Outcome::Ack,
            Err(e) => {
                shardhost_guest::warn!("seek to {sequence_number} refused: {e}");
                Outcome::Retry
            }
        };
    }
    if let Some(ms) = text.strip_prefix("retry-after:") {
        return ms.parse().map_or(Outcome::Ack, Outcome::RetryAfter);
    }
    if let Some(pair) = text.strip_prefix("env:") {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        let seen = std::env::var(name);
        return if seen.as_deref() == Ok(value) {
            Outcome::Ack
        } else {
            Outcome::Retry
        };
    }
    if let Some(path) = text.strip_prefix("file:") {
        return if std::fs::read(path).is_ok() {
            Outcome::Ack
        } else {
            Outcome::Retry
        };
    }
    if let Some(addr) = text.strip_prefix("connect:") {
        return match std::net::TcpStream::connect(addr) {
            Ok(_) => Outcome::Ack,
            Err(e) => {
                shardhost_guest::warn!("connect to {addr} failed: {e}");
                Outcome::Retry
            }
        };
    }
    if let Some((n, line)) = text
        .strip_prefix("log-many:")
        .and_then(|r| r.split_once(':'))
    {
        for _ in 0..n.parse::<u32>().unwrap_or(0) {
            shardhost_guest::log::info(line);
        }
        return Outcome::Ack;
    }
    if text == "seek-self" {
        return match shardhost_guest::seek(record.sequence_number()) {
            Ok(()) => Outcome::Ack,
            Err(e) => {
                shardhost_guest::warn!("seek to itself refused: {e}");
                Outcome::Retry
            }
        };
    }
    if let Some(line) = text.strip_prefix("log:") {
        shardhost_guest::log::info(line);
        return Outcome::Ack;
    }
    if let Some((stream, data)) = text
        .strip_prefix("publish:")
        .and_then(|r| r.split_once(':'))
    {
        return match shardhost_guest::publish(stream, record.partition_key(), data.as_bytes()) {
            Ok(sequence_number) => {
                shardhost_guest::info!("published to {stream}: {sequence_number}");
                Outcome::Ack
            }
            Err(e) => {
                shardhost_guest::warn!("publish to {stream} refused: {e}");
                Outcome::Retry
            }
        };
    }
    if let Some(sequence_number) = text.strip_prefix("seek:") {
        return match shardhost_guest::seek(sequence_number) {
            Ok(()) => Outcome::Ack,
            Err(e) => {
                shardhost_guest::warn!("seek to {sequence_number} refused: {e}");
                Outcome::Retry
            }
        };
    }
    Outcome::Ack
}

/// Never returns, and does work the optimiser cannot remove.
fn spin() -> ! {
    let mut n: u64 = 0;
    loop {
        n = black_box(n.wrapping_add(1));
    }
}

/// Holds on to ever more touched memory until an allocation fails.
fn hog() -> ! {
    let mut held: Vec<Vec<u8>> = Vec::new();
    loop {
        let mut chunk = Vec::new();
        if chunk.try_reserve_exact(MIB).is_err() || held.try_reserve(1).is_err() {
            panic!("hog: allocation failed after {} MiB", held.len());
        }
        chunk.resize(MIB, 0xa5);
        held.push(black_box(chunk));
        black_box(&held);
    }
}

shardhost_guest::handler!(script);
