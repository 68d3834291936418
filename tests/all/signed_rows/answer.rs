//! A signed shadow's answer to the requests it does not send (`--http-answer`) is part of what
//! its signature covers: an attacker who rewrites the answer in the lease table, keeping the
//! signature, gets the shadow refused, so a candidate cannot be made to look good by it.

use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue;

use crate::fleet::{Fleet, SUBSCRIPTION, path, version};
use crate::fleet_trust::{keygen, s};

/// The shadow row of subscription `test` of service `shardhost`.
const SHADOW: &str = "#shardhost#shadow#shardhost#test";

#[test]
fn a_signed_shadows_http_answer_rewritten_in_the_table_is_refused() {
    let Some(f) = Fleet::new(1, "signed-answer") else {
        return;
    };
    let (key, public) = keygen(&f, "deploy.pem");
    let mut a = f.start_trusting("a", "always_ack", &public);
    f.wait_running(&["a"], &version("always_ack"));
    let body = f.dir.write("booked.json", r#"{"booking":"b-1"}"#);
    let told = format!("503:{}", body.display());
    f.deploy_ok(&[
        SUBSCRIPTION,
        &path("batchall"),
        "--shadow",
        "--http-answer",
        &told,
        "--sign-key",
        &key,
    ]);
    a.wait_for("the signed shadow to run", Duration::from_secs(30), |i| {
        i.logged("runs here too")
    });

    // The attacker turns the told 503 into a 200, keeping the row's signature.
    let row = f.row_of(SHADOW).expect("the shadow row");
    let text = row["shadow"].as_s().expect("the shadow as JSON");
    let mut shadow: serde_json::Value = serde_json::from_str(text).unwrap();
    assert_eq!(shadow["http_answer"]["status"], 503, "{shadow}");
    shadow["http_answer"]["status"] = 200.into();
    let mut attrs: Vec<(&str, AttributeValue)> = row
        .iter()
        .filter(|(k, _)| k.as_str() != "shadow")
        .map(|(k, v)| (k.as_str(), v.clone()))
        .collect();
    attrs.push(("shadow", s(&shadow.to_string())));
    f.st.rt.block_on(f.st.d.put_row(&f.st.table, &attrs));
    a.kill9();
    let _a = f.start_trusting("a", "always_ack", &public);
    let refused = f.wait_trial_refused("a", &["shadow", "does not verify"]);
    assert!(refused.contains(&version("batchall")[..12]), "{refused}");
}
