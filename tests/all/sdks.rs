//! The Python and JavaScript SDKs' own unit tests (their pure-language cores, outside wasm, and
//! their build tools), and the shipping examples' tests in those languages, run as part of the
//! one test command. The Python example's tests import the SDK as a handler's tests do: installed
//! into a venv (target/py-sdk-venv, made when missing), not through a path of their own.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::root;

/// Runs `program args` in `dir` (relative to the repository root); fails with its output.
fn passes(dir: &str, program: impl AsRef<Path>, args: &[&str]) {
    let program = program.as_ref();
    let out = Command::new(program)
        .args(args)
        .current_dir(root().join(dir))
        .output()
        .unwrap_or_else(|e| panic!("{} does not run: {e}", program.display()));
    assert!(
        out.status.success(),
        "`{} {}` in {dir} failed:\n{}\n{}",
        program.display(),
        args.join(" "),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs `program args`; the panic names `what` and shows the output.
fn run(what: &str, program: &Path, args: &[&str]) {
    let out = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{what}: {} does not run: {e}", program.display()));
    assert!(
        out.status.success(),
        "{what} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The python of a venv (target/py-sdk-venv) with the Python SDK installed from guest-sdk/python
/// (editable: the venv sees the SDK as it is now). Made when missing, in a directory of its own
/// renamed into place, so that test runs side by side make one each and keep one.
pub(crate) fn python_with_the_sdk() -> PathBuf {
    let venv = root().join("target/py-sdk-venv");
    let python = venv.join("bin/python");
    let sdk = root().join("guest-sdk/python");
    let installed = |python: &Path| {
        Command::new(python)
            .args([
                "-c",
                "import shardhost, os; print(os.path.dirname(shardhost.__file__))",
            ])
            .current_dir(std::env::temp_dir())
            .output()
            .is_ok_and(|out| {
                out.status.success()
                    && Path::new(String::from_utf8_lossy(&out.stdout).trim())
                        == sdk.join("shardhost")
            })
    };
    if installed(&python) {
        return python;
    }
    let making = root().join(format!("target/py-sdk-venv.{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&making);
    std::fs::create_dir_all(root().join("target")).expect("target/");
    let making_str = making.to_str().expect("a UTF-8 path");
    run(
        "python3 -m venv target/py-sdk-venv",
        Path::new("python3"),
        &["-m", "venv", making_str],
    );
    run(
        "pip install -e guest-sdk/python (into target/py-sdk-venv)",
        &making.join("bin/python"),
        &[
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "-e",
            sdk.to_str().expect("a UTF-8 path"),
        ],
    );
    // Into place (only its python is used, which finds its venv wherever it is): the one that
    // was there, an outdated one, is replaced; another run's, made meanwhile, is kept.
    if !installed(&python) {
        let _ = std::fs::remove_dir_all(&venv);
        if std::fs::rename(&making, &venv).is_ok() && installed(&python) {
            return python;
        }
    }
    let _ = std::fs::remove_dir_all(&making);
    assert!(
        installed(&python),
        "target/py-sdk-venv has no shardhost from {}",
        sdk.display()
    );
    python
}

#[test]
fn the_python_sdk_and_example_pass_their_unit_tests() {
    passes("guest-sdk/python", "python3", &["-m", "unittest", "-q"]);
    passes(
        "examples/shipping/python",
        python_with_the_sdk(),
        &["-m", "unittest", "-q"],
    );
}

#[test]
fn the_javascript_sdk_and_example_pass_their_unit_tests() {
    passes("guest-sdk/js", "node", &["--test"]);
    passes("examples/shipping/js", "node", &["--test"]);
}
