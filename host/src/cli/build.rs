//! `shardhost build [PATH]`: one command for a handler in any language. It finds the project
//! (a `Cargo.toml`, a `package.json` or JavaScript entry, a Python module with a handler) and
//! builds its component with the language's tool: cargo for Rust (`build/rust.rs`), the SDKs'
//! `componentize` for Python and JavaScript. The same arguments and the same lines for all:
//! `built OUT (SIZE, version V) in S s`, or `OUT is up to date (version V)`; the toolchain's
//! own output only under `-v`.

mod rust;

use std::path::{Path, PathBuf};
use std::process::Command;

use clap::Args;

use super::CliError;
use super::sdk::{self, SdkError};

/// The arguments of `build`.
#[derive(Args, Debug)]
pub struct BuildArgs {
    /// The project's directory, or the handler's file (`orders.py`, `orders.js`, `Cargo.toml`).
    #[arg(default_value = ".")]
    path: PathBuf,

    /// The component to write (default: NAME.wasm in the project's directory).
    #[arg(short, long)]
    out: Option<PathBuf>,

    /// JavaScript: build without the ahead-of-time compilation (weval). The first build skips
    /// getting weval (a download, else compiling it: about 10 minutes on 2 cores, once); the
    /// handler runs 10-25 % slower (49 279 against 55 869 records/s for the shipping example,
    /// BENCHMARKS.md). Rust and Python handlers have no such step.
    #[arg(long)]
    no_aot: bool,
}

/// What kind of project, and its entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Project {
    Rust { manifest: PathBuf },
    Python { entry: PathBuf },
    Js { entry: PathBuf },
}

/// Why a build did not happen, or failed.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("{}: no such file or directory", .0.display())]
    Missing(PathBuf),
    #[error(
        "{}: no handler project here (no Cargo.toml, no package.json, no Python module with \
         @shardhost.handler, no JavaScript file that imports \"shardhost\"); make one with \
         `shardhost new DIR --lang rust|python|js`, or name the handler's file: `shardhost build \
         orders.py`",
        .0.display()
    )]
    NoProject(PathBuf),
    #[error(
        "{}: more than one handler here ({}): name the one to build, e.g. `shardhost build {}`",
        .dir.display(), .candidates.join(", "), .candidates[0]
    )]
    Ambiguous {
        dir: PathBuf,
        candidates: Vec<String>,
    },
    #[error(
        "{}: not a handler's file: pass a Python module (.py), a JavaScript entry (.js), a \
         Cargo.toml, or the project's directory",
        .0.display()
    )]
    UnknownFile(PathBuf),
    #[error("{}: {why}", .file.display())]
    Unreadable { file: PathBuf, why: String },
    #[error("{}: the output should end in .wasm", .0.display())]
    NotWasm(PathBuf),
    #[error(transparent)]
    Sdk(#[from] SdkError),
    #[error("cannot run {tool}: {source}")]
    Spawn {
        tool: String,
        #[source]
        source: std::io::Error,
    },
    /// The tool said why (its own lines on stderr): nothing more to print.
    #[error("")]
    Failed { usage: bool },
    #[error("{0}")]
    Rust(String),
}

impl BuildError {
    pub fn exit_code(&self) -> u8 {
        match self {
            BuildError::Failed { usage: false }
            | BuildError::Rust(_)
            | BuildError::Spawn { .. } => super::EXIT_RUNTIME,
            _ => super::EXIT_CONFIG,
        }
    }

    /// The tool already printed why.
    pub fn said(&self) -> bool {
        matches!(self, BuildError::Failed { .. })
    }
}

/// Builds the project at `args.path`.
pub fn build(args: &BuildArgs, verbose: bool) -> Result<(), CliError> {
    Ok(run(args, verbose)?)
}

fn run(args: &BuildArgs, verbose: bool) -> Result<(), BuildError> {
    if let Some(out) = &args.out
        && out.extension().is_none_or(|e| e != "wasm")
    {
        return Err(BuildError::NotWasm(out.clone()));
    }
    match detect(&args.path)? {
        Project::Rust { manifest } => rust::build(&manifest, args.out.as_deref(), verbose),
        Project::Python { entry } => {
            componentize("python", &entry, args.out.as_deref(), &[], verbose)
        }
        Project::Js { entry } => {
            let options: &[&str] = if args.no_aot { &["--no-aot"] } else { &[] };
            componentize("js", &entry, args.out.as_deref(), options, verbose)
        }
    }
}

/// Runs an SDK's `componentize [-v] [OPTIONS] ENTRY OUT.wasm`; its stderr is the build's, as
/// it comes (the stage lines of a long first build, then `built …`).
fn componentize(
    language: &str,
    entry: &Path,
    out: Option<&Path>,
    options: &[&str],
    verbose: bool,
) -> Result<(), BuildError> {
    let tool = sdk::locate()?.join(language).join("componentize");
    let out = out
        .map(Path::to_owned)
        .unwrap_or_else(|| beside(entry, "wasm"));
    let mut command = Command::new(&tool);
    if verbose {
        command.arg("-v");
    }
    let status = command
        .args(options)
        .arg(entry)
        .arg(&out)
        .status()
        .map_err(|source| BuildError::Spawn {
            tool: tool.display().to_string(),
            source,
        })?;
    match status.code() {
        Some(0) => Ok(()),
        code => Err(BuildError::Failed {
            usage: code == Some(2),
        }),
    }
}

/// `dir/orders.py` → `dir/orders.wasm`.
fn beside(entry: &Path, extension: &str) -> PathBuf {
    tidy(&entry.with_extension(extension))
}

/// A path as a user would type it: `./orders.wasm` → `orders.wasm`.
fn tidy(path: &Path) -> PathBuf {
    path.strip_prefix(".").unwrap_or(path).to_owned()
}

/// The project at `path`: a handler's file names it; a directory holds a Cargo.toml, a
/// package.json (its `main`), one Python module with a handler, or one JavaScript file that
/// imports "shardhost".
pub fn detect(path: &Path) -> Result<Project, BuildError> {
    if path.is_file() {
        let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
        return match (path.file_name().and_then(|n| n.to_str()), ext) {
            (Some("Cargo.toml"), _) => Ok(Project::Rust {
                manifest: path.to_owned(),
            }),
            (_, "py") => Ok(Project::Python {
                entry: path.to_owned(),
            }),
            (_, "js" | "mjs") => Ok(Project::Js {
                entry: path.to_owned(),
            }),
            _ => Err(BuildError::UnknownFile(path.to_owned())),
        };
    }
    if !path.is_dir() {
        return Err(BuildError::Missing(path.to_owned()));
    }
    let manifest = tidy(&path.join("Cargo.toml"));
    if manifest.is_file() {
        return Ok(Project::Rust { manifest });
    }
    let package = path.join("package.json");
    if package.is_file() {
        return js_main(path, &package);
    }
    for (ext, is_handler, make) in [
        (
            "py",
            python_handler as fn(&str) -> bool,
            python as fn(PathBuf) -> Project,
        ),
        ("js", js_handler, js),
    ] {
        let found = handlers_in(path, ext, is_handler)?;
        match found.as_slice() {
            [] => continue,
            [one] => return Ok(make(tidy(&path.join(one)))),
            many => {
                return Err(BuildError::Ambiguous {
                    dir: path.to_owned(),
                    candidates: many.iter().map(|n| shown(path, n)).collect(),
                });
            }
        }
    }
    Err(BuildError::NoProject(path.to_owned()))
}

fn python(entry: PathBuf) -> Project {
    Project::Python { entry }
}

fn js(entry: PathBuf) -> Project {
    Project::Js { entry }
}

/// `dir/name` as a user would type it.
fn shown(dir: &Path, name: &str) -> String {
    if dir == Path::new(".") {
        name.to_owned()
    } else {
        dir.join(name).display().to_string()
    }
}

/// The handler a package.json names as its `main`.
fn js_main(dir: &Path, package: &Path) -> Result<Project, BuildError> {
    let unreadable = |why: String| BuildError::Unreadable {
        file: package.to_owned(),
        why,
    };
    let text = std::fs::read_to_string(package).map_err(|e| unreadable(e.to_string()))?;
    let json: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| unreadable(format!("not JSON: {e}")))?;
    let main = json["main"].as_str().ok_or_else(|| {
        unreadable(r#"no "main": set it to the handler's file, e.g. "main": "orders.js""#.into())
    })?;
    let entry = tidy(&dir.join(main));
    if !entry.is_file() {
        return Err(unreadable(format!(
            r#""main": "{main}": no such file in {}"#,
            dir.display()
        )));
    }
    Ok(Project::Js { entry })
}

/// The files of `dir` (not below) with extension `ext` whose text declares a handler, sorted;
/// test files left out.
fn handlers_in(
    dir: &Path,
    ext: &str,
    is_handler: fn(&str) -> bool,
) -> Result<Vec<String>, BuildError> {
    let entries = std::fs::read_dir(dir).map_err(|e| BuildError::Unreadable {
        file: dir.to_owned(),
        why: e.to_string(),
    })?;
    let mut found: Vec<String> = entries
        .flatten()
        .filter_map(|e| e.file_name().to_str().map(str::to_owned))
        .filter(|n| n.ends_with(&format!(".{ext}")) && !is_test_file(n))
        .filter(|n| std::fs::read_to_string(dir.join(n)).is_ok_and(|text| is_handler(&text)))
        .collect();
    found.sort();
    Ok(found)
}

fn is_test_file(name: &str) -> bool {
    name.starts_with("test_") || name.contains("_test.") || name.contains(".test.")
}

fn python_handler(text: &str) -> bool {
    text.contains("@shardhost.handler")
        || text.contains("@shardhost.batch_handler")
        || text.contains("@handler")
        || text.contains("@batch_handler")
}

fn js_handler(text: &str) -> bool {
    (text.contains("from \"shardhost\"") || text.contains("from 'shardhost'"))
        && (text.contains("handler(") || text.contains("batchHandler("))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scratch directory, removed when dropped.
    struct Dir(PathBuf);

    impl Dir {
        fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn dir_with(files: &[(&str, &str)]) -> Dir {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("shardhost-build-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for (name, text) in files {
            std::fs::write(dir.join(name), text).unwrap();
        }
        Dir(dir)
    }

    #[test]
    fn a_directory_is_built_by_what_it_holds() {
        let py = dir_with(&[
            (
                "orders.py",
                "import shardhost\n@shardhost.handler\ndef f(r): ...",
            ),
            ("test_orders.py", "@shardhost.handler\n"),
            ("util.py", "X = 1"),
        ]);
        assert_eq!(
            detect(py.path()).unwrap(),
            Project::Python {
                entry: py.path().join("orders.py")
            }
        );
        let js = dir_with(&[(
            "orders.js",
            "import { handler } from \"shardhost\";\nexport const handle = handler(f);",
        )]);
        assert!(matches!(detect(js.path()).unwrap(), Project::Js { .. }));
        let rust = dir_with(&[("Cargo.toml", "[package]"), ("x.py", "@shardhost.handler")]);
        assert!(matches!(detect(rust.path()).unwrap(), Project::Rust { .. }));
    }

    #[test]
    fn an_empty_or_ambiguous_directory_says_what_to_type() {
        let empty = dir_with(&[("notes.txt", "")]);
        let e = detect(empty.path()).unwrap_err().to_string();
        assert!(e.contains("shardhost new DIR --lang"), "{e}");
        let two = dir_with(&[
            ("a.py", "@shardhost.handler"),
            ("b.py", "@shardhost.handler"),
        ]);
        let e = detect(two.path()).unwrap_err().to_string();
        assert!(
            e.contains("a.py, ") && e.contains("shardhost build "),
            "{e}"
        );
        let package = dir_with(&[("package.json", "{}")]);
        let e = detect(package.path()).unwrap_err().to_string();
        assert!(e.contains(r#"no "main""#), "{e}");
    }
}
