//! Every command README.md and the book show is run: a ```console block's `$ ` lines and every
//! line of a ```sh block (a `\` at the end joins the next line; a ` # ` comment is not part of
//! it). [`COMMANDS`] is the one list saying how each is run: here, offline, in the
//! [`fixtures`](super::fixtures) directory, its shown output's key lines asserted; or by a
//! named existing test (commands that need the emulators for long, or build for a minute),
//! whose file must hold that test and the flags the command uses; or, for what is not
//! shardhost's (the AWS CLI, the shell), said why. A command shown that is not in the list,
//! and an entry no document shows any more, fail the test.

use super::runs::{run_invoke, run_keygen, run_new, run_shipping, run_stack};
use super::{Block, all_blocks, fixtures, root, squeeze};
use crate::support::Scratch;

/// How a command is run.
enum How {
    /// Here, offline, in the fixtures directory, given the output shown under it.
    Here(fn(&Scratch, &[String])),
    /// By the test `name` of `tests/all/FILE`, whose file names each of `mentions`.
    Test {
        file: &'static str,
        name: &'static str,
        mentions: &'static [&'static str],
    },
    /// Not shardhost's: why no test runs it.
    Other(&'static str),
}

use How::{Here, Other, Test};

const FIRST_HANDLER: How = Test {
    file: "first_handler.rs",
    name: "a_new_python_handler_tests_builds_invokes_and_runs",
    mentions: &["\"build\"", "\"invoke\"", "\"run\"", "records.ndjson"],
};

/// Every command the documents show, and how it is run.
const COMMANDS: &[(&str, How)] = &[
    (
        "scripts/demo",
        Test {
            // The demo builds with cargo, which waits on this test run's lock; what it runs,
            // `shardhost -v run examples/shipping/shardhost.toml`, is run by `run_shipping`.
            file: "cli.rs",
            name: "run_shows_outcomes_and_checkpoints_then_stops_cleanly_on_sigint",
            mentions: &["guest(\"ship\")", "\"-v\"", "record held"],
        },
    ),
    (
        "tests/stack cargo test --workspace",
        Other("the command that runs this test (and every other): .ci/run runs it"),
    ),
    ("tests/stack", Here(run_stack)),
    (
        "scripts/install",
        Test {
            // Into a scratch prefix, with this test run's own binary (a release build here
            // would wait on this run's cargo lock).
            file: "install.rs",
            name: "install_puts_a_working_shardhost_in_a_prefix_in_seconds_and_says_how_to_reach_it",
            mentions: &["scripts/install", "--prefix", "export PATH="],
        },
    ),
    ("shardhost new orders --lang python", Here(run_new)),
    ("cd orders", Other("the shell")),
    ("$EDITOR orders.py", Other("an editor")),
    ("shardhost build", FIRST_HANDLER),
    (
        "shardhost invoke orders.wasm --records records.ndjson",
        FIRST_HANDLER,
    ),
    ("shardhost run", FIRST_HANDLER),
    (
        "shardhost run examples/shipping/shardhost.toml",
        Here(run_shipping),
    ),
    (
        "shardhost status",
        Test {
            file: "cli/summary.rs",
            name: "status_shows_the_outcome_totals_and_the_held_record_while_a_host_runs",
            mentions: &["\"status\""],
        },
    ),
    (
        "shardhost invoke examples/shipping/ship.wasm --records examples/shipping/shipments.ndjson --allow-http http://127.0.0.1:8090 --state",
        Here(run_invoke),
    ),
    (
        "aws dynamodb create-table --table-name shipping-leases --attribute-definitions AttributeName=lease_key,AttributeType=S --key-schema AttributeName=lease_key,KeyType=HASH --billing-mode PAY_PER_REQUEST",
        Other("the AWS CLI; the lease tests create this table (key `lease_key`, S) on dynalite"),
    ),
    (
        "aws dynamodb create-table --table-name shipping-state --attribute-definitions AttributeName=key,AttributeType=S --key-schema AttributeName=key,KeyType=HASH --billing-mode PAY_PER_REQUEST",
        Other("the AWS CLI; the state tests create this table (key `key`, S) on dynalite"),
    ),
    (
        "aws dynamodb update-time-to-live --table-name shipping-state --time-to-live-specification Enabled=true,AttributeName=expires",
        Other("the AWS CLI; dynalite has no TTL, the host treats expired items as absent"),
    ),
    (
        "shardhost dead-letters shipments.dead --config shardhost.toml",
        Test {
            file: "retries.rs",
            name: "reading_dead_letters_makes_no_key_in_the_lease_table_or_the_cache_directory",
            mentions: &["\"dead-letters\""],
        },
    ),
    (
        "shardhost dead-letters shipments.dead --config shardhost.toml --json",
        Test {
            file: "retries.rs",
            name: "replaying_dead_letters_writes_only_fleet_letters_into_streams_the_config_reads",
            mentions: &["\"dead-letters\"", "\"--json\""],
        },
    ),
    (
        "shardhost dead-letters shipments.dead --config shardhost.toml --replay",
        Test {
            file: "retries.rs",
            name: "replaying_dead_letters_writes_only_fleet_letters_into_streams_the_config_reads",
            mentions: &["\"--replay\""],
        },
    ),
    (
        "shardhost run shipping.toml",
        Test {
            file: "state/story.rs",
            name: "the_shipping_example_books_every_shipment_once_across_a_restart",
            mentions: &["\"run\"", "carrier"],
        },
    ),
    (
        "shardhost deploy ship target/wasm32-wasip2/release/ship.wasm",
        Test {
            file: "cli.rs",
            name: "deploy_rollback_and_status_drive_a_running_host",
            mentions: &["\"deploy\""],
        },
    ),
    (
        "shardhost deploy --admin http://10.0.0.7:9750 ship ship.wasm --wait",
        Test {
            file: "fleet.rs",
            name: "one_deploy_reaches_every_instance_and_one_started_later_runs_it_from_its_first_record",
            mentions: &["\"--admin\"", "\"--wait\""],
        },
    ),
    (
        "shardhost deploy --config shardhost.toml ship ship.wasm --wait",
        Test {
            file: "fleet.rs",
            name: "deploy_config_with_no_instance_running_then_instances_start_on_that_version",
            mentions: &["\"--wait\""],
        },
    ),
    (
        "shardhost deploy --config shardhost.toml ship --rollback",
        Test {
            file: "fleet.rs",
            name: "a_refused_component_never_becomes_desired_and_rollback_is_fleet_wide",
            mentions: &["\"--rollback\""],
        },
    ),
    (
        "shardhost status --config shardhost.toml",
        Test {
            file: "fleet.rs",
            name: "one_deploy_reaches_every_instance_and_one_started_later_runs_it_from_its_first_record",
            mentions: &["\"status\""],
        },
    ),
    (
        "shardhost replay ship ship-v2.wasm --from 2h",
        Test {
            file: "replay.rs",
            name: "replay_names_exactly_the_records_a_candidate_answers_differently_and_writes_no_lease",
            mentions: &["\"replay\""],
        },
    ),
    (
        "shardhost deploy ship ship-v2.wasm --shadow",
        Test {
            file: "shadow.rs",
            name: "promote_makes_the_shadow_current_at_a_batch_boundary_and_shadow_off_drops_it",
            mentions: &["shadow"],
        },
    ),
    (
        "shardhost replay orders orders-v2.wasm --file records.ndjson",
        Test {
            file: "replay/file.rs",
            name: "replay_file_reports_the_records_of_a_file_two_versions_answer_differently",
            mentions: &["\"--file\"", "records.ndjson"],
        },
    ),
    (
        "shardhost replay ship ship-v2.wasm --file shipments.ndjson --http-answer 201",
        Test {
            file: "replay/answer.rs",
            name: "http_answer_201_makes_the_shipping_handlers_replay_compare_acks",
            mentions: &[
                "\"--file\"",
                "\"--http-answer\"",
                "\"201\"",
                "shipments.ndjson",
            ],
        },
    ),
    (
        "shardhost deploy ship ship-v2.wasm --shadow --http-answer 201",
        Test {
            file: "put/answer.rs",
            name: "a_shadow_told_http_answer_201_compares_the_success_path_of_the_records_put",
            mentions: &["\"--shadow\"", "\"--http-answer\"", "\"201\""],
        },
    ),
    (
        "shardhost deploy orders orders-v2.wasm --shadow",
        Test {
            file: "put.rs",
            name: "a_shadow_compares_the_records_put_into_the_embedded_stream",
            mentions: &["\"deploy\"", "\"--shadow\"", "\"put\""],
        },
    ),
    (
        "shardhost put orders records.ndjson",
        Test {
            file: "put.rs",
            name: "put_into_a_running_embedded_stream_reaches_the_handler",
            mentions: &["\"put\"", "records.ndjson"],
        },
    ),
    (
        "shardhost put orders --key order-9 --data '{\"id\": 9, \"sku\": \"mug\", \"quantity\": 2}'",
        Test {
            file: "put.rs",
            name: "put_into_a_running_embedded_stream_reaches_the_handler",
            mentions: &["\"--key\"", "\"--data\""],
        },
    ),
    (
        "shardhost deploy orders --promote",
        Test {
            file: "iam.rs",
            name: "the_whole_fleet_path_works_within_the_documented_lease_table_policy",
            mentions: &["\"--promote\""],
        },
    ),
    (
        "shardhost deploy ship --promote",
        Test {
            file: "iam.rs",
            name: "the_whole_fleet_path_works_within_the_documented_lease_table_policy",
            mentions: &["\"--promote\"", "\"--shadow\""],
        },
    ),
    (
        "shardhost deploy --config shardhost.toml ship ship-v2.wasm --canary 25% --canary-for 10m --abort-on \"traps>0.1%,retry>5%,p99>2x\"",
        Test {
            file: "canary.rs",
            name: "a_canary_that_traps_is_rolled_back_within_its_window_and_settles_nothing",
            mentions: &["\"--canary-for\"", "\"--abort-on\""],
        },
    ),
    ("shardhost keygen --out deploy.pem", Here(run_keygen)),
    (
        "shardhost deploy --config shardhost.toml --sign-key deploy.pem ship ship.wasm --wait",
        Test {
            file: "fleet_trust.rs",
            name: "with_trusted_keys_only_versions_signed_for_this_deploy_run_at_start_and_after",
            mentions: &["\"--sign-key\"", "\"keygen\""],
        },
    ),
    (
        "shardhost deploy --admin http://10.0.0.7:9750 --sign-key deploy.pem ship ship.wasm",
        Test {
            file: "fleet_trust.rs",
            name: "with_trusted_keys_only_versions_signed_for_this_deploy_run_at_start_and_after",
            mentions: &["\"--sign-key\"", "\"--admin\""],
        },
    ),
];

/// One command a document shows, with the lines shown under it.
struct Shown {
    at: String,
    command: String,
    output: Vec<String>,
}

/// The commands of a ```console or ```sh block.
fn commands_of(block: &Block) -> Vec<Shown> {
    let console = block.info == "console";
    let lines: Vec<&str> = block.body.lines().collect();
    let mut out: Vec<Shown> = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i].trim();
        let command = if console {
            line.strip_prefix("$ ")
        } else if line.is_empty() || line.starts_with('#') {
            None
        } else {
            Some(line)
        };
        let Some(first) = command else {
            if let Some(last) = out.last_mut().filter(|_| console) {
                last.output.push(line.to_owned());
            }
            i += 1;
            continue;
        };
        let mut command = first.to_owned();
        while command.ends_with('\\') && i + 1 < lines.len() {
            command.pop();
            i += 1;
            command = format!("{command} {}", lines[i].trim());
        }
        let command = command.split(" # ").next().unwrap();
        out.push(Shown {
            at: format!("{}:{}", block.at(), i + 1),
            command: squeeze(command),
            output: Vec::new(),
        });
        i += 1;
    }
    out
}

fn shown_commands() -> Vec<Shown> {
    all_blocks()
        .iter()
        .filter(|b| b.info == "console" || b.info == "sh")
        .flat_map(commands_of)
        .collect()
}

/// Whether a shown line is printed: its parts around `...` / `…` appear in order in one line.
fn printed(shown: &str, printed: &str) -> bool {
    let parts: Vec<String> = shown
        .split("...")
        .flat_map(|p| p.split('…'))
        .map(squeeze)
        .filter(|p| !p.is_empty())
        .collect();
    parts.is_empty()
        || printed.lines().any(|line| {
            let line = squeeze(line);
            let mut from = 0;
            parts.iter().all(|p| match line[from..].find(p.as_str()) {
                Some(at) => {
                    from += at + p.len();
                    true
                }
                None => false,
            })
        })
}

pub(super) fn assert_printed(shown: &[String], out: &str, skip: impl Fn(&str) -> bool) {
    for line in shown.iter().filter(|l| !skip(l)) {
        assert!(
            printed(line, out),
            "shown but not printed: `{line}`\nprinted:\n{out}"
        );
    }
}

#[test]
fn every_command_the_docs_show_is_run_here_or_by_a_named_test() {
    let shown = shown_commands();
    let mut problems = Vec::new();
    for s in &shown {
        if !COMMANDS.iter().any(|(c, _)| squeeze(c) == s.command) {
            problems.push(format!(
                "{}: `{}` is run by no test (add it to COMMANDS)",
                s.at, s.command
            ));
        }
    }
    for (command, how) in COMMANDS {
        if !shown.iter().any(|s| s.command == squeeze(command)) {
            problems.push(format!(
                "`{command}` is in COMMANDS but no document shows it"
            ));
        }
        if let Other(why) = how {
            assert!(!why.is_empty(), "`{command}`: say why no test runs it");
        }
        if let Test {
            file,
            name,
            mentions,
        } = how
        {
            let source = std::fs::read_to_string(root().join("tests/all").join(file))
                .unwrap_or_else(|e| panic!("tests/all/{file}: {e}"));
            if !source.contains(&format!("fn {name}(")) {
                problems.push(format!(
                    "`{command}`: tests/all/{file} has no test `{name}`"
                ));
            }
            for m in *mentions {
                if !source.contains(m) {
                    problems.push(format!("`{command}`: tests/all/{file} never says {m}"));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    let dir = fixtures("docs-commands");
    for (command, how) in COMMANDS {
        if let Here(run) = how {
            let first = shown
                .iter()
                .find(|s| s.command == squeeze(command))
                .unwrap();
            eprintln!("docs: running `{command}` ({})", first.at);
            run(&dir, &first.output);
        }
    }
}

#[test]
fn a_shown_line_with_an_ellipsis_matches_the_parts_around_it() {
    assert!(printed(
        "4960...0017  from shipments",
        "4960000017 from shipments/x"
    ));
    assert!(printed("...", "anything"));
    assert!(!printed("ack order-1", "drop order-1"));
    assert!(!printed("b ... a", "a b"));
}
