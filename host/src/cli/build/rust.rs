//! `build` of a Rust handler: `cargo build --release --target wasm32-wasip2` (the target added
//! when rustup lacks it), the crate's cdylib copied next to its Cargo.toml as NAME.wasm, and
//! nothing written when the bytes are the same (a Rust build is reproducible: same sources,
//! same version).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use super::BuildError;

const TARGET: &str = "wasm32-wasip2";

pub fn build(manifest: &Path, out: Option<&Path>, verbose: bool) -> Result<(), BuildError> {
    add_target(verbose)?;
    let started = Instant::now();
    let mut command = Command::new(cargo());
    command
        .args(["build", "--release", "--target", TARGET])
        .arg("--manifest-path")
        .arg(manifest)
        .arg("--message-format=json-render-diagnostics")
        .stdout(Stdio::piped());
    if !verbose {
        command.arg("--quiet");
    }
    let mut child = command.spawn().map_err(|source| BuildError::Spawn {
        tool: "cargo".into(),
        source,
    })?;
    let wanted = manifest
        .canonicalize()
        .unwrap_or_else(|_| manifest.to_owned());
    let mut artifact = None;
    let stdout = child.stdout.take().expect("stdout is piped");
    let progress = Progress::start(manifest);
    for line in BufReader::new(stdout).lines().map_while(Result::ok) {
        progress.saw(&line);
        if let Some((path, from)) = wasm_artifact(&line)
            && (artifact.is_none() || from == wanted)
        {
            artifact = Some(path);
        }
    }
    let status = child.wait().map_err(|source| BuildError::Spawn {
        tool: "cargo".into(),
        source,
    })?;
    drop(progress);
    if !status.success() {
        return Err(BuildError::Failed { usage: false });
    }
    let artifact = artifact.ok_or_else(|| {
        BuildError::Rust(format!(
            "{}: the crate builds no component: give it [lib] crate-type = [\"cdylib\"]",
            manifest.display()
        ))
    })?;
    let out = match out {
        Some(out) => out.to_owned(),
        None => super::tidy(
            &manifest
                .parent()
                .unwrap_or(Path::new("."))
                .join(artifact.file_name().unwrap_or_default()),
        ),
    };
    place(&artifact, &out, started)
}

/// What a cargo build that takes more than a few seconds says while it runs: what it compiles
/// after [`Progress::FIRST`], then every [`Progress::EVERY`] how many crates are done. Dropped,
/// it stops.
struct Progress {
    compiled: Arc<AtomicUsize>,
    _done: mpsc::Sender<()>,
}

impl Progress {
    const FIRST: Duration = Duration::from_secs(5);
    const EVERY: Duration = Duration::from_secs(30);

    fn start(manifest: &Path) -> Progress {
        let compiled = Arc::new(AtomicUsize::new(0));
        let (done, finished) = mpsc::channel::<()>();
        let count = Arc::clone(&compiled);
        let shown = manifest
            .canonicalize()
            .ok()
            .and_then(|m| Some(m.parent()?.file_name()?.to_string_lossy().into_owned()))
            .unwrap_or_else(|| "the crate".into());
        std::thread::spawn(move || {
            let started = Instant::now();
            // Dropped (the build ended) before: nothing to say.
            if finished.recv_timeout(Progress::FIRST) != Err(mpsc::RecvTimeoutError::Timeout) {
                return;
            }
            eprintln!(
                "compiling {shown} and its dependencies (cargo build --release --target {TARGET}: \
                 about 1 min 30 s the first time, seconds after)"
            );
            while let Err(mpsc::RecvTimeoutError::Timeout) = finished.recv_timeout(Progress::EVERY)
            {
                eprintln!(
                    "still compiling ({} crates so far, {} s)",
                    count.load(Ordering::Relaxed),
                    started.elapsed().as_secs()
                );
            }
        });
        Progress {
            compiled,
            _done: done,
        }
    }

    /// One line of cargo's JSON messages: a crate compiled counts.
    fn saw(&self, line: &str) {
        if line.contains(r#""reason":"compiler-artifact""#) && line.contains(r#""fresh":false"#) {
            self.compiled.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Copies the component to `out` unless it holds those bytes already; says which.
fn place(artifact: &Path, out: &Path, started: Instant) -> Result<(), BuildError> {
    let io = |why: std::io::Error, file: &Path| BuildError::Unreadable {
        file: file.to_owned(),
        why: why.to_string(),
    };
    let bytes = std::fs::read(artifact).map_err(|e| io(e, artifact))?;
    let version = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&bytes));
    let version = &version[..12];
    if std::fs::read(out).is_ok_and(|old| old == bytes) {
        eprintln!("{} is up to date (version {version})", out.display());
        return Ok(());
    }
    let partial = out.with_extension("wasm.partial");
    std::fs::write(&partial, &bytes).map_err(|e| io(e, &partial))?;
    std::fs::rename(&partial, out).map_err(|e| io(e, out))?;
    eprintln!(
        "built {} ({}, version {version}) in {:.1} s",
        out.display(),
        size(bytes.len()),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// `17.9 MB`, `171 KB` (decimal units, as the Python and JavaScript tools say).
pub fn size(bytes: usize) -> String {
    if bytes >= 1_000_000 {
        format!("{:.1} MB", bytes as f64 / 1e6)
    } else {
        format!("{} KB", (bytes as f64 / 1e3).round() as u64)
    }
}

/// A cdylib's `.wasm` in one line of cargo's JSON messages, and its crate's manifest.
fn wasm_artifact(line: &str) -> Option<(PathBuf, PathBuf)> {
    let v: serde_json::Value = serde_json::from_str(line).ok()?;
    if v["reason"] != "compiler-artifact" {
        return None;
    }
    let cdylib = v["target"]["crate_types"]
        .as_array()?
        .iter()
        .any(|k| k == "cdylib");
    if !cdylib {
        return None;
    }
    let wasm = v["filenames"]
        .as_array()?
        .iter()
        .filter_map(|f| f.as_str())
        .find(|f| f.ends_with(".wasm"))?;
    let manifest = PathBuf::from(v["manifest_path"].as_str()?);
    Some((PathBuf::from(wasm), manifest))
}

fn cargo() -> std::ffi::OsString {
    std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into())
}

/// Adds the wasm32-wasip2 target when rustup is there and lacks it.
fn add_target(verbose: bool) -> Result<(), BuildError> {
    let Ok(listed) = Command::new("rustup")
        .args(["target", "list", "--installed"])
        .output()
    else {
        return Ok(()); // no rustup: cargo says what is missing
    };
    if String::from_utf8_lossy(&listed.stdout)
        .lines()
        .any(|l| l.trim() == TARGET)
    {
        return Ok(());
    }
    eprintln!("adding the {TARGET} target (rustup target add {TARGET})");
    let mut add = Command::new("rustup");
    add.args(["target", "add", TARGET]);
    if !verbose {
        add.stdout(Stdio::null());
    }
    match add.status() {
        Ok(s) if s.success() => Ok(()),
        _ => Err(BuildError::Rust(format!(
            "could not add the {TARGET} target: run `rustup target add {TARGET}`"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_the_other_build_tools_say_them() {
        assert_eq!(size(17_930_000), "17.9 MB");
        assert_eq!(size(171_400), "171 KB");
    }

    #[test]
    fn the_cdylibs_wasm_is_found_in_cargos_messages() {
        let line = r#"{"reason":"compiler-artifact","manifest_path":"/p/Cargo.toml","target":{"crate_types":["cdylib"]},"filenames":["/t/wasm32-wasip2/release/orders.wasm"]}"#;
        assert_eq!(
            wasm_artifact(line),
            Some((
                PathBuf::from("/t/wasm32-wasip2/release/orders.wasm"),
                PathBuf::from("/p/Cargo.toml")
            ))
        );
        let lib = r#"{"reason":"compiler-artifact","manifest_path":"/p/Cargo.toml","target":{"crate_types":["lib"]},"filenames":["/t/libserde.rlib"]}"#;
        assert_eq!(wasm_artifact(lib), None);
    }
}
