//! What a user sees when a handler fails under `invoke`: the handler's own message once, with
//! the short version, and none of the runtime's dying words (a Rust runtime's panic lines, a
//! JavaScript engine's abort notice, the wasm trap's text) but under `-v`.

use std::path::Path;
use std::process::{Command, Output};

use super::text;
use crate::support::{self, Scratch, guest};

/// `shardhost invoke` at the default level (`-v` when `verbose`), records [ok, fail, ok].
fn invoke(handler: &Path, records: &Path, verbose: bool) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_shardhost"));
    c.env_remove("SHARDHOST_LOG").env_remove("RUST_LOG");
    if verbose {
        c.arg("-v");
    }
    // The conformance handlers import HTTP and state: granted, never used here.
    c.arg("invoke")
        .args(["--allow-http", "http://127.0.0.1:9", "--state"])
        .arg(handler)
        .arg("--records")
        .arg(records)
        .output()
        .unwrap()
}

fn version(handler: &Path) -> String {
    let bytes = std::fs::read(handler).unwrap();
    hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&bytes))
}

/// The report of a failed record, at the default level and under `-v`.
fn assert_reported_once(handler: &Path, records: &Path, message: &str, detail: &str) {
    let out = invoke(handler, records, false);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    let full = version(handler);
    let short = &full[..12];
    assert!(
        !stdout.contains(&full) && !stderr.contains(&full),
        "the full version is shown:\n{stdout}\n{stderr}"
    );
    let failed: Vec<&str> = stdout.lines().filter(|l| l.contains(" retry ")).collect();
    assert_eq!(failed.len(), 1, "{stdout}");
    assert!(
        failed[0].contains(short) && failed[0].contains(message),
        "{stdout}"
    );
    for noise in [
        "panicked at runtime/",
        "RUST_BACKTRACE",
        "Python function threw an unexpected exception",
        "mozalloc_abort",
        "Stack:",
        "Traceback",
        "unreachable",
        "wasm trap",
    ] {
        assert!(
            !stdout.contains(noise) && !stderr.contains(noise),
            "`{noise}` at the default level:\n{stdout}\n{stderr}"
        );
    }
    assert_eq!(
        stderr.matches(message).count(),
        1,
        "the handler's message once in the log:\n{stderr}"
    );
    let verbose = invoke(handler, records, true);
    let all = text(&verbose.stderr) + &text(&verbose.stdout);
    assert!(all.contains(detail), "`{detail}` under -v:\n{all}");
}

/// A records file of `(partition key, data)` lines.
fn records(dir: &Scratch, lines: &[(&str, &str)]) -> std::path::PathBuf {
    let lines: Vec<String> = lines
        .iter()
        .map(|(key, data)| support::text_record(key, data))
        .collect();
    dir.write("r.ndjson", lines.join("\n") + "\n")
}

/// The conformance handlers act on the partition key: [ok, fail, ok].
const RAISE: [(&str, &str); 3] = [("ack", ""), ("raise", ""), ("ack", "")];

#[test]
fn a_python_handler_that_raises_is_reported_once_without_the_runtimes_panic_lines() {
    // Issue 32, 3: the useful line came with `thread '<unnamed>' panicked at
    // runtime/src/lib.rs`, `Python function threw an unexpected exception`, a RUST_BACKTRACE
    // hint, the full 64-character version and the wasm trap's text, on every record.
    let handler = crate::conformance::built("tests/conformance/python", "conformance.wasm");
    let dir = Scratch::new("trap-python");
    let records = records(&dir, &RAISE);
    assert_reported_once(
        &handler,
        &records,
        "RuntimeError: raised on purpose",
        "Traceback",
    );
}

#[test]
fn a_javascript_handler_that_throws_is_reported_once_without_the_engines_abort_lines() {
    let handler = crate::conformance::built("tests/conformance/js", "conformance.wasm");
    let dir = Scratch::new("trap-js");
    let records = records(&dir, &RAISE);
    assert_reported_once(
        &handler,
        &records,
        "Error: raised on purpose",
        "mozalloc_abort",
    );
}

#[test]
fn a_rust_handler_that_panics_is_reported_once_as_one_line() {
    let dir = Scratch::new("trap-rust");
    // The scripted handler acts on the data: [ok, panic, ok].
    let records = records(&dir, &[("a", "ack"), ("b", "panic"), ("c", "ack")]);
    assert_reported_once(&guest("scripted"), &records, "poison record", "unreachable");
}
