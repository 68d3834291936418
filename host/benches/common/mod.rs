//! Shared by the bench binaries.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// Builds the example guests into `target/guest`; answers the directory holding the `.wasm`s.
pub fn build_examples(root: &Path) -> PathBuf {
    build_guests(root, "examples/Cargo.toml")
}

/// Builds the guest workspace at `manifest` (relative to `root`) into `target/guest`; answers
/// the directory holding the `.wasm`s.
pub fn build_guests(root: &Path, manifest: &str) -> PathBuf {
    let target = root.join("target/guest");
    let ok = Command::new(env!("CARGO"))
        .args([
            "build",
            "--release",
            "--target",
            "wasm32-wasip2",
            "--target-dir",
        ])
        .arg(&target)
        .arg("--manifest-path")
        .arg(root.join(manifest))
        .status()
        .unwrap()
        .success();
    assert!(ok, "building the example guests failed");
    target.join("wasm32-wasip2/release")
}

pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}
