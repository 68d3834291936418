//! Every repository path the documents name exists, and every relative link resolves.
//!
//! A path is a `code span` outside fenced blocks, without spaces, that either starts with a
//! top-level entry of the repository (`host/src/lib.rs`, `tests/stack`, `.ci/run`) or holds a
//! `/` and ends in a file extension or a `/` (`dispatch/run.rs`, `cli/new/`). It exists when
//! it is a file or directory from the root or from the document's directory, or the tail of
//! one (`dispatch/run.rs` is `host/src/dispatch/run.rs`: ARCHITECTURE.md names the host's
//! files from `host/src/`). A link `[text](target)` resolves from the document's directory;
//! `#anchor` must be a heading of the target (GitHub's and mdBook's slugs).

use std::collections::BTreeSet;
use std::process::Command;

use super::{documents, prose, read, root};

/// Every file and directory of the repository (tracked, or new and not ignored), relative.
fn entries() -> BTreeSet<String> {
    let out = Command::new("git")
        .args(["ls-files", "--cached", "--others", "--exclude-standard"])
        .current_dir(root())
        .output()
        .expect("git runs");
    let mut all = BTreeSet::new();
    for file in String::from_utf8_lossy(&out.stdout).lines() {
        if !root().join(file).exists() {
            continue; // deleted in the work tree
        }
        let mut dir = String::new();
        for part in file.split('/') {
            if !dir.is_empty() {
                all.insert(dir.clone() + "/");
            }
            dir = if dir.is_empty() {
                part.to_owned()
            } else {
                format!("{dir}/{part}")
            };
        }
        all.insert(file.to_owned());
    }
    all
}

const EXTENSIONS: &[&str] = &[
    "rs", "md", "toml", "py", "js", "ts", "wit", "yml", "yaml", "json", "pem", "txt", "ndjson",
    "html", "css", "png", "lock", "in",
];

/// The code spans of `line`.
fn spans(line: &str) -> Vec<&str> {
    line.split('`').skip(1).step_by(2).collect()
}

/// Whether a code span names a repository path.
fn is_path(span: &str, top: &BTreeSet<String>) -> bool {
    if span.is_empty()
        || span.starts_with('/')
        || span
            .chars()
            .any(|c| c.is_whitespace() || "{}<>*$~…:=()|?,'\"".contains(c))
        || span.contains("...")
        || !span.chars().any(|c| c.is_ascii_lowercase())
        || span.ends_with(".wasm")
    {
        // Not a path (`GET /status`, `SERVICE/SUBSCRIPTION/`), or a build's output.
        return false;
    }
    let first = span.split('/').next().unwrap();
    if span.contains('/') && top.contains(&format!("{first}/")) && first != "target" {
        return true;
    }
    span.contains('/')
        && (span.ends_with('/')
            || span
                .rsplit_once('.')
                .is_some_and(|(_, ext)| EXTENSIONS.contains(&ext)))
}

fn exists(span: &str, doc_dir: &str, all: &BTreeSet<String>) -> bool {
    let span = span.trim_start_matches("./");
    let dir_form = |s: &str| {
        if s.ends_with('/') {
            s.to_owned()
        } else {
            format!("{s}/")
        }
    };
    let candidates = [span.to_owned(), normalize(&format!("{doc_dir}/{span}"))];
    candidates
        .iter()
        .any(|c| all.contains(c.as_str()) || all.contains(&dir_form(c)))
        || all.iter().any(|e| {
            e.ends_with(&format!("/{span}")) || e.ends_with(&format!("/{}", dir_form(span)))
        })
}

/// `a/b/../c` as `a/c`.
fn normalize(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    let mut out = parts.join("/");
    if path.ends_with('/') && !out.is_empty() {
        out.push('/');
    }
    out
}

fn doc_dir(file: &str) -> String {
    file.rsplit_once('/')
        .map(|(d, _)| d.to_owned())
        .unwrap_or_default()
}

/// The paths `file` names that do not exist.
fn missing_paths(file: &str, all: &BTreeSet<String>) -> Vec<String> {
    let top: BTreeSet<String> = all
        .iter()
        .filter(|e| e.matches('/').count() <= 1 && e.ends_with('/'))
        .cloned()
        .collect();
    let mut missing = Vec::new();
    for (n, line) in prose(file) {
        for span in spans(&line) {
            if is_path(span, &top) && !exists(span, &doc_dir(file), all) {
                missing.push(format!("{file}:{n}: `{span}` does not exist"));
            }
        }
    }
    missing
}

/// A heading's anchor, as GitHub and mdBook make it.
pub fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

fn anchors(file: &str) -> BTreeSet<String> {
    prose(file)
        .iter()
        .filter_map(|(_, l)| l.strip_prefix('#').map(|h| h.trim_start_matches('#')))
        .map(slug)
        .collect()
}

/// The `[text](target)` links of a line.
fn links(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        let Some(end) = after.find(')') else { break };
        out.push(after[..end].to_owned());
        rest = &after[end..];
    }
    out
}

fn broken_links(file: &str) -> Vec<String> {
    let mut broken = Vec::new();
    for (n, line) in prose(file) {
        for target in links(&line) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (path, anchor) = target.split_once('#').unwrap_or((&target, ""));
            let resolved = if path.is_empty() {
                file.to_owned()
            } else {
                normalize(&format!("{}/{path}", doc_dir(file)))
            };
            if !root().join(&resolved).exists() {
                broken.push(format!(
                    "{file}:{n}: link `{target}`: {resolved} does not exist"
                ));
            } else if !anchor.is_empty()
                && resolved.ends_with(".md")
                && !anchors(&resolved).contains(anchor)
            {
                broken.push(format!(
                    "{file}:{n}: link `{target}`: {resolved} has no heading #{anchor}"
                ));
            }
        }
    }
    broken
}

#[test]
fn every_path_and_link_in_readme_and_the_book_exists() {
    let all = entries();
    let mut problems = Vec::new();
    for file in documents() {
        problems.extend(missing_paths(&file, &all));
        problems.extend(missing_sources(&file, &all));
        problems.extend(broken_links(&file));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The bare source file names (`handler.rs`) of `file` that are no file of the repository.
fn missing_sources(file: &str, all: &BTreeSet<String>) -> Vec<String> {
    let mut missing = Vec::new();
    for (n, line) in prose(file) {
        for span in spans(&line) {
            let bare = !span.contains('/') && span.ends_with(".rs") && !span.contains(' ');
            if bare && !all.iter().any(|e| e.ends_with(&format!("/{span}"))) {
                missing.push(format!("{file}:{n}: `{span}` is no file of the repository"));
            }
        }
    }
    missing
}

#[test]
fn every_path_and_link_in_architecture_exists() {
    let all = entries();
    let mut problems = missing_paths("ARCHITECTURE.md", &all);
    problems.extend(missing_sources("ARCHITECTURE.md", &all));
    problems.extend(broken_links("ARCHITECTURE.md"));
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// SUMMARY.md is mdBook's: a title, then parts (`# Title`) and nested lists of
/// `- [Title](chapter.md)`; every chapter of `docs/` is in it, once, and the book's images are
/// shown by a chapter.
#[test]
fn the_summary_lists_every_chapter_once_in_mdbooks_format() {
    let summary = read("docs/SUMMARY.md");
    let mut lines = summary.lines().filter(|l| !l.trim().is_empty());
    assert_eq!(
        lines.next(),
        Some("# Summary"),
        "SUMMARY.md starts with its title"
    );
    let mut listed = Vec::new();
    for line in lines {
        if line.starts_with("# ") {
            continue;
        }
        let indent = line.len() - line.trim_start().len();
        let item = line.trim_start();
        assert!(
            indent % 4 == 0 && item.starts_with("- [") && item.ends_with(".md)"),
            "not an mdBook SUMMARY line: `{line}`"
        );
        let target = &links(item)[0];
        listed.push(normalize(&format!("docs/{target}")));
    }
    let chapters: Vec<String> = documents()
        .into_iter()
        .filter(|f| f.starts_with("docs/") && f != "docs/SUMMARY.md")
        .collect();
    for chapter in &chapters {
        let n = listed.iter().filter(|l| *l == chapter).count();
        assert_eq!(n, 1, "{chapter} is listed {n} times in SUMMARY.md");
    }
    for image in std::fs::read_dir(root().join("docs")).unwrap() {
        let name = image.unwrap().file_name().to_string_lossy().into_owned();
        if name.ends_with(".png") {
            assert!(
                chapters
                    .iter()
                    .any(|c| read(c).contains(&format!("{name})"))),
                "docs/{name} is shown by no chapter"
            );
        }
    }
}

#[test]
fn slugs_are_githubs() {
    assert_eq!(
        slug(" Signed deploys, and who can do what"),
        "signed-deploys-and-who-can-do-what"
    );
    assert_eq!(
        slug("Delivery guarantees: what is never lost"),
        "delivery-guarantees-what-is-never-lost"
    );
    assert_eq!(
        normalize("docs/handlers/../../BENCHMARKS.md"),
        "BENCHMARKS.md"
    );
}

/// A code block whose first line ends in a comment that is just a repository path
/// (`import shardhost   # host/src/cli/new/handler.py`) is an excerpt of that file: its lines
/// are the file's, in order.
#[test]
fn every_excerpt_shows_the_lines_of_the_file_it_names() {
    let mut excerpts = 0;
    for block in super::all_blocks() {
        let Some(first) = block.body.lines().next() else {
            continue;
        };
        let Some((code, source)) = first
            .rsplit_once(" # ")
            .or_else(|| first.rsplit_once(" // "))
        else {
            continue;
        };
        let source = source.trim();
        if source.contains(' ') || !root().join(source).is_file() {
            continue;
        }
        excerpts += 1;
        let file = read(source);
        let mut lines = file.lines().map(str::trim);
        let shown = std::iter::once(code).chain(block.body.lines().skip(1));
        for line in shown.map(str::trim).filter(|l| !l.is_empty()) {
            assert!(
                lines.any(|l| l == line),
                "{}: `{line}` is not (in this order) in {source}",
                block.at()
            );
        }
    }
    assert!(excerpts > 0, "no excerpt found");
}
