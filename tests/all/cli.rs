//! The `shardhost` binary as a user drives it: `invoke`, `check`, `run`, and every kind of bad
//! input, which must exit 2 with a message naming the thing and start nothing.

use crate::support;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::support::{HostToml, Scratch, Subscription, guest, root};

fn shardhost() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_shardhost"));
    c.env("SHARDHOST_LOG", "info");
    c
}

fn text(out: &[u8]) -> String {
    String::from_utf8_lossy(out).into_owned()
}

/// The shipping example may book (it imports wasi:http); without `carrier_url` it books
/// nothing, so the origin it is allowed never hears from it.
const NO_CARRIER: &str = "http://127.0.0.1:9";

fn shipments() -> std::path::PathBuf {
    root().join("examples/shipping/shipments.ndjson")
}

#[test]
fn invoke_prints_each_records_outcome_in_input_order() {
    let out = shardhost()
        .arg("invoke")
        .arg(guest("ship"))
        .arg("--records")
        .arg(shipments())
        .arg("--json")
        .args(["--allow-http", NO_CARRIER, "--state"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let input: Vec<serde_json::Value> = std::fs::read_to_string(shipments())
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let lines: Vec<serde_json::Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), input.len(), "one line per record");
    for (i, (line, record)) in lines.iter().zip(&input).enumerate() {
        assert_eq!(line["partition_key"], record["partition_key"], "line {i}");
        assert!(
            line["sequence_number"]
                .as_str()
                .is_some_and(|s| !s.is_empty())
        );
        let data = &record["data"];
        let expected = if data["address"] == "" {
            "drop"
        } else if data["carrier"] != "dhl" && data["carrier"] != "ups" {
            "retry"
        } else {
            "ack"
        };
        assert_eq!(line["outcome"], expected, "record {i}: {record}");
    }
    for outcome in ["ack", "drop", "retry"] {
        assert!(
            lines.iter().any(|l| l["outcome"] == outcome),
            "the example shows {outcome}"
        );
    }
}

#[test]
fn invoke_text_output_has_one_line_per_record() {
    let out = shardhost()
        .arg("invoke")
        .arg(guest("ship"))
        .args(["--allow-http", NO_CARRIER, "--state"])
        .args(["--batch", "1", "--records"])
        .arg(shipments())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let n = std::fs::read_to_string(shipments())
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .count();
    assert_eq!(stdout.lines().count(), n);
    assert!(stdout.lines().any(|l| l.contains(" drop ")), "{stdout}");
}

#[test]
fn invoke_reports_a_trap_and_exits_1() {
    let dir = Scratch::new("invoke-trap");
    let records = dir.write(
        "r.ndjson",
        format!(
            "{}\n{}\n",
            support::text_record("k", "ack"),
            support::text_record("k", "panic")
        ),
    );
    let out = shardhost()
        .arg("invoke")
        .arg(guest("scripted"))
        .args(["--batch", "1", "--json", "--records"])
        .arg(&records)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let lines: Vec<serde_json::Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0]["outcome"], "ack");
    assert_eq!(lines[1]["outcome"], "retry");
    assert!(
        lines[1]["error"]
            .as_str()
            .unwrap()
            .contains("poison record")
    );
}

#[test]
fn invoke_isolates_a_failing_record_in_a_batch_as_run_does() {
    // Issue 32, 1: with batch 100, a handler failing on the second of three records failed all
    // three under `invoke`, while `run` settles the first and third and retries only the second.
    let dir = Scratch::new("invoke-isolates");
    let records = dir.write(
        "r.ndjson",
        format!(
            "{}\n{}\n{}\n",
            support::text_record("a", "ack"),
            support::text_record("b", "panic"),
            support::text_record("c", "drop")
        ),
    );
    let out = shardhost()
        .arg("invoke")
        .arg(guest("scripted"))
        .args(["--batch", "100", "--json", "--records"])
        .arg(&records)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let lines: Vec<serde_json::Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let outcomes: Vec<&str> = lines
        .iter()
        .map(|l| l["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(outcomes, ["ack", "retry", "drop"]);
    assert!(lines[0].get("error").is_none() && lines[2].get("error").is_none());
    let error = lines[1]["error"].as_str().unwrap();
    assert!(error.contains("poison record"), "{error}");
}

#[test]
fn invoke_takes_the_memory_and_timeout_limits_a_subscription_would_have() {
    let dir = Scratch::new("invoke-limits");
    let records = dir.write(
        "r.ndjson",
        format!("{}\n", support::text_record("k", "sleep:800")),
    );
    let invoke = |handler: &str, limits: &[&str]| {
        shardhost()
            .arg("invoke")
            .arg(guest(handler))
            .args(["--json", "--records"])
            .arg(&records)
            .args(limits)
            .output()
            .unwrap()
    };
    let out = invoke("scripted", &["--timeout", "200ms"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("200 ms"),
        "{}",
        text(&out.stdout)
    );
    assert_eq!(invoke("scripted", &[]).status.code(), Some(0));
    // The big-memory guest holds an 8 MiB static buffer.
    let out = invoke("big_memory", &["--memory", "4MiB"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("limits"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(
        invoke("big_memory", &["--memory", "16MiB"]).status.code(),
        Some(0)
    );
    let out = invoke("scripted", &["--memory", "lots"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("--memory"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn cache_lists_compiled_components_by_version_and_clear_empties_it() {
    let dir = Scratch::new("cache-cli");
    let cache_dir = dir.0.join("cache");
    let with_cache = |args: &[&str]| {
        shardhost()
            .env("SHARDHOST_CACHE_DIR", &cache_dir)
            .args(args)
            .output()
            .unwrap()
    };
    let out = with_cache(&["cache"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("0 entries"),
        "{}",
        text(&out.stdout)
    );
    let handler = guest("always_ack");
    let handler = handler.to_str().unwrap();
    let records = shipments();
    let out = with_cache(&["invoke", handler, "--records", records.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let version = shardhost::testing::version_of(&std::fs::read(handler).unwrap());
    let out = with_cache(&["cache", "list"]);
    let listed = text(&out.stdout);
    assert!(listed.contains(&version[..12]), "{listed}");
    assert!(listed.contains("1 entries"), "{listed}");
    let out = with_cache(&["cache", "clear"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("removed 1"),
        "{}",
        text(&out.stdout)
    );
    assert!(text(&with_cache(&["cache"]).stdout).contains("0 entries"));
}

/// Writes the shipping example's config into a scratch dir with a replaced body.
fn config_in(dir: &Scratch, body: &str) -> std::path::PathBuf {
    dir.write("shardhost.toml", body)
}

/// The shipping example's config, as literal text: the tests that change it check the line
/// numbers of its keys.
fn good_config(handler: &Path) -> String {
    format!(
        r#"[kinesis]
endpoint = "memory"

[[subscription]]
name = "ship"
stream = "shipments"
handler = "{}"
"#,
        handler.display()
    )
}

fn check(path: &Path) -> Output {
    shardhost().arg("check").arg(path).output().unwrap()
}

/// `check` and `run` both refuse: exit 2, the message names what it must, nothing starts.
fn assert_refused(config: &Path, must_name: &[&str]) {
    let out = check(config);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "check: {stderr}");
    for needle in must_name {
        assert!(
            stderr.contains(needle),
            "check's message should name `{needle}`:\n{stderr}"
        );
    }
    let started = Instant::now();
    let out = shardhost().arg("run").arg(config).output().unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "run: {stderr}");
    assert!(
        !stderr.contains("host running"),
        "run started a host: {stderr}"
    );
    assert!(started.elapsed() < Duration::from_secs(30));
}

#[test]
fn the_examples_pass_check() {
    for example in ["shipping", "orders"] {
        // The examples name their handler next to the config; point at the built ones.
        let dir = Scratch::new("examples");
        let src =
            std::fs::read_to_string(root().join("examples").join(example).join("shardhost.toml"))
                .unwrap();
        let wasm = if example == "shipping" {
            "ship"
        } else {
            "pick"
        };
        std::fs::copy(guest(wasm), dir.0.join(format!("{wasm}.wasm"))).unwrap();
        let feed = root().join("examples").join(example);
        let src = src.replace("feed = \"", &format!("feed = \"{}/", feed.display()));
        let out = check(&config_in(&dir, &src));
        assert!(out.status.success(), "{example}: {}", text(&out.stderr));
        assert!(text(&out.stdout).contains("ok"));
    }
}

#[test]
fn malformed_toml_is_refused_with_its_line() {
    let dir = Scratch::new("bad");
    let path = config_in(
        &dir,
        "[kinesis]\nendpoint = \"memory\"\n[[subscription]\nname = 1\n",
    );
    assert_refused(&path, &["shardhost.toml:3"]);
}

#[test]
fn an_unknown_key_is_refused_with_its_name_and_line() {
    let dir = Scratch::new("bad");
    let body = good_config(&guest("ship")) + "batchsize = 5\n";
    let path = config_in(&dir, &body);
    assert_refused(&path, &["shardhost.toml:8", "batchsize"]);
}

#[test]
fn a_missing_required_key_is_refused_with_its_name() {
    let dir = Scratch::new("bad");
    let body = good_config(&guest("ship")).replace("stream = \"shipments\"\n", "");
    let path = config_in(&dir, &body);
    assert_refused(&path, &["shardhost.toml:4", "stream"]);
}

#[test]
fn a_missing_handler_file_is_refused() {
    let dir = Scratch::new("bad");
    let path = config_in(&dir, &good_config(Path::new("nowhere/ship.wasm")));
    assert_refused(&path, &["shardhost.toml:7", "handler", "nowhere/ship.wasm"]);
}

#[test]
fn a_file_that_is_not_wasm_is_refused() {
    let dir = Scratch::new("bad");
    let handler = dir.write("ship.wasm", "not wasm at all");
    let path = config_in(&dir, &good_config(&handler));
    assert_refused(
        &path,
        &["shardhost.toml:7", "ship.wasm", "not a WebAssembly file"],
    );
}

#[test]
fn a_core_module_is_refused_as_not_a_component() {
    let dir = Scratch::new("bad");
    // The smallest valid core module: magic + version 1.
    let handler = dir.write("core.wasm", b"\0asm\x01\0\0\0");
    let path = config_in(&dir, &good_config(&handler));
    assert_refused(
        &path,
        &["core.wasm", "core WebAssembly module, not a component"],
    );
}

#[test]
fn a_component_of_another_world_is_refused() {
    let dir = Scratch::new("bad");
    let path = config_in(&dir, &good_config(&guest("wrongworld")));
    assert_refused(
        &path,
        &[
            "wrongworld.wasm",
            "does not implement the world shardhost:handler/handler@0.1.2",
        ],
    );
}

#[test]
fn a_component_importing_wasi_http_is_refused_without_a_grant_naming_the_import_and_the_grant() {
    let dir = Scratch::new("bad");
    // A handler that sends HTTP requests, for a subscription without [subscription.http].
    let wat = r#"(component
        (import "wasi:http/outgoing-handler@0.2.3" (instance (export "handle" (func))))
        (import "wasi:cli/stdout@0.2.3" (instance))
    )"#;
    let handler = dir.write("js.wasm", wat::parse_str(wat).unwrap());
    let path = config_in(&dir, &good_config(&handler));
    assert_refused(
        &path,
        &[
            "js.wasm",
            "imports `wasi:http/outgoing-handler@0.2.3` (it sends HTTP requests), but the \
             subscription grants no HTTP",
            "[subscription.http]",
        ],
    );
    let out = check(&path);
    assert!(
        !text(&out.stderr).contains("wasi:cli/stdout"),
        "names only what is missing: {}",
        text(&out.stderr)
    );
}

#[test]
fn a_component_serving_http_is_refused_naming_the_import_and_how_to_build_without_it() {
    let dir = Scratch::new("bad");
    // What componentize-js builds with its fetch event: a handler that also serves HTTP.
    let wat = r#"(component
        (import "wasi:http/incoming-handler@0.2.3" (instance (export "handle" (func))))
    )"#;
    let handler = dir.write("js.wasm", wat::parse_str(wat).unwrap());
    let body = good_config(&handler) + "[subscription.http]\nallow = [\"http://127.0.0.1:9\"]\n";
    let path = config_in(&dir, &body);
    assert_refused(
        &path,
        &[
            "js.wasm",
            "imports `wasi:http/incoming-handler@0.2.3`, which the host does not provide",
            "--disable fetch-event",
        ],
    );
}

#[test]
fn limits_that_do_not_parse_are_refused() {
    let dir = Scratch::new("bad");
    let body = good_config(&guest("ship"))
        + "[subscription.limits]\nmemory = \"lots\"\ntimeout = \"soon\"\n";
    let path = config_in(&dir, &body);
    assert_refused(
        &path,
        &["shardhost.toml:9", "memory", "shardhost.toml:10", "timeout"],
    );
}

#[test]
fn durations_past_their_bounds_are_refused_before_anything_starts() {
    let dir = Scratch::new("huge");
    let body = "[leases]\nttl = \"1000000000h\"\n\n".to_owned()
        + &good_config(&guest("ship"))
        + "[subscription.limits]\ntimeout = \"100000h\"\n";
    let path = config_in(&dir, &body);
    assert_refused(
        &path,
        &[
            "shardhost.toml:2",
            "leases.ttl",
            "at most 1h",
            "shardhost.toml:12",
            "limits.timeout",
            "at most 15m",
        ],
    );
}

#[test]
fn run_shows_outcomes_and_checkpoints_then_stops_cleanly_on_sigint() {
    let dir = Scratch::new("run");
    std::fs::copy(shipments(), dir.0.join("shipments.ndjson")).unwrap();
    let body = good_config(&guest("ship"))
        + "feed = \"shipments.ndjson\"\npoll_interval = \"50ms\"\n"
        + &format!("[subscription.http]\nallow = [\"{NO_CARRIER}\"]\n[subscription.state]\n");
    let path = config_in(&dir, &body);
    let mut child = shardhost()
        .arg("-v")
        .arg("run")
        .arg(&path)
        .env_remove("SHARDHOST_LOG")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let mut lines = BufReader::new(stderr).lines();
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !seen.iter().any(|l: &String| l.contains("checkpoint"))
        || !seen.iter().any(|l| l.contains("record held"))
    {
        assert!(
            Instant::now() < deadline,
            "no outcomes seen:\n{}",
            seen.join("\n")
        );
        match lines.next() {
            Some(Ok(l)) => seen.push(l),
            _ => panic!("shardhost exited early:\n{}", seen.join("\n")),
        }
    }
    assert!(
        seen.iter().any(|l| l.contains("ack")),
        "{}",
        seen.join("\n")
    );
    assert!(
        seen.iter().any(|l| l.contains("drop")),
        "{}",
        seen.join("\n")
    );
    Command::new("kill")
        .arg("-INT")
        .arg(child.id().to_string())
        .status()
        .unwrap();
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{}", rest.join("\n"));
    assert!(
        rest.iter().any(|l| l.contains("lease released")),
        "{}",
        rest.join("\n")
    );
}

/// Starts `shardhost run` with the admin API on a free port; answers the child and the API's
/// URL (read from its log), with the rest of its log drained in the background.
fn run_with_admin(dir: &Scratch, token: &str) -> (Killed, String) {
    std::fs::copy(guest("always_ack"), dir.0.join("handler.wasm")).unwrap();
    let config = HostToml::memory()
        .admin_with_token(token)
        .subscription(Subscription::new("tagged", "s", "handler.wasm"));
    let path = config_in(dir, &config.render());
    let mut child = shardhost()
        .arg("run")
        .arg(&path)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut seen = Vec::new();
    let url = loop {
        match lines.next() {
            Some(Ok(l)) => {
                if l.contains("admin API listening") {
                    let addr = l.split("addr=").nth(1).unwrap().split_whitespace().next();
                    break format!("http://{}", addr.unwrap());
                }
                seen.push(l);
            }
            _ => panic!("shardhost exited early:\n{}", seen.join("\n")),
        }
    };
    std::thread::spawn(move || lines.map_while(Result::ok).for_each(drop));
    (Killed(child), url)
}

/// A child process killed when the test ends, pass or fail.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn admin_cmd(url: &str, token: Option<&str>, args: &[&str]) -> Output {
    let mut c = shardhost();
    c.arg(args[0]).arg("--admin").arg(url).args(&args[1..]);
    match token {
        Some(t) => c.env("SHARDHOST_ADMIN_TOKEN", t),
        None => c.env_remove("SHARDHOST_ADMIN_TOKEN"),
    };
    c.output().unwrap()
}

#[test]
fn deploy_rollback_and_status_drive_a_running_host() {
    let dir = Scratch::new("cli-deploy");
    let (mut child, url) = run_with_admin(&dir, "t0ken");
    let version = |name: &str| shardhost::testing::version_of(&std::fs::read(guest(name)).unwrap());
    let (ack, drop) = (version("always_ack"), version("always_drop"));
    let drop_file = guest("always_drop");
    let drop_file = drop_file.to_str().unwrap();

    let status = admin_cmd(&url, Some("t0ken"), &["status", "--json"]);
    assert_eq!(status.status.code(), Some(0), "{}", text(&status.stderr));
    let report: shardhost::status::Report = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(report.subscriptions[0].handler_version, ack);

    let no_token = admin_cmd(&url, None, &["deploy", "tagged", drop_file]);
    assert_eq!(no_token.status.code(), Some(1));
    assert!(text(&no_token.stderr).contains("SHARDHOST_ADMIN_TOKEN"));

    let deployed = admin_cmd(&url, Some("t0ken"), &["deploy", "tagged", drop_file]);
    assert_eq!(
        deployed.status.code(),
        Some(0),
        "{}",
        text(&deployed.stderr)
    );
    let out = text(&deployed.stdout);
    assert!(
        out.contains(&format!("old {ack}")) && out.contains(&format!("new {drop}")),
        "{out}"
    );

    let wrong = guest("wrongworld");
    let refused = admin_cmd(
        &url,
        Some("t0ken"),
        &["deploy", "tagged", wrong.to_str().unwrap()],
    );
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        text(&refused.stderr).contains("does not implement the world"),
        "{}",
        text(&refused.stderr)
    );

    let table = admin_cmd(&url, Some("t0ken"), &["status"]);
    let table = text(&table.stdout);
    assert!(
        table.contains("last deploy refused") && table.contains("does not implement the world"),
        "the refused deploy shows: {table}"
    );

    let back = admin_cmd(&url, Some("t0ken"), &["deploy", "tagged", "--rollback"]);
    assert_eq!(back.status.code(), Some(0), "{}", text(&back.stderr));
    assert!(text(&back.stdout).contains(&format!("new {ack}")));

    let table = admin_cmd(&url, Some("t0ken"), &["status"]);
    let table = text(&table.stdout);
    assert!(
        table.contains("subscription `tagged` (stream s)"),
        "{table}"
    );
    assert!(table.contains(&format!("handler {ack}")), "{table}");
    assert!(table.contains(&format!("previous {drop}")), "{table}");

    let missing = admin_cmd(&url, Some("t0ken"), &["deploy", "tagged", "/no/such.wasm"]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(text(&missing.stderr).contains("/no/such.wasm"));

    Command::new("kill")
        .arg("-INT")
        .arg(child.0.id().to_string())
        .status()
        .unwrap();
    assert_eq!(child.0.wait().unwrap().code(), Some(0));
}

mod grants;
mod invoke_as_run;
mod invoke_totals;
mod records_files;
mod retry_keys;
mod summary;
mod trap_reports;
