//! `[subscription.state]`: every accepted form and every refusal.

use std::time::Duration;

use super::*;
use crate::capability::state::{StateGrant, StateStoreKind};

/// `MINIMAL` followed by some TOML, the line of that TOML the problem is on, its key (`sub.`
/// for `subscription[0].`) and a part of its message.
#[rustfmt::skip]
const STATE_PROBLEMS: &[(&str, usize, &str, &str)] = &[
    ("state = 5", 1, "sub.state", "expected a table, found the integer 5"),
    ("[subscription.state]\nstore = \"redis\"", 2, "sub.state.store", "unknown state store \"redis\"; expected \"memory\" or \"dynamodb\""),
    ("[subscription.state]\nstore = \"dynamodb\"", 1, "sub.state.table", "missing required key `table`"),
    ("[subscription.state]\ntable = \"t\"", 2, "sub.state.table", "`table` is only used with store = \"dynamodb\" (the store here is \"memory\")"),
    ("[subscription.state]\nttl = \"7\"", 2, "sub.state.ttl", "has no unit"),
    ("[subscription.state]\nttl = \"500ms\"", 2, "sub.state.ttl", "`ttl` must be at least 1s"),
    ("[subscription.state]\nttl = \"11000d\"", 2, "sub.state.ttl", "`ttl` must be at most"),
    ("[subscription.state]\nbuckets = [\"a b\"]", 2, "sub.state.buckets[0]", "\"a b\" is not a bucket name; use 1 to 64 letters, digits, `_`, `.` or `-`"),
    ("[subscription.state]\nbuckets = [\"default\"]", 2, "sub.state.buckets[0]", "the bucket \"default\" is always open"),
    ("[subscription.state]\nbuckets = [\"a\",\n  \"a\"]", 3, "sub.state.buckets[1]", "\"a\" is listed twice (first on line 6)"),
    ("[subscription.state]\nmax_in_flight = 0", 2, "sub.state.max_in_flight", "must be from 1 to 1024"),
    ("[subscription.state]\ntimeout = \"5s\"", 2, "sub.state.timeout", "timeout (5s) must be shorter than the call's [subscription.limits] timeout (5s)"),
    ("[subscription.state]\ncommit = \"later\"", 2, "sub.state.commit", "unknown commit \"later\"; expected \"immediate\" or \"with-checkpoint\""),
    ("[subscription.state]\nbucket = \"a\"", 2, "sub.state.bucket", "unknown key `bucket`; expected one of: store, table, ttl, buckets"),
];

#[test]
fn each_bad_state_grant_is_reported_with_its_line_key_and_reason() {
    for &(extra, line, key, message) in STATE_PROBLEMS {
        let problems = Scratch::new().problems(&format!("{MINIMAL}{extra}\n"));
        let key = key.replacen("sub.", "subscription[0].", 1);
        assert_eq!(
            places(&problems),
            [(4 + line, key.as_str())],
            "{extra}: {problems:#?}"
        );
        assert!(
            problems[0].message.contains(message),
            "{extra}: {}",
            problems[0]
        );
    }
}

#[test]
fn without_a_state_table_no_state_is_granted() {
    assert_eq!(load("").subscriptions[0].wasi.state(), None);
}

#[test]
fn state_defaults_to_memory_with_the_memory_lease_store_keyed_by_service_and_subscription() {
    let config = Scratch::new().load(&format!(
        "[host]\nname = \"ship/ping%\"\n{MINIMAL}[subscription.state]\nbuckets = [\"orders\"]\n"
    ));
    assert_eq!(
        config.subscriptions[0].wasi.state(),
        Some(StateGrant {
            store: StateStoreKind::Memory,
            ttl: None,
            buckets: vec!["orders".into()],
            namespace: "ship%2Fping%25/ship/".into(),
            max_in_flight: 64,
            timeout: std::time::Duration::from_secs(2),
            commit: Default::default(),
        })
    );
}

const DYNAMO_LEASES: &str = "[kinesis]\nregion = \"eu-west-1\"\n\
     [leases]\nstore = \"dynamodb\"\ntable = \"leases\"\nendpoint = \"http://127.0.0.1:4568\"\n\
     test_credentials = true\n";

#[test]
fn with_a_lease_table_state_defaults_to_dynamodb_where_the_lease_table_is() {
    let config = Scratch::new().load(&format!(
        "{DYNAMO_LEASES}{MINIMAL}[subscription.state]\ntable = \"ship-state\"\nttl = \"7d\"\n\
         max_in_flight = 8\n"
    ));
    let state = config.subscriptions[0].wasi.state().clone().unwrap();
    assert_eq!(
        state.store,
        StateStoreKind::Dynamo {
            table: "ship-state".into(),
            endpoint: Some("http://127.0.0.1:4568".into()),
            region: Some("eu-west-1".into()),
            test_credentials: true,
        }
    );
    assert_eq!(state.ttl, Some(Duration::from_secs(7 * 86_400)));
    assert_eq!(state.max_in_flight, 8);
    let never = Scratch::new().load(&format!(
        "{DYNAMO_LEASES}{MINIMAL}[subscription.state]\ntable = \"ship-state\"\nttl = \"0\"\n"
    ));
    assert_eq!(
        never.subscriptions[0].wasi.state().clone().unwrap().ttl,
        None
    );
}

#[test]
fn state_committed_with_the_checkpoint_lives_beside_the_checkpoints_and_takes_no_retry_copies() {
    let beside = Scratch::new().load(&format!(
        "{DYNAMO_LEASES}{MINIMAL}[subscription.state]\ntable = \"s\"\ncommit = \"with-checkpoint\"\n"
    ));
    let state = beside.subscriptions[0].wasi.state().clone().unwrap();
    assert_eq!(state.commit, crate::state::Commit::WithCheckpoint);
    let memory = Scratch::new().load(&format!(
        "{MINIMAL}[subscription.state]\ncommit = \"with-checkpoint\"\n"
    ));
    assert_eq!(
        memory.subscriptions[0].wasi.state().clone().unwrap().commit,
        crate::state::Commit::WithCheckpoint
    );
    let elsewhere = Scratch::new().problems(&format!(
        "{DYNAMO_LEASES}{MINIMAL}[subscription.state]\ntable = \"s\"\n\
         endpoint = \"http://127.0.0.1:9999\"\ncommit = \"with-checkpoint\"\n"
    ));
    assert!(
        elsewhere[0]
            .message
            .contains("same DynamoDB endpoint and region")
            && elsewhere[0].at.key.ends_with("state.commit"),
        "{elsewhere:#?}"
    );
    let copies = Scratch::new().problems(&format!(
        "{MINIMAL}max_attempts = 3\ndead_letter = \"dead\"\n\
         [subscription.state]\ncommit = \"with-checkpoint\"\n"
    ));
    assert!(
        copies.iter().any(|p| p
            .message
            .contains("does not work with [subscription.state] commit")
            && p.at.key.ends_with("max_attempts")),
        "{copies:#?}"
    );
}

#[test]
fn a_fleet_may_not_keep_state_in_memory_nor_in_its_lease_table() {
    let memory = Scratch::new().problems(&format!(
        "{DYNAMO_LEASES}{MINIMAL}[subscription.state]\nstore = \"memory\"\n"
    ));
    assert!(
        memory[0]
            .message
            .contains("a shard that moves would forget"),
        "{memory:#?}"
    );
    let leases = Scratch::new().problems(&format!(
        "{DYNAMO_LEASES}{MINIMAL}[subscription.state]\ntable = \"leases\"\n"
    ));
    assert!(
        leases[0].message.contains("is the lease table"),
        "{leases:#?}"
    );
}

#[test]
fn dummy_credentials_never_go_to_aws() {
    let problems = Scratch::new().problems(&format!(
        "{MINIMAL}[subscription.state]\nstore = \"dynamodb\"\ntable = \"t\"\ntest_credentials = true\n"
    ));
    assert!(
        problems[0].message.contains("would go to AWS DynamoDB"),
        "{problems:#?}"
    );
}
