//! Forged roster rows: anyone who can write the lease table can write an instance row, so a
//! row with a multi-byte version, absurd counts, huge texts with terminal escapes, another
//! instance's owner or no JSON at all is skipped and named, and `status` (from the table and
//! through a live instance's admin API) still answers with the rest.

use std::time::Duration;

use shardhost::lease::now_ms;
use shardhost::status::fleet::Heartbeat;

use super::{heartbeat, instance, row_key, status};
use crate::support::fleet::{Instance, Stack, shardhost, stack};
use crate::support::{Scratch, wait_until_else};

/// Writes `text` as the heartbeat of the row keyed for `key_owner`, counting for ten minutes,
/// straight into the table as anyone who can write it could.
fn forge(st: &Stack, key_owner: &str, text: &str) {
    use crate::support::dynamo::{n, s};
    let expires_at = now_ms() / 1_000 + 600;
    st.rt.block_on(st.d.put_row(
        &st.table,
        &[
            ("lease_key", s(&row_key(key_owner))),
            ("heartbeat", s(text)),
            ("expires_at", n(expires_at)),
        ],
    ));
}

/// Forged rows, each with one defect: (the owner its key names, its heartbeat text).
fn forged_rows() -> Vec<(&'static str, String)> {
    let now = now_ms();
    let with = |owner: &str, change: &dyn Fn(&mut Heartbeat)| {
        let mut beat = heartbeat(owner, now, 1_000);
        change(&mut beat);
        serde_json::to_string(&beat).unwrap()
    };
    let orders = |b: &mut Heartbeat| b.subscriptions.get_mut("orders").unwrap().clone();
    vec![
        // Byte 12 of the version falls inside `é`: `short_version` panicked on it.
        (
            "multibyte",
            with("multibyte", &|b| {
                let mut r = orders(b);
                r.version = format!("{}é{}", "a".repeat(11), "b".repeat(51));
                b.subscriptions.insert("orders".into(), r);
            }),
        ),
        (
            "absurd",
            with("absurd", &|b| {
                let mut r = orders(b);
                r.shards = usize::MAX;
                r.generation = u64::MAX;
                r.canary = Some(shardhost::status::fleet::CanaryArms {
                    canary_id: "c0ffee".into(),
                    canary: shardhost::canary::rules::Arm {
                        records: u64::MAX,
                        failed: u64::MAX,
                        retried: 0,
                        calls: vec![u64::MAX; 1_000],
                    },
                    base: shardhost::canary::rules::Arm::default(),
                });
                b.subscriptions.insert("orders".into(), r);
            }),
        ),
        (
            "huge",
            with("huge", &|b| {
                b.owner = "é".repeat(100_000);
                b.admin = Some("\u{1b}[2J".repeat(10_000));
            }),
        ),
        // A row under its own key claiming to be the real instance.
        ("impostor", with("real", &|_| {})),
        (
            "garbage",
            format!("not json \u{1b}[2J{}", "x".repeat(50_000)),
        ),
    ]
}

#[test]
fn a_forged_heartbeat_is_skipped_and_named_and_status_still_answers() {
    let Some(st) = stack(1) else {
        return;
    };
    let dir = Scratch::new("roster-forged");
    let cli = dir.write("cli.toml", st.roster_host(None).render());
    let real = Instance::start(&dir, "real", st.roster_host(Some("real")));
    wait_until_else(
        "status to list the real instance live",
        Duration::from_secs(30),
        || instance(&status(&cli), "real").is_some(),
        || real.text(),
    );
    let forged = forged_rows();
    for (key_owner, text) in &forged {
        forge(&st, key_owner, text);
    }

    let out = shardhost(&["status", "--config", cli.to_str().unwrap()]);
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "status --config: {}\n{shown}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(shown.contains("  real "), "{shown}");
    assert!(shown.contains("5 instance row(s) skipped"), "{shown}");
    for (key_owner, _) in &forged {
        assert!(
            shown.contains(&format!("    {key_owner}: ")),
            "{key_owner}: {shown}"
        );
    }
    assert!(
        !shown.contains('\u{1b}'),
        "no control character reaches the terminal"
    );
    assert!(shown.len() < 20_000, "{} bytes shown", shown.len());

    let report = status(&cli);
    let listed: Vec<&str> = report
        .instances
        .iter()
        .map(|i| i.heartbeat.owner.as_str())
        .collect();
    assert_eq!(listed, ["real"]);
    let named: Vec<&str> = report.unreadable.iter().map(|u| u.row.as_str()).collect();
    assert_eq!(
        named,
        ["absurd", "garbage", "huge", "impostor", "multibyte"]
    );
    let problem = |row: &str| {
        &report
            .unreadable
            .iter()
            .find(|u| u.row == row)
            .unwrap()
            .problem
    };
    assert!(problem("multibyte").contains("`version` is not a sha256"));
    assert!(
        problem("absurd").contains("`generation` is out of range"),
        "{}",
        problem("absurd")
    );
    assert!(problem("huge").contains("`owner`"), "{}", problem("huge"));
    assert!(problem("impostor").contains("another owner"));
    assert!(problem("garbage").contains("does not parse"));

    // The live instance's admin API answers `/status` with the same fleet.
    let admin = instance(&report, "real").unwrap().admin.clone().unwrap();
    for json in [false, true] {
        let mut args = vec!["status", "--admin", admin.as_str()];
        if json {
            args.push("--json");
        }
        let out = shardhost(&args);
        let answer = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "status --admin: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(answer.contains("multibyte"), "{answer}");
    }
}
