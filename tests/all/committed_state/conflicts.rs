//! The edges of state committed with the checkpoint: a key two shards write, a record whose
//! writes do not fit in one commit, and `replay` of such a subscription.

use std::time::Duration;

use super::Counting;
use crate::support::fleet::Instance;
use crate::support::wait_until_else;

/// Two shards count into the same keys (`count/SKU`): the commit of one fails on the other's
/// newer version, that shard reads again in place from the first record whose writes were
/// discarded, and the counts end exact.
#[test]
fn a_key_two_shards_write_conflicts_is_read_again_and_ends_exact() {
    let Some(mut run) = Counting::new(2, "committed-conflict") else {
        return;
    };
    run.put_orders(0, 2_000);
    let config = run.config("a", "with-checkpoint", &[("key", "sku")]);
    let instance = Instance::start(&run.dir, "a", config);
    wait_until_else(
        "both shards checkpointed at their last record",
        Duration::from_secs(90),
        || run.all_checkpointed(),
        || format!("counted {:?}\n{}", run.counted(), instance.text()),
    );
    assert!(
        instance.logged("state commit conflicted"),
        "no commit conflicted: {}",
        instance.text()
    );
    assert!(
        !instance.logged("cannot write to the lease store"),
        "a conflict ended a worker instead of reading again in place: {}",
        instance.text()
    );
    assert_eq!(run.counted(), run.truth, "counted per SKU vs put");
}

/// A record that writes more keys than one commit holds (the `wide` SKU writes 120): the
/// error names it, none of its writes are kept, the records before it are counted and the
/// checkpoint waits in front of it.
#[test]
fn a_record_whose_writes_do_not_fit_in_one_commit_is_named_and_kept_out() {
    let Some(mut run) = Counting::new(1, "committed-wide") else {
        return;
    };
    run.put_orders(0, 10);
    let (_, wide_seq) = run.st.k.put(
        &run.st.stream,
        "customer-wide",
        serde_json::json!({"id": 99, "sku": "wide"}).to_string(),
    );
    let config = run.config("a", "with-checkpoint", &[("wide", "120")]);
    let instance = Instance::start(&run.dir, "a", config);
    wait_until_else(
        "the wide record named",
        Duration::from_secs(60),
        || instance.logged(&format!("record {wide_seq}")) && instance.logged("do not fit"),
        || instance.text(),
    );
    wait_until_else(
        "the ten orders before it counted",
        Duration::from_secs(30),
        || run.counted() == run.truth,
        || format!("counted {:?}", run.counted()),
    );
    let rows = run.st.rt.block_on(run.st.d.rows(&run.state));
    assert!(
        rows.iter().all(|r| r
            .get("key")
            .and_then(|k| k.as_s().ok())
            .is_some_and(|k| !k.contains("/wide/") && !k.ends_with("/wide"))),
        "a write of the wide record was committed"
    );
    let shard = run.last.keys().next().unwrap().clone();
    let checkpoint = run.st.checkpoint(&shard).unwrap_or_default();
    assert!(
        checkpoint.split('/').next() == run.last.get(&shard).map(String::as_str),
        "the checkpoint {checkpoint} stands at the last order before the wide record"
    );
}

/// `shardhost replay` of a subscription that commits state with the checkpoint runs both
/// versions on trial like any other: their counts are recorded as state writes, none reaches
/// the table, and the two agree.
#[test]
fn replay_of_committed_state_writes_nothing_and_compares_like_any_other() {
    let Some(mut run) = Counting::new(1, "committed-replay") else {
        return;
    };
    run.put_orders(0, 30);
    let config = run.dir.write(
        "shardhost.toml",
        run.config("replayer", "with-checkpoint", &[]).render(),
    );
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_shardhost"))
        .args([
            "replay",
            "test",
            &crate::fleet::path("sku_count"),
            "--json",
            "--config",
        ])
        .arg(&config)
        .output()
        .unwrap();
    let shown = crate::fleet::text(&out);
    assert_eq!(out.status.code(), Some(0), "{shown}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for version in ["current", "candidate"] {
        let writes = report["effects"][version]["counts"]["state-write"].as_u64();
        assert!(
            writes >= Some(30),
            "{version} recorded {writes:?} writes: {report}"
        );
    }
    assert_eq!(
        run.st.rt.block_on(run.st.d.count(&run.state)),
        0,
        "replay wrote to the state table: {shown}"
    );
}
