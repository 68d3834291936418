//! The host memory a guest's responses may hold (issue 41, item 4): a body the host read for a
//! guest counts against the instance's `limits.memory` until the guest reads it, and one not
//! read by the end of the call is dropped. A guest that keeps every response it gets, call
//! after call, holds neither gigabytes of the host nor more than its own limit.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::support::{HttpServer, Scratch, guest, wait_until};

/// One response body: 8 MiB (under the default `max_body` of 10 MiB).
const BODY: usize = 8 << 20;
/// Calls that each keep 4 bodies: 512 MiB in all if the host kept them.
const CALLS: usize = 16;
/// What the `shardhost invoke` process may reach at its peak: its own ~60 MiB, the 64 MiB the
/// instance may hold, and room for the allocator (without the bound: 640 MiB).
const PEAK_LIMIT: u64 = 160 << 20;

/// What a finished process printed, and its peak resident memory in bytes.
struct Finished {
    stdout: String,
    stderr: String,
    peak: u64,
}

/// Runs `command` to its end, sampling its peak resident memory (`VmHWM`) while it runs.
/// (`wait4`'s `ru_maxrss` would not do: Linux counts in it the peak of the test process that
/// spawned it.)
fn run_measured(command: &mut Command) -> Finished {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let drain = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            pipe.read_to_string(&mut text).unwrap();
            text
        })
    };
    let stdout = drain(Box::new(child.stdout.take().unwrap()));
    let stderr = drain(Box::new(child.stderr.take().unwrap()));
    let mut peak = 0;
    wait_until(
        "shardhost invoke to finish",
        Duration::from_secs(300),
        || {
            peak = peak.max(peak_rss(child.id()).unwrap_or(0));
            child.try_wait().unwrap().is_some()
        },
    );
    Finished {
        stdout: stdout.join().unwrap(),
        stderr: stderr.join().unwrap(),
        peak,
    }
}

/// The peak resident memory of a running process so far (`VmHWM`), in bytes.
fn peak_rss(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

fn invoke(dir: &Scratch, server: &HttpServer, records: &str) -> Finished {
    let records = dir.write("r.ndjson", records);
    run_measured(
        Command::new(env!("CARGO_BIN_EXE_shardhost"))
            .arg("invoke")
            .arg(guest("hoard"))
            .arg("--records")
            .arg(&records)
            .args(["--batch", "1", "--json", "--timeout", "60s"])
            .args(["--allow-http", &server.origin()])
            .env("SHARDHOST_CACHE_DIR", dir.0.join("cache"))
            .env("RUST_LOG", "warn")
            // As many environments set it: the errors a guest is answered with must still
            // carry no backtrace (resolving one loads the debug info, hundreds of MiB).
            .env("RUST_BACKTRACE", "1")
            .env_remove("RUST_LIB_BACKTRACE"),
    )
}

fn record(command: serde_json::Value) -> String {
    format!(
        "{}\n",
        serde_json::json!({"partition_key": "hoard", "data": command})
    )
}

/// The `retry_after_ms` of each line (0 for an ack).
fn answers(stdout: &str) -> Vec<u64> {
    stdout
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v["retry_after_ms"].as_u64().unwrap_or(0)
        })
        .collect()
}

#[test]
fn a_guest_keeping_every_response_across_calls_holds_neither_the_host_nor_past_its_limit() {
    let server = HttpServer::start();
    let dir = Scratch::new("hoard");
    // Compiled into the cache first: a compile's own peak is not what is measured.
    let warm = invoke(&dir, &server, &record(serde_json::json!({"keep": 0})));
    assert_eq!(answers(&warm.stdout), [0], "{}", warm.stderr);

    let url = format!("{}/big/{BODY}", server.origin());
    let mut records = String::new();
    for _ in 0..CALLS {
        records += &record(serde_json::json!({"url": url, "keep": 4}));
    }
    // 80 MiB in one call, past the instance's 64 MiB.
    records += &record(serde_json::json!({"url": url, "keep": 10}));
    // The bodies kept by the calls before.
    records += &record(serde_json::json!({"read": true}));
    let run = invoke(&dir, &server, &records);
    eprintln!(
        "peak RSS of `shardhost invoke` while the guest kept {} MiB: {} MiB ({} MiB keeping none)",
        ((CALLS * 4 + 10) * BODY) >> 20,
        run.peak >> 20,
        warm.peak >> 20
    );
    assert!(
        run.peak < PEAK_LIMIT,
        "peak RSS {} MiB, over {} MiB",
        run.peak >> 20,
        PEAK_LIMIT >> 20
    );
    let answers = answers(&run.stdout);
    assert_eq!(
        answers[..CALLS],
        [0; CALLS],
        "4 responses fit in a call: {}",
        run.stderr
    );
    let (over, read) = (answers[CALLS], answers[CALLS + 1]);
    assert!(
        (5..10).contains(&over),
        "the responses past the limit are refused, {over} kept: {}",
        run.stderr
    );
    assert!(
        run.stderr.contains("memory limit of 64.0 MiB"),
        "the guest is told why: {}",
        run.stderr
    );
    assert_eq!(read, 0, "nothing kept from a call before: {}", run.stderr);
    assert!(
        run.stderr.contains("kept response 1")
            && run.stderr.contains("not read by the end of the call"),
        "{}",
        run.stderr
    );
    assert!(
        !run.stderr.contains("backtrace"),
        "the guest is answered without a backtrace: {}",
        run.stderr
    );
}
