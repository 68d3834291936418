//! The Python and JavaScript SDKs' own unit tests (their pure-language cores, outside wasm), and
//! the shipping examples' tests in those languages, run as part of the one test command.

use std::process::Command;

use crate::support::root;

/// Runs `program args` in `dir` (relative to the repository root); fails with its output.
fn passes(dir: &str, program: &str, args: &[&str]) {
    let out = Command::new(program)
        .args(args)
        .current_dir(root().join(dir))
        .output()
        .unwrap_or_else(|e| panic!("{program} does not run: {e}"));
    assert!(
        out.status.success(),
        "`{program} {}` in {dir} failed:\n{}\n{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_python_sdk_and_example_pass_their_unit_tests() {
    passes("guest-sdk/python", "python3", &["-m", "unittest", "-q"]);
    passes(
        "examples/shipping/python",
        "python3",
        &["-m", "unittest", "-q"],
    );
}

#[test]
fn the_javascript_sdk_and_example_pass_their_unit_tests() {
    passes("guest-sdk/js", "node", &["--test"]);
    passes("examples/shipping/js", "node", &["--test"]);
}
