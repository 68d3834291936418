//! Every ```toml block of README.md and the book passes `shardhost check`. The info string says
//! what a block is:
//!
//! - ```` ```toml ````: a whole config; it must pass as written.
//! - ```` ```toml fragment ````: some tables of a config, as the text says to change the last
//!   whole config before it in its file (or, with none, [`BASE`]); merged into that (its
//!   tables over the base's, its first `[[subscription]]` over the base's one), it must pass.
//! - ```` ```toml invalid ````: a config that must fail (exit 2); the ```` ```text ```` block
//!   right after it holds the problems `check` prints, each of which must be printed.
//!
//! Any other `toml...` info string is refused, so no block escapes. The files a block names are
//! the [`fixtures`](super::fixtures); the `${NAME}`s it reads are [`super::snippet_env`].

use super::{Block, all_blocks, fixtures, said, shardhost, squeeze};

/// What a fragment is merged into: one subscription of a service on AWS with a lease table.
const BASE: &str = r#"
[host]
name = "shipping"

[kinesis]
region = "eu-west-1"

[leases]
store = "dynamodb"
table = "shipping-leases"

[[subscription]]
name = "ship"
stream = "shipments"
handler = "orders.wasm"
"#;

#[derive(Debug, PartialEq)]
enum Kind {
    Whole,
    Fragment,
    Invalid,
}

fn kind(block: &Block) -> Option<Kind> {
    match block.info.as_str() {
        "toml" => Some(Kind::Whole),
        "toml fragment" => Some(Kind::Fragment),
        "toml invalid" => Some(Kind::Invalid),
        _ => None,
    }
}

/// `over` merged into `base`: tables key by key, the first element of an array of tables over
/// the first of `base`'s, anything else replaced.
fn merge(base: &mut toml::Table, over: toml::Table) {
    for (key, value) in over {
        match (base.get_mut(&key), value) {
            (Some(toml::Value::Table(b)), toml::Value::Table(o)) => merge(b, o),
            (Some(toml::Value::Array(b)), toml::Value::Array(mut o))
                if !o.is_empty() && o.iter().all(toml::Value::is_table) =>
            {
                if let (Some(toml::Value::Table(first)), toml::Value::Table(over_first)) =
                    (b.first_mut(), o.remove(0))
                {
                    merge(first, over_first);
                }
                b.extend(o);
            }
            (_, value) => {
                base.insert(key, value);
            }
        }
    }
}

fn config_of(block: &Block, kind: &Kind, base: Option<&Block>) -> String {
    match kind {
        Kind::Fragment => {
            let mut base: toml::Table = base.map_or(BASE, |b| &b.body).parse().unwrap();
            let over: toml::Table = block
                .body
                .parse()
                .unwrap_or_else(|e| panic!("{}: not TOML: {e}", block.at()));
            merge(&mut base, over);
            toml::to_string(&base).unwrap()
        }
        Kind::Whole | Kind::Invalid => block.body.clone(),
    }
}

#[test]
fn every_toml_block_of_the_docs_passes_check_or_fails_as_shown() {
    let blocks = all_blocks();
    let dir = fixtures("docs-toml");
    let mut problems = Vec::new();
    let mut checked = 0;
    for (i, block) in blocks.iter().enumerate() {
        if !block.info.starts_with("toml") {
            continue;
        }
        let Some(kind) = kind(block) else {
            problems.push(format!(
                "{}: ```{} is none of ```toml, ```toml fragment, ```toml invalid",
                block.at(),
                block.info
            ));
            continue;
        };
        let file = if kind == Kind::Invalid {
            "bad.toml"
        } else {
            "shardhost.toml"
        };
        let base = blocks[..i]
            .iter()
            .rev()
            .find(|b| b.file == block.file && b.info == "toml");
        dir.write(file, config_of(block, &kind, base));
        let out = shardhost(&dir.0).args(["check", file]).output().unwrap();
        checked += 1;
        match kind {
            Kind::Whole | Kind::Fragment => {
                if !out.status.success() {
                    problems.push(format!("{}: check failed:\n{}", block.at(), said(&out)));
                }
            }
            Kind::Invalid => {
                if out.status.code() != Some(2) {
                    problems.push(format!(
                        "{}: check answered {:?}, not 2:\n{}",
                        block.at(),
                        out.status.code(),
                        said(&out)
                    ));
                }
                let shown = blocks
                    .get(i + 1)
                    .filter(|b| b.file == block.file && b.info == "text");
                let Some(shown) = shown else {
                    problems.push(format!("{}: no ```text block after it", block.at()));
                    continue;
                };
                let printed = squeeze(&said(&out));
                for line in shown.body.lines().filter(|l| !l.trim().is_empty()) {
                    if !printed.contains(&squeeze(line)) {
                        problems.push(format!(
                            "{}: check does not print `{line}`; it printed:\n{}",
                            shown.at(),
                            said(&out)
                        ));
                    }
                }
            }
        }
    }
    assert!(checked >= 5, "only {checked} TOML blocks found");
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
}

#[test]
fn a_fragment_merges_into_the_base_config() {
    let mut base: toml::Table = BASE.parse().unwrap();
    let over: toml::Table =
        "[[subscription]]\nname = \"billing\"\nread = \"fan-out\"\n[fleet]\npoll = \"1s\"\n"
            .parse()
            .unwrap();
    merge(&mut base, over);
    let sub = &base["subscription"].as_array().unwrap()[0];
    assert_eq!(sub["name"].as_str(), Some("billing"));
    assert_eq!(sub["read"].as_str(), Some("fan-out"));
    assert_eq!(sub["handler"].as_str(), Some("orders.wasm"));
    assert_eq!(base["fleet"]["poll"].as_str(), Some("1s"));
    assert_eq!(base["leases"]["store"].as_str(), Some("dynamodb"));
}
