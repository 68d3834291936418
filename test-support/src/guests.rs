//! Builds the guest components (the examples and the test fixtures) once per process.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The repository root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the crate sits in the repository root")
        .to_owned()
}

/// Where guest components are built: their own target dir, never the host's (a nested cargo on
/// the host's target dir would wait forever on its lock).
pub fn guest_target() -> PathBuf {
    root().join("target").join("guest")
}

/// The path of a built guest component: an example (`ship`, `pick`) or a test fixture
/// (`scripted`, `batchall`, `wrongworld`, `always_ack`, `always_drop`, `miscount`,
/// `big_memory`). The first
/// call builds both guest workspaces.
pub fn guest(name: &str) -> PathBuf {
    static BUILT: OnceLock<()> = OnceLock::new();
    BUILT.get_or_init(|| {
        ensure_wasm_target();
        build_workspace(&root().join("examples/Cargo.toml"));
        build_workspace(&root().join("tests/guests/Cargo.toml"));
    });
    let path = guest_target()
        .join("wasm32-wasip2/release")
        .join(format!("{name}.wasm"));
    assert!(path.exists(), "{} was not built", path.display());
    path
}

fn build_workspace(manifest: &Path) {
    let status = Command::new(env!("CARGO"))
        .args([
            "build",
            "--release",
            "--target",
            "wasm32-wasip2",
            "--target-dir",
        ])
        .arg(guest_target())
        .arg("--manifest-path")
        .arg(manifest)
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .status()
        .expect("cargo runs");
    assert!(
        status.success(),
        "building the guests in {} failed (is the wasm32-wasip2 target installed? \
         `rustup target add wasm32-wasip2`)",
        manifest.display()
    );
}

/// Adds the guest target when it is missing (as `scripts/demo` does).
fn ensure_wasm_target() {
    let installed = Command::new("rustup")
        .args(["target", "list", "--installed"])
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .any(|l| l == "wasm32-wasip2")
        })
        .unwrap_or(true);
    if !installed {
        let _ = Command::new("rustup")
            .args(["target", "add", "wasm32-wasip2"])
            .status();
    }
}
