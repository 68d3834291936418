//! The commands `commands` runs here, offline (but `tests/stack`, which starts the emulators),
//! each given the output the document shows under it.

use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use super::commands::assert_printed;
use super::{root, said, shardhost, text};
use crate::support::{Scratch, kinesis_endpoint};

pub(super) fn run_new(dir: &Scratch, shown: &[String]) {
    let out = shardhost(&dir.0)
        .args(["new", "orders", "--lang", "python"])
        .env("SHARDHOST_SDK", root().join("guest-sdk"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", said(&out));
    // The SDK's path is the reader's checkout: the document's /home/you/shardhost is this one.
    let checkout = root().canonicalize().unwrap().display().to_string();
    let shown: Vec<String> = shown
        .iter()
        .map(|l| l.replace("/home/you/shardhost", &checkout))
        .collect();
    assert_printed(&shown, &text(&out.stdout), |_| false);
    assert!(dir.0.join("orders/orders.py").exists());
}

pub(super) fn run_invoke(dir: &Scratch, shown: &[String]) {
    let out = shardhost(&dir.0)
        .args([
            "invoke",
            "examples/shipping/ship.wasm",
            "--records",
            "examples/shipping/shipments.ndjson",
            "--allow-http",
            "http://127.0.0.1:8090",
            "--state",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", said(&out));
    assert_printed(shown, &text(&out.stdout), |_| false);
}

pub(super) fn run_keygen(dir: &Scratch, shown: &[String]) {
    let out = shardhost(&dir.0)
        .args(["keygen", "--out", "deploy.pem"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", said(&out));
    assert_printed(shown, &said(&out), |_| false);
    assert!(
        text(&out.stdout).starts_with("ed25519:"),
        "the public key on stdout"
    );
    let key = std::fs::read_to_string(dir.0.join("deploy.pem")).unwrap();
    assert!(key.contains("PRIVATE KEY"), "{key}");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(dir.0.join("deploy.pem"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600, "the private key is the owner's alone");
}

/// Lines of a child's stream, as they come.
fn lines_of(read: impl std::io::Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(read).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// Reads `rx` until a line satisfies `until`; every line read so far.
fn read_until(rx: &mpsc::Receiver<String>, seen: &mut Vec<String>, until: impl Fn(&str) -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while !seen.iter().any(|l| until(l)) {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => seen.push(line),
            Err(_) => panic!("the condition never came:\n{}", seen.join("\n")),
        }
    }
}

fn interrupt(child: &mut Child) {
    // SAFETY: kill(2) on the pid of a child this test started and has not reaped.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
}

/// `shardhost run examples/shipping/shardhost.toml`, then Ctrl-C once the held shipment is
/// seen: what it says when it stops.
pub(super) fn run_shipping(dir: &Scratch, shown: &[String]) {
    let example = dir.0.join("examples/shipping/shardhost.toml");
    std::fs::copy(root().join("examples/shipping/shardhost.toml"), &example).unwrap();
    let mut child = shardhost(&dir.0)
        .args(["-v", "run", "examples/shipping/shardhost.toml"])
        .env("SHARDHOST_CACHE_DIR", dir.0.join("cache"))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let rx = lines_of(child.stderr.take().unwrap());
    let mut seen = Vec::new();
    read_until(&rx, &mut seen, |l| l.contains("record held"));
    interrupt(&mut child);
    assert!(child.wait().unwrap().success(), "{}", seen.join("\n"));
    seen.extend(rx.iter());
    let log = seen.join("\n");
    // How long the shipment was held depends on when Ctrl-C came.
    let shown: Vec<String> = shown
        .iter()
        .map(|l| l.split(" for ").next().unwrap().to_owned())
        .collect();
    assert_printed(&shown, &log, |_| false);
}

/// `tests/stack` alone prints the `export` lines of the emulators it started, and Ctrl-C
/// stops them.
pub(super) fn run_stack(_: &Scratch, _: &[String]) {
    if kinesis_endpoint().is_none() {
        eprintln!(
            "docs: `tests/stack` skipped (the emulators are not installed: run under tests/stack)"
        );
        return;
    }
    let mut child = std::process::Command::new(root().join("tests/stack"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let rx = lines_of(child.stdout.take().unwrap());
    let mut seen = Vec::new();
    read_until(&rx, &mut seen, |l| {
        l.starts_with("export DYNAMODB_FAULT_TEST_PID=")
    });
    interrupt(&mut child);
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130), "Ctrl-C stops it");
    for name in [
        "KINESIS_TEST_ENDPOINT",
        "KINESIS_TEST_TLS_ENDPOINT",
        "KINESIS_TEST_CA_FILE",
        "DYNAMODB_TEST_ENDPOINT",
    ] {
        assert!(
            seen.iter()
                .any(|l| l.starts_with(&format!("export {name}="))),
            "{name} in:\n{}",
            seen.join("\n")
        );
    }
}
