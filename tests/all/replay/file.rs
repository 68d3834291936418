//! `replay --file`: a records file replayed through both versions as a stream's history, with
//! no stream at all (the embedded stream's config).

use super::{json, replay};
use crate::support::{HostToml, Scratch, Subscription, guest};

#[test]
fn replay_file_reports_the_records_of_a_file_two_versions_answer_differently() {
    // No emulator: the embedded stream's config, the records from a file.
    let dir = Scratch::new("replay-file");
    let config = dir.write(
        "shardhost.toml",
        HostToml::memory()
            .subscription(Subscription::new("orders", "orders", guest("scripted")).batch(2))
            .render(),
    );
    let records = dir.write(
        "records.ndjson",
        "{\"partition_key\":\"a\",\"data\":\"drop\"}\n\
         {\"partition_key\":\"b\",\"data\":\"retry\"}\n\n\
         {\"partition_key\":\"c\",\"data\":\"drop\"}\n\
         {\"partition_key\":\"d\",\"data\":\"retry\"}\n\
         {\"partition_key\":\"e\",\"data\":\"drop\"}\n",
    );
    let (file, candidate) = (records.to_str().unwrap(), guest("always_drop"));
    let args = ["orders", candidate.to_str().unwrap(), "--file", file];
    let out = replay(&config, &[&args[..], &["--json"]].concat());
    assert_eq!(out.status.code(), Some(1), "something differs: {out:?}");
    let report = json(&out);
    assert_eq!(report["records"], 5, "{report}");
    assert_eq!(report["differences_total"], 2, "{report}");
    let differing: Vec<(&str, &str, &str)> = report["differences"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            assert_eq!(
                (&d["current"], &d["candidate"]),
                (&"retry".into(), &"drop".into())
            );
            (
                d["shard_id"].as_str().unwrap(),
                d["sequence_number"].as_str().unwrap(),
                d["partition_key"].as_str().unwrap(),
            )
        })
        .collect();
    // One pseudo-shard named as the file; each record's sequence number is its line.
    assert_eq!(differing, [(file, "2", "b"), (file, "5", "d")], "{report}");

    let out = replay(&config, &[&args[..], &["--records", "3"]].concat());
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("3 record(s) replayed"), "{text}");
    assert!(text.contains("1 record(s) answered differently"), "{text}");
    assert!(
        text.contains(&format!("{file} 2  key b  retry -> drop")),
        "{text}"
    );

    // Nothing differs: exit 0.
    let same = guest("scripted");
    let out = replay(&config, &["orders", same.to_str().unwrap(), "--file", file]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
}

#[test]
fn replay_file_records_a_handlers_publishes_and_sends_none_to_the_stream() {
    // The file path is on trial like a stream's history: what the handler publishes is
    // recorded in the report, never put into the subscription's real `publish_to` stream.
    let Some(st) = crate::support::fleet::stack(1) else {
        return;
    };
    let out_stream = format!("{}-out", st.stream);
    st.k.create(&out_stream, 1);
    let dir = Scratch::new("replay-file-effects");
    let records = dir.write(
        "records.ndjson",
        format!(
            "{{\"partition_key\":\"a\",\"data\":\"publish:{out_stream}:one\"}}\n\
             {{\"partition_key\":\"b\",\"data\":\"publish:{out_stream}:two\"}}\n"
        ),
    );
    let sub = st
        .subscription("scripted")
        .trim_horizon()
        .set("publish_to", vec![out_stream.clone()]);
    let config = dir.write(
        "shardhost.toml",
        st.host("replayer").subscription(sub).render(),
    );
    let same = guest("scripted");
    let file = records.to_str().unwrap();
    let out = replay(
        &config,
        &["test", same.to_str().unwrap(), "--file", file, "--json"],
    );
    assert_eq!(out.status.code(), Some(0), "nothing differs: {out:?}");
    let report = json(&out);
    for who in ["current", "candidate"] {
        let effects = &report["effects"][who];
        assert_eq!(effects["counts"]["publish"], 2, "{report}");
        let first = effects["first"][0].as_str().unwrap();
        assert!(
            first.starts_with(&format!("publish to {out_stream}, key a")),
            "{first}"
        );
    }
    assert!(
        st.k.read_all(&out_stream).is_empty(),
        "replay --file published"
    );
}
