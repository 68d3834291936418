//! `shardhost new DIR --lang rust|python|js`: a handler project that builds, passes its test
//! and runs: the handler, a unit test in the language's own runner, a sample records file, a
//! `shardhost.toml` on the embedded stream, a README and a `.gitignore`.

use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};

use super::CliError;
use super::sdk::{self, SdkError};

/// The arguments of `new`.
#[derive(Args, Debug)]
pub struct NewArgs {
    /// The directory to make (it must not exist, or be empty); its name names the handler.
    dir: PathBuf,

    /// The handler's language.
    #[arg(long, value_enum)]
    lang: Lang,

    /// The handler's name (default: the directory's name, `-` as `_`): NAME.wasm, the
    /// subscription, and the module or crate.
    #[arg(long)]
    name: Option<String>,
}

/// A handler language.
#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum Lang {
    Rust,
    Python,
    Js,
}

impl Lang {
    fn title(self) -> &'static str {
        match self {
            Lang::Rust => "Rust",
            Lang::Python => "Python",
            Lang::Js => "JavaScript",
        }
    }
}

/// Why `new` made nothing.
#[derive(Debug, thiserror::Error)]
pub enum NewError {
    #[error("{}: already exists and is not empty: pick a new directory", .0.display())]
    NotEmpty(PathBuf),
    #[error(
        "`{0}` cannot name a handler: use letters, digits and `_` (not first a digit), e.g. \
         --name orders"
    )]
    BadName(String),
    #[error(transparent)]
    Sdk(#[from] SdkError),
    #[error("{}: {source}", .path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl NewError {
    pub fn exit_code(&self) -> u8 {
        match self {
            NewError::Write { .. } => super::EXIT_RUNTIME,
            _ => super::EXIT_CONFIG,
        }
    }
}

const RECORDS: &str = include_str!("new/records.ndjson");
const CONFIG: &str = include_str!("new/shardhost.toml");
const README: &str = include_str!("new/README.md.in");
const RUST_MANIFEST: &str = include_str!("new/Cargo.toml.in");
const RUST_LIB: &str = include_str!("new/lib.rs");
const PYTHON_HANDLER: &str = include_str!("new/handler.py");
const PYTHON_TEST: &str = include_str!("new/test_handler.py");
const JS_HANDLER: &str = include_str!("new/handler.js");
const JS_TEST: &str = include_str!("new/handler.test.js");
const JS_PACKAGE: &str = include_str!("new/package.json.in");

/// Makes the project and says what to type next.
pub fn new(args: &NewArgs) -> Result<(), CliError> {
    Ok(make(args)?)
}

fn make(args: &NewArgs) -> Result<(), NewError> {
    let name = match &args.name {
        Some(n) => n.clone(),
        None => default_name(&args.dir),
    };
    if !is_identifier(&name) {
        return Err(NewError::BadName(name));
    }
    if std::fs::read_dir(&args.dir).is_ok_and(|mut d| d.next().is_some()) {
        return Err(NewError::NotEmpty(args.dir.clone()));
    }
    let sdk = sdk::locate()?;
    let files = files(args.lang, &name, &sdk);
    for (path, text) in &files {
        let path = args.dir.join(path);
        let write = || -> std::io::Result<()> {
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::write(&path, text)
        };
        write().map_err(|source| NewError::Write {
            path: path.clone(),
            source,
        })?;
    }
    let listed: Vec<&str> = files.iter().map(|(p, _)| p.as_str()).collect();
    println!(
        "made {} ({}): {}",
        args.dir.display(),
        args.lang.title(),
        listed.join(", ")
    );
    println!("next:\n  cd {}", args.dir.display());
    println!("  shardhost build");
    println!("  shardhost invoke {name}.wasm --records records.ndjson");
    println!("  shardhost run");
    println!("tests:\n{}", indent(&test_commands(args.lang, &sdk)));
    Ok(())
}

/// The directory's name, `-` and `.` as `_`.
fn default_name(dir: &Path) -> String {
    let base = dir
        .canonicalize()
        .ok()
        .and_then(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()))
        .or_else(|| dir.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_default();
    base.replace(['-', '.', ' '], "_")
}

fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !matches!(name, "shardhost" | "test" | "self" | "crate" | "super")
}

fn indent(text: &str) -> String {
    text.lines()
        .map(|l| format!("  {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// How the project's tests run.
fn test_commands(lang: Lang, sdk: &Path) -> String {
    match lang {
        Lang::Rust => "cargo test".to_owned(),
        Lang::Python => format!(
            "python3 -m venv .venv && .venv/bin/pip install {}\n.venv/bin/python -m unittest",
            sdk.join("python").display()
        ),
        Lang::Js => "npm install && npm test".to_owned(),
    }
}

/// The project's files: path in the project, contents.
fn files(lang: Lang, name: &str, sdk: &Path) -> Vec<(String, String)> {
    let fill = |template: &str, sdk_path: &Path| {
        template
            .replace("{{name}}", name)
            .replace("{{sdk}}", &sdk_path.display().to_string())
    };
    let (runner, ignore, mut own): (&str, &str, Vec<(String, String)>) = match lang {
        Lang::Rust => (
            "the crate's own, natively",
            "/target/\n*.wasm\n",
            vec![
                ("Cargo.toml".into(), fill(RUST_MANIFEST, sdk)),
                ("src/lib.rs".into(), fill(RUST_LIB, sdk)),
            ],
        ),
        Lang::Python => (
            "unittest, with the SDK installed in a venv",
            "*.wasm\n/out/\n__pycache__/\n/.venv/\n",
            vec![
                (format!("{name}.py"), fill(PYTHON_HANDLER, sdk)),
                (format!("test_{name}.py"), fill(PYTHON_TEST, sdk)),
            ],
        ),
        Lang::Js => (
            "node --test, with the SDK's test host",
            "*.wasm\n/out/\nnode_modules/\n",
            vec![
                (format!("{name}.js"), fill(JS_HANDLER, sdk)),
                (format!("test/{name}.test.js"), fill(JS_TEST, sdk)),
                ("package.json".into(), fill(JS_PACKAGE, &sdk.join("js"))),
            ],
        ),
    };
    let readme = fill(README, sdk)
        .replace("{{language}}", lang.title())
        .replace("{{test_runner}}", runner)
        .replace("{{test_commands}}", &test_commands(lang, sdk));
    own.extend([
        ("records.ndjson".into(), RECORDS.to_owned()),
        ("shardhost.toml".into(), fill(CONFIG, sdk)),
        ("README.md".into(), readme),
        (".gitignore".into(), ignore.to_owned()),
    ]);
    own
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_handler_is_named_by_its_directory_unless_that_cannot_name_one() {
        assert_eq!(default_name(Path::new("/nowhere/my-orders")), "my_orders");
        assert!(is_identifier("my_orders"));
        assert!(!is_identifier("1orders"));
        assert!(!is_identifier("shardhost"), "it would shadow the SDK");
        assert!(!is_identifier(""));
    }

    #[test]
    fn every_template_is_filled_in() {
        for lang in [Lang::Rust, Lang::Python, Lang::Js] {
            for (path, text) in files(lang, "orders", Path::new("/sdk")) {
                assert!(!text.contains("{{"), "{path} of {lang:?}: {text}");
            }
        }
    }
}
