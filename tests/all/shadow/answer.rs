//! A fleet's shadow told `--http-answer` straight through the lease table (`deploy --config
//! … --shadow --http-answer`): the shadow row keeps the answer and every instance that follows
//! the row answers the shadow's unsent requests with it, as its heartbeat says.

use std::time::Duration;

use crate::fleet::{Fleet as Table, SUBSCRIPTION, text};
use crate::support::{guest, wait_until_else};

#[test]
fn a_fleet_shadow_set_through_the_table_answers_as_told_on_every_instance() {
    let Some(f) = Table::new(1, "shadow-answer") else {
        return;
    };
    let _a = f.start_fast("a", "always_ack");
    let _b = f.start_fast("b", "always_ack");
    let body = f.dir.write("booked.json", r#"{"booking":"b-1"}"#);
    let told = format!("201:{}", body.display());
    let drop = guest("always_drop");
    let out = f.cli(
        "deploy",
        &[
            SUBSCRIPTION,
            drop.to_str().unwrap(),
            "--shadow",
            "--http-answer",
            &told,
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("unsent requests answered 201 (stubbed), 17 bytes of application/json"),
        "{}",
        text(&out)
    );
    let answers = || {
        f.report()
            .instances
            .iter()
            .filter(|i| i.live)
            .filter_map(|i| i.heartbeat.subscriptions.get(SUBSCRIPTION)?.shadow.clone())
            .map(|s| s.http_answer)
            .collect::<Vec<_>>()
    };
    let expected = Some("201 (stubbed), 17 bytes of application/json".to_owned());
    wait_until_else(
        "every instance answering the shadow's unsent requests as told",
        Duration::from_secs(60),
        || answers() == [expected.clone(), expected.clone()],
        || format!("{:#?}", f.report()),
    );
    // A shadow set without it answers 503 again (the row keeps no answer).
    let out = f.cli(
        "deploy",
        &[SUBSCRIPTION, drop.to_str().unwrap(), "--shadow"],
    );
    assert!(out.status.success(), "{}", text(&out));
    wait_until_else(
        "every instance's shadow answering 503",
        Duration::from_secs(60),
        || answers() == [None, None],
        || format!("{:#?}", f.report()),
    );
}
