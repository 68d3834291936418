//! A new handler in each language, as README's "Your first handler" types it: `shardhost new`,
//! its own unit test, `shardhost build` (twice: the second is up to date), `shardhost invoke`
//! and `shardhost run`, which answer every record alike and end with the same totals.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::support::{Scratch, root};

fn shardhost(dir: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_shardhost"));
    c.current_dir(dir)
        .env("SHARDHOST_SDK", root().join("guest-sdk"))
        .env("SHARDHOST_LOG", "info");
    c
}

fn text(out: &[u8]) -> String {
    String::from_utf8_lossy(out).into_owned()
}

fn ok(what: &str, out: Output) -> Output {
    assert!(
        out.status.success(),
        "{what} failed ({:?}):\n{}\n{}",
        out.status.code(),
        text(&out.stdout),
        text(&out.stderr)
    );
    out
}

/// What `records.ndjson` of a new project gets, by partition key.
const EXPECTED: [(&str, &str); 4] = [
    ("order-1", "ack"),
    ("order-2", "drop"),
    ("order-3", "ack"),
    ("order-4", "drop"),
];
const TOTALS: &str = "4 records: 2 ack, 2 drop, 0 retry";

/// `shardhost new orders --lang LANG` in a scratch directory; the project's directory.
fn new_project(scratch: &Scratch, lang: &str) -> PathBuf {
    let out = ok(
        "shardhost new",
        shardhost(&scratch.0)
            .args(["new", "orders", "--lang", lang])
            .output()
            .unwrap(),
    );
    let said = text(&out.stdout);
    for next in [
        "shardhost build",
        "shardhost invoke orders.wasm --records records.ndjson",
        "shardhost run",
    ] {
        assert!(said.contains(next), "`{next}` in:\n{said}");
    }
    let again = shardhost(&scratch.0)
        .args(["new", "orders", "--lang", lang])
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(2), "a second `new` makes nothing");
    assert!(text(&again.stderr).contains("already exists"));
    scratch.0.join("orders")
}

/// `shardhost build` twice: built, then up to date, with the same version.
fn build(dir: &Path, env: &[(&str, &Path)]) -> PathBuf {
    let run = || {
        let mut c = shardhost(dir);
        c.arg("build");
        for (k, v) in env {
            c.env(k, v);
        }
        let out = ok("shardhost build", c.output().unwrap());
        text(&out.stderr)
    };
    let first = run();
    let built = first
        .lines()
        .find(|l| l.starts_with("built orders.wasm ("))
        .unwrap_or_else(|| panic!("no `built` line:\n{first}"));
    let version = |line: &str| line.split("version ").nth(1).unwrap_or_default()[..12].to_owned();
    let second = run();
    let up_to_date = second
        .lines()
        .find(|l| l.starts_with("orders.wasm is up to date (version "))
        .unwrap_or_else(|| panic!("no `up to date` line:\n{second}"));
    assert_eq!(version(built), version(up_to_date), "{first}\n{second}");
    dir.join("orders.wasm")
}

/// `shardhost invoke orders.wasm --records records.ndjson --json`: outcomes by key.
fn invoke(dir: &Path) -> BTreeMap<String, String> {
    let out = ok(
        "shardhost invoke",
        shardhost(dir)
            .args([
                "invoke",
                "orders.wasm",
                "--records",
                "records.ndjson",
                "--json",
            ])
            .output()
            .unwrap(),
    );
    let stderr = text(&out.stderr);
    assert!(
        stderr.lines().any(|l| l == TOTALS),
        "the totals line `{TOTALS}` in:\n{stderr}"
    );
    text(&out.stdout)
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            (
                v["partition_key"].as_str().unwrap().to_owned(),
                v["outcome"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// `shardhost run` (its shardhost.toml) until every record is answered, then SIGINT: outcomes
/// by key, and the stop summary's totals line.
fn run(dir: &Path) -> (BTreeMap<String, String>, String) {
    let mut child = shardhost(dir)
        .arg("run")
        .env("SHARDHOST_LOG", "info,shardhost::dispatch=debug")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut seen = Vec::new();
    let mut answered = BTreeMap::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    while answered.len() < EXPECTED.len() {
        assert!(Instant::now() < deadline, "{}", seen.join("\n"));
        let Some(Ok(line)) = lines.next() else {
            let _ = child.kill();
            panic!("run ended early:\n{}", seen.join("\n"));
        };
        for outcome in ["ack", "drop", "retry"] {
            if line.contains(&format!("shardhost::dispatch::batch: {outcome} "))
                && let Some(key) = line
                    .split_whitespace()
                    .find_map(|w| w.strip_prefix("partition_key="))
            {
                answered.insert(key.trim_matches('"').to_owned(), outcome.to_owned());
            }
        }
        seen.push(line);
    }
    Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    seen.extend(lines.map_while(Result::ok));
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{}", seen.join("\n"));
    let totals = seen
        .iter()
        .find(|l| l.contains("subscription orders: "))
        .unwrap_or_else(|| panic!("no totals on stop:\n{}", seen.join("\n")))
        .clone();
    (answered, totals)
}

/// From `new` to `run`; `test` runs the project's own unit test.
fn five_commands(lang: &str, env: &[(&str, &Path)], test: impl Fn(&Path)) {
    let scratch = Scratch::new(&format!("first-{lang}"));
    let dir = new_project(&scratch, lang);
    test(&dir);
    build(&dir, env);
    let invoked = invoke(&dir);
    let expected: BTreeMap<String, String> = EXPECTED
        .iter()
        .map(|(k, o)| (k.to_string(), o.to_string()))
        .collect();
    assert_eq!(invoked, expected, "invoke");
    let (ran, totals) = run(&dir);
    assert_eq!(ran, invoked, "run answers every record as invoke does");
    assert!(
        totals.ends_with(&format!("subscription orders: {TOTALS}")),
        "{totals}"
    );
}

#[test]
fn a_new_python_handler_tests_builds_invokes_and_runs() {
    five_commands("python", &[], |dir| {
        let python = crate::sdks::python_with_the_sdk();
        ok(
            "the project's unittest",
            Command::new(python)
                .args(["-m", "unittest", "-q"])
                .current_dir(dir)
                .output()
                .unwrap(),
        );
    });
}

#[test]
fn a_new_javascript_handler_tests_builds_invokes_and_runs() {
    five_commands("js", &[], |dir| {
        ok(
            "npm install",
            Command::new("npm")
                .args(["install", "--no-audit", "--no-fund", "--offline"])
                .current_dir(dir)
                .output()
                .unwrap(),
        );
        ok(
            "npm test",
            Command::new("npm")
                .arg("test")
                .current_dir(dir)
                .output()
                .unwrap(),
        );
    });
}

#[test]
fn a_new_rust_handler_tests_builds_invokes_and_runs() {
    // Its own target directory, kept warm between runs (a nested cargo on the workspace's own
    // target directory would wait on the lock the test run holds).
    let target = root().join("target/first-handler-rust");
    five_commands("rust", &[("CARGO_TARGET_DIR", &target)], |dir| {
        ok(
            "cargo test",
            Command::new("cargo")
                .arg("test")
                .env("CARGO_TARGET_DIR", &target)
                .current_dir(dir)
                .output()
                .unwrap(),
        );
    });
}

#[test]
fn build_in_a_directory_with_no_handler_says_how_to_make_one() {
    let scratch = Scratch::new("build-nothing");
    std::fs::write(scratch.0.join("notes.txt"), "").unwrap();
    let out = shardhost(&scratch.0).arg("build").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let said = text(&out.stderr);
    assert!(said.contains("no handler project here"), "{said}");
    assert!(
        said.contains("shardhost new DIR --lang rust|python|js"),
        "{said}"
    );
}
