//! A newcomer's first hour beyond the five commands: `scripts/install` puts the binary the first
//! command built on PATH in seconds; a copy of it outside the checkout still finds the checkout's
//! SDKs and names them; a JavaScript build says what it compiles from its first minute, and
//! `build --no-aot` skips the ahead-of-time step.

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::support::{Scratch, root};

fn text(out: &[u8]) -> String {
    String::from_utf8_lossy(out).into_owned()
}

fn said(out: &Output) -> String {
    format!("{}\n{}", text(&out.stdout), text(&out.stderr))
}

/// `scripts/install --prefix PREFIX` of this test's own binary, with PATH as given.
fn install(prefix: &Path, path: &str) -> Output {
    Command::new(root().join("scripts/install"))
        .args(["--prefix".as_ref(), prefix.as_os_str()])
        .env("SHARDHOST_INSTALL_BIN", env!("CARGO_BIN_EXE_shardhost"))
        .env("PATH", path)
        .output()
        .unwrap()
}

/// The checkout's SDK directory, as `new` names it.
fn sdk() -> PathBuf {
    root().join("guest-sdk").canonicalize().unwrap()
}

#[test]
fn install_puts_a_working_shardhost_in_a_prefix_in_seconds_and_says_how_to_reach_it() {
    let scratch = Scratch::new("install");
    let prefix = scratch.0.join("prefix");
    let bin = prefix.join("bin");
    let system = std::env::var("PATH").unwrap_or_default();
    let started = Instant::now();
    let out = install(&prefix, &system);
    let took = started.elapsed();
    assert!(out.status.success(), "{}", said(&out));
    assert!(took < Duration::from_secs(20), "install took {took:?}");
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(&format!("export PATH=\"{}:$PATH\"", bin.display())),
        "the line to add, when PREFIX/bin is not on PATH:\n{stderr}"
    );
    let version = Command::new(bin.join("shardhost"))
        .arg("--version")
        .output()
        .unwrap();
    assert!(version.status.success(), "{}", said(&version));
    assert!(
        text(&version.stdout).starts_with("shardhost "),
        "{}",
        said(&version)
    );

    // Again, with PREFIX/bin on PATH: it says so, and `shardhost` is the installed one.
    let on_path = format!("{}:{system}", bin.display());
    let again = install(&prefix, &on_path);
    assert!(again.status.success(), "{}", said(&again));
    assert!(
        text(&again.stderr).contains(&format!("{} is on PATH", bin.display())),
        "{}",
        said(&again)
    );
    let help = Command::new("shardhost")
        .arg("--help")
        .env("PATH", &on_path)
        .output()
        .unwrap();
    assert!(text(&help.stdout).contains("new"), "{}", said(&help));
}

#[test]
fn new_from_a_copy_outside_the_checkout_finds_the_sdks_and_names_them() {
    let scratch = Scratch::new("new-elsewhere");
    let copy = scratch.0.join("bin/shardhost");
    std::fs::create_dir_all(copy.parent().unwrap()).unwrap();
    std::fs::copy(env!("CARGO_BIN_EXE_shardhost"), &copy).unwrap();
    let new = |lang: &str| {
        let out = Command::new(&copy)
            .args(["new", lang, "--lang", lang])
            .current_dir(&scratch.0)
            .env_remove("SHARDHOST_SDK")
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", said(&out));
        text(&out.stdout)
    };
    let python = new("python");
    let pip = format!("pip install {}", sdk().join("python").display());
    assert!(python.contains(&pip), "`{pip}` in:\n{python}");
    assert!(!python.contains("~/src/shardhost"), "{python}");
    new("js");
    let package = std::fs::read_to_string(scratch.0.join("js/package.json")).unwrap();
    let dependency = format!("\"shardhost\": \"file:{}\"", sdk().join("js").display());
    assert!(package.contains(&dependency), "{dependency} in:\n{package}");
}

/// `shardhost build ARGS` in `dir` (its own process group): its stderr lines as they come,
/// each with when it came.
fn build_streaming(
    dir: &Path,
    args: &[&str],
) -> (std::process::Child, mpsc::Receiver<(Duration, String)>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_shardhost"))
        .arg("build")
        .args(args)
        .current_dir(dir)
        .env("SHARDHOST_SDK", root().join("guest-sdk"))
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let started = Instant::now();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send((started.elapsed(), line)).is_err() {
                break;
            }
        }
    });
    (child, rx)
}

/// A new JavaScript project in `scratch`, named `orders`.
fn new_js(scratch: &Scratch) -> PathBuf {
    let out = Command::new(env!("CARGO_BIN_EXE_shardhost"))
        .args(["new", "orders", "--lang", "js"])
        .current_dir(&scratch.0)
        .env("SHARDHOST_SDK", root().join("guest-sdk"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", said(&out));
    scratch.0.join("orders")
}

#[test]
fn a_first_javascript_build_says_what_it_compiles_within_its_first_minute() {
    let scratch = Scratch::new("js-progress");
    let dir = new_js(&scratch);
    let (mut child, lines) = build_streaming(&dir, &[]);
    // Installing the tools, getting weval or compiling: whichever the machine needs first.
    let (when, line) = lines
        .recv_timeout(Duration::from_secs(60))
        .expect("a line within the first minute");
    // The build goes on for a while (weval, maybe compiled): what it says first is the point.
    // SAFETY: kill(2) on the process group of a child this test started and has not reaped.
    unsafe { libc::kill(-(child.id() as i32), libc::SIGTERM) };
    let _ = child.wait();
    assert!(when < Duration::from_secs(60), "{when:?}: {line}");
    let stages = [
        "componentize: installing the pinned build tools",
        "componentize: getting weval",
        "componentize: compiling orders.js into a component ahead of time with weval (",
    ];
    assert!(
        stages.iter().any(|s| line.starts_with(s)),
        "a stage line, not: {line}"
    );
    assert!(line.contains("about "), "how long it takes: {line}");
}

#[test]
fn build_no_aot_builds_a_javascript_handler_without_the_ahead_of_time_step() {
    let scratch = Scratch::new("js-no-aot");
    let dir = new_js(&scratch);
    let (mut child, lines) = build_streaming(&dir, &["--no-aot"]);
    let status = child.wait().unwrap();
    let said: Vec<String> = lines.iter().map(|(_, l)| l).collect();
    assert!(status.success(), "{}", said.join("\n"));
    assert!(
        said.iter().any(|l| l.starts_with(
            "componentize: compiling orders.js into a component (without ahead-of-time \
             compilation"
        )),
        "{}",
        said.join("\n")
    );
    assert!(
        said.last()
            .is_some_and(|l| l.starts_with("built orders.wasm (")),
        "{}",
        said.join("\n")
    );
    assert!(
        !said.iter().any(|l| l.contains("weval")),
        "{}",
        said.join("\n")
    );
}
