//! Everything a user can type is documented: every verb and flag `shardhost --help` lists is in
//! the book, and every key the config parser accepts is in the configuration reference. The
//! lists come from the binary itself: its `--help`, and the keys a table accepts, which
//! `shardhost check` names when it meets an unknown one.

use std::collections::BTreeMap;

use super::{documents, fixtures, read, shardhost, text};

/// A key no table accepts, to make `check` list the ones each does.
const PROBE: &str = "zz_docs_probe";

/// Every table of a config with the probe key in it.
fn probe_config() -> String {
    let p = format!("{PROBE} = 1");
    format!(
        "{p}\n[host]\n{p}\n[kinesis]\n{p}\n[leases]\nstore = \"dynamodb\"\ntable = \"t\"\n{p}\n\
         [fleet]\n{p}\n[admin]\n{p}\n[[subscription]]\nname = \"s\"\nstream = \"s\"\n\
         handler = \"orders.wasm\"\nstart_at = {{ {p} }}\n{p}\n[subscription.limits]\n{p}\n\
         [subscription.wasi]\n{p}\n[subscription.http]\n{p}\n[subscription.state]\n{p}\n"
    )
}

/// The keys each table accepts (`subscription.limits` → `memory`, `timeout`, ...), from
/// `check`'s answer to the probe.
fn accepted_keys() -> BTreeMap<String, Vec<String>> {
    let dir = fixtures("docs-keys");
    dir.write("probe.toml", probe_config());
    let out = shardhost(&dir.0)
        .args(["check", "probe.toml"])
        .output()
        .unwrap();
    let said = text(&out.stderr);
    let mut tables = BTreeMap::new();
    for line in said.lines() {
        let Some((at, keys)) =
            line.split_once(&format!("unknown key `{PROBE}`; expected one of: "))
        else {
            continue;
        };
        let key = at.split(": ").nth(1).unwrap_or("").trim_end_matches(": ");
        let table = key
            .trim_end_matches(PROBE)
            .trim_end_matches('.')
            .replace("[0]", "");
        let keys = keys.split(", ").map(|k| k.trim().to_owned()).collect();
        tables.insert(table, keys);
    }
    tables
}

#[test]
fn every_key_the_config_parser_accepts_is_in_the_configuration_reference() {
    let tables = accepted_keys();
    for table in [
        "",
        "host",
        "kinesis",
        "leases",
        "fleet",
        "admin",
        "subscription",
        "subscription.start_at",
        "subscription.limits",
        "subscription.wasi",
        "subscription.http",
        "subscription.state",
    ] {
        assert!(
            tables.contains_key(table),
            "check listed no keys of `{table}`: {tables:?}"
        );
    }
    let reference = read("docs/configuration.md");
    let lines: Vec<&str> = reference.lines().map(str::trim).collect();
    let mut missing = Vec::new();
    for (table, keys) in &tables {
        for key in keys {
            let documented = lines.iter().any(|l| {
                let l = l.trim_start_matches('#').trim_start();
                l.starts_with(&format!("{key} ="))
                    || l.starts_with(&format!("{key}, "))
                    || l.starts_with(&format!("[{key}]"))
                    || l.starts_with(&format!("[[{key}]]"))
                    || l.starts_with(&format!("[subscription.{key}]"))
                    || l.contains(&format!("{{ {key} ="))
            }) || reference.contains(&format!("`{key}`"));
            if !documented {
                missing.push(format!("`{key}` of [{table}]"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "docs/configuration.md does not document: {}",
        missing.join(", ")
    );
}

/// The verbs of `shardhost --help`, and the long flags of each verb's `--help`.
fn verbs_and_flags() -> Vec<(String, Vec<String>)> {
    let dir = fixtures("docs-verbs");
    let help = |args: &[&str]| {
        let out = shardhost(&dir.0).args(args).output().unwrap();
        assert!(out.status.success(), "shardhost {args:?}");
        text(&out.stdout)
    };
    let top = help(&["--help"]);
    let mut verbs = vec![(String::new(), flags_of(&top))];
    let commands = top
        .split("Commands:")
        .nth(1)
        .and_then(|s| s.split("Options:").next())
        .expect("--help lists commands");
    for line in commands.lines() {
        let Some(verb) = line.split_whitespace().next() else {
            continue;
        };
        if verb != "help" {
            let flags = flags_of(&help(&[verb, "--help"]));
            verbs.push((verb.to_owned(), flags));
        }
    }
    verbs
}

/// The long flags (`--records`) of a help text, but `--help` and `--version`.
fn flags_of(help: &str) -> Vec<String> {
    let mut flags: Vec<String> = help
        .split_whitespace()
        .filter(|w| w.starts_with("--") && w.len() > 2)
        .map(|w| {
            w.trim_end_matches(|c: char| !c.is_alphanumeric())
                .split(['=', '<', '['])
                .next()
                .unwrap()
                .to_owned()
        })
        .filter(|f| f != "--help" && f != "--version")
        .collect();
    flags.sort();
    flags.dedup();
    flags
}

#[test]
fn every_verb_and_flag_of_the_command_line_is_in_the_book() {
    let book: String = documents()
        .iter()
        .filter(|f| f.starts_with("docs/"))
        .map(|f| read(f))
        .collect();
    let cli = read("docs/cli.md");
    let mut missing = Vec::new();
    let verbs = verbs_and_flags();
    assert!(verbs.len() > 10, "{verbs:?}");
    for (verb, flags) in verbs {
        if !verb.is_empty() && !cli.contains(&format!("shardhost {verb}")) {
            missing.push(format!("`shardhost {verb}` (docs/cli.md)"));
        }
        for flag in flags {
            if !book.contains(&flag) {
                missing.push(format!("`{flag}` of `shardhost {verb}`"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "the book does not document: {}",
        missing.join(", ")
    );
}
