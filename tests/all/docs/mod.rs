//! The documents cannot drift from the binary: README.md and the book in `docs/` are read here,
//! and what they show is run.
//!
//! - `toml_blocks`: every ```toml block passes `shardhost check` (the rules of its info string below);
//! - `commands`: every command a ```console or ```sh block shows is run here, or named with the
//!   existing test that runs it;
//! - `paths`: every repository path README.md, ARCHITECTURE.md and the book name exists, and
//!   every relative link (SUMMARY.md's too) resolves;
//! - `coverage`: every `shardhost` verb and flag, and every key the config parser accepts, is
//!   documented in `docs/`.

mod commands;
mod coverage;
mod paths;
mod runs;
mod toml_blocks;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::support::{Scratch, guest, root};

/// One fenced block of a Markdown file.
#[derive(Debug, Clone)]
pub struct Block {
    /// The file, relative to the repository root.
    pub file: String,
    /// The line of its opening fence (1-based).
    pub line: usize,
    /// The info string: `toml`, `toml fragment`, `console`...
    pub info: String,
    pub body: String,
}

impl Block {
    pub fn at(&self) -> String {
        format!("{}:{}", self.file, self.line)
    }
}

/// README.md and every Markdown file under `docs/`, relative to the root, in a stable order.
pub fn documents() -> Vec<String> {
    let mut files = vec!["README.md".to_owned()];
    let mut stack = vec![root().join("docs")];
    let mut found = Vec::new();
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                found.push(relative(&path));
            }
        }
    }
    found.sort();
    files.extend(found);
    files
}

/// `path` relative to the repository root, with `/` separators.
pub fn relative(path: &Path) -> String {
    path.strip_prefix(root())
        .unwrap()
        .to_string_lossy()
        .replace('\\', "/")
}

pub fn read(file: &str) -> String {
    std::fs::read_to_string(root().join(file)).unwrap_or_else(|e| panic!("{file}: {e}"))
}

/// The fenced blocks of `file`, in order (a fence may be indented, as in a list item).
pub fn blocks(file: &str) -> Vec<Block> {
    let text = read(file);
    let mut out = Vec::new();
    let mut open: Option<(usize, usize, String, Vec<String>)> = None;
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        match &mut open {
            None => {
                if let Some(info) = trimmed.strip_prefix("```") {
                    open = Some((i + 1, indent, info.trim().to_owned(), Vec::new()));
                }
            }
            Some((start, indent, info, body)) => {
                if trimmed.starts_with("```") {
                    out.push(Block {
                        file: file.to_owned(),
                        line: *start,
                        info: info.clone(),
                        body: body.join("\n") + "\n",
                    });
                    open = None;
                } else {
                    let cut = line.len().min(*indent);
                    let body_line = if line[..cut].trim().is_empty() {
                        &line[cut..]
                    } else {
                        line
                    };
                    body.push(body_line.to_owned());
                }
            }
        }
    }
    assert!(open.is_none(), "{file}: a fence is never closed");
    out
}

/// Every block of README.md and the book.
pub fn all_blocks() -> Vec<Block> {
    documents().iter().flat_map(|f| blocks(f)).collect()
}

/// The text of `file` outside its fenced blocks, each line with its number.
pub fn prose(file: &str) -> Vec<(usize, String)> {
    let mut fenced = false;
    let mut out = Vec::new();
    for (i, line) in read(file).lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !fenced {
            out.push((i + 1, line.to_owned()));
        }
    }
    out
}

/// The `shardhost` binary, run in `dir` with the environment the docs' snippets read.
pub fn shardhost(dir: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_shardhost"));
    c.current_dir(dir)
        .env_remove("SHARDHOST_LOG")
        .env_remove("RUST_LOG");
    for (name, value) in snippet_env() {
        c.env(name, value);
    }
    c
}

pub fn text(out: &[u8]) -> String {
    String::from_utf8_lossy(out).into_owned()
}

pub fn said(out: &Output) -> String {
    format!("{}{}", text(&out.stdout), text(&out.stderr))
}

/// The environment variables the docs' snippets take through `${NAME}`: each is one the reader
/// sets (`tests/stack` prints the emulator ones; a pod gets `POD_NAME` from the downward API).
pub fn snippet_env() -> Vec<(&'static str, String)> {
    vec![
        ("CARRIER_TOKEN", "docs-carrier-token".into()),
        ("KINESIS_TEST_ENDPOINT", "http://127.0.0.1:4567".into()),
        ("KINESIS_TEST_TLS_ENDPOINT", "https://127.0.0.1:4568".into()),
        (
            "KINESIS_TEST_CA_FILE",
            root().join("tests/tls/ca.pem").display().to_string(),
        ),
    ]
}

/// A scratch directory holding every file the docs' snippets and commands name, by the name
/// they use. The components: the shipping example (`ship.wasm`: it imports `wasi:http` and
/// `wasi:keyvalue`, so its configs grant both) and a handler importing nothing, standing for
/// the first handler's `orders.wasm` and the fan-out example's `billing.wasm`.
pub fn fixtures(tag: &str) -> Scratch {
    let dir = Scratch::new(tag);
    let ship = guest("ship");
    let plain = guest("always_ack");
    let files: [(&str, PathBuf); 8] = [
        ("ship.wasm", ship.clone()),
        ("ship-v2.wasm", ship.clone()),
        ("examples/shipping/ship.wasm", ship),
        ("orders.wasm", plain.clone()),
        ("billing.wasm", plain),
        (
            "shipments.ndjson",
            root().join("examples/shipping/shipments.ndjson"),
        ),
        (
            "examples/shipping/shipments.ndjson",
            root().join("examples/shipping/shipments.ndjson"),
        ),
        ("private-ca.pem", root().join("tests/tls/ca.pem")),
    ];
    for (name, from) in files {
        let to = dir.0.join(name);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(&from, &to).unwrap_or_else(|e| panic!("{}: {e}", from.display()));
    }
    std::fs::copy(root().join("tests/tls/ca.pem"), dir.0.join("ca.pem")).unwrap();
    dir
}

/// Whitespace collapsed, for comparing a shown line with a printed one.
pub fn squeeze(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}
