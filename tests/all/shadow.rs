//! Shadows (`deploy --shadow`), against kinesis-mock: a candidate runs after the current
//! version on every batch, its answers compared and counted, never settled; one that traps or
//! hangs changes and delays nothing; `--promote` makes it current at a batch boundary, as a
//! deploy does.

use std::collections::HashMap;
use std::time::Duration;

use hyper::{Method, StatusCode};
use shardhost::record::Outcome;
use shardhost::shadow::ShadowReport;
use shardhost::status::ShardState;

use crate::support::kinesis::Kinesis;
use crate::support::{
    HostToml, Outcomes, Running, Scratch, Subscription, guest, kinesis_endpoint, unique,
    wait_until_else,
};

mod answer;
mod costs;

const TOKEN: &str = "shadow-token";

/// A host on every shard of a new stream of `shards`, running `current`, with the admin API.
struct Fixture {
    k: Kinesis,
    stream: String,
    host: Running,
    seen: Outcomes,
    _dir: Scratch,
}

fn start(current: &str, shards: i32, timeout: &str) -> Option<Fixture> {
    let ep = kinesis_endpoint()?;
    let stream = unique("shadow");
    let k = Kinesis::new(&ep);
    k.create(&stream, shards);
    let dir = Scratch::new("shadow");
    let config = HostToml::kinesis(&ep)
        .leases("renew_every", "1s")
        .leases("list_every", "300ms")
        .admin_with_token(TOKEN)
        .subscription(
            Subscription::new("tagged", &stream, guest(current))
                .trim_horizon()
                .batch(10)
                .poll_interval("20ms")
                .limit("timeout", timeout),
        );
    let seen = Outcomes::default();
    let host = Running::start_with(&dir, config, |h| h.on_outcome(seen.tap()));
    host.wait_for("every shard read", |b| {
        b.shards_of("tagged")
            .iter()
            .filter(|s| s.status.state == ShardState::Reading)
            .count()
            == shards as usize
    });
    Some(Fixture {
        k,
        stream,
        host,
        seen,
        _dir: dir,
    })
}

impl Fixture {
    fn admin(&self, method: Method, path: &str, body: Vec<u8>) -> (StatusCode, String) {
        let client = self.host.admin(Some(TOKEN));
        let answer = self.host.block_on(client.send(method, path, body)).unwrap();
        (answer.status, answer.message())
    }

    fn set_shadow(&self, handler: &str) {
        let bytes = std::fs::read(guest(handler)).unwrap();
        let (status, body) = self.admin(Method::PUT, "/subscriptions/tagged/shadow", bytes);
        assert_eq!(status, StatusCode::OK, "{body}");
    }

    fn shadow(&self) -> Option<ShadowReport> {
        let client = self.host.admin(Some(TOKEN));
        let report = self.host.block_on(client.status()).unwrap();
        report.subscriptions[0].shadow.clone()
    }

    /// Waits until the shadow has compared `n` records in all.
    /// Waits until the shadow has compared (or dropped, counted) `n` records in all.
    fn wait_compared(&self, n: u64) -> ShadowReport {
        wait_until_else(
            &format!("the shadow to compare {n} records"),
            Duration::from_secs(60),
            || {
                self.shadow().is_some_and(|s| {
                    let done = s.agree + s.differ + s.trapped + s.timed_out + s.skipped;
                    done + s.records_dropped >= n
                })
            },
            || format!("{:#?}", self.shadow()),
        );
        self.shadow().unwrap()
    }

    fn put(&self, key: &str, data: &str) {
        self.k.put(&self.stream, key, data);
    }

    fn wait_settled(&self, n: usize) {
        self.host
            .wait_for(&format!("{n} records settled"), |_| self.seen.len() >= n);
    }
}

fn version(handler: &str) -> String {
    shardhost::testing::version_of(&std::fs::read(guest(handler)).unwrap())
}

#[test]
fn a_shadow_is_compared_on_every_batch_and_settles_nothing() {
    let Some(f) = start("scripted", 2, "5s") else {
        return;
    };
    f.set_shadow("always_drop");
    // In rounds, each compared before the next, so that no batch finds the shadow busy.
    let mut n = 0;
    for round in 0..4 {
        for i in 0..15 {
            let data = if i % 3 == 0 { "drop" } else { "ack" };
            f.put(&format!("key-{round}-{i}"), data);
        }
        n += 15;
        f.wait_settled(n);
        f.wait_compared(n as u64);
    }
    let shadow = f.shadow().unwrap();
    assert_eq!(shadow.version, version("always_drop"));
    // Every record is compared or in a batch the busy shadow dropped (counted); what is
    // compared is classified exactly: `drop` records agree, `ack` records differ ack -> drop.
    assert_eq!(
        shadow.agree + shadow.differ + shadow.records_dropped,
        60,
        "{shadow:#?}"
    );
    if shadow.records_dropped == 0 {
        assert_eq!((shadow.agree, shadow.differ), (20, 40), "{shadow:#?}");
    }
    assert!(shadow.agree <= 20 && shadow.differ <= 40, "{shadow:#?}");
    assert_eq!(shadow.differences.len(), 1, "{shadow:#?}");
    let pair = &shadow.differences[0];
    assert_eq!(
        (pair.current.as_str(), pair.candidate.as_str()),
        ("ack", "drop")
    );
    assert_eq!(pair.records, shadow.differ);
    for d in &shadow.first_differences {
        let i: usize = d.partition_key.rsplit('-').next().unwrap().parse().unwrap();
        assert_ne!(i % 3, 0, "a `drop` record reported as differing: {d:?}");
    }

    // Only the current version settled, each record once, as it answers.
    let all = f.seen.all();
    assert_eq!(all.len(), 60);
    let scripted = version("scripted");
    let mut once: HashMap<&str, usize> = HashMap::new();
    for s in &all {
        assert_eq!(
            s.version, scripted,
            "{} settled by the shadow",
            s.partition_key
        );
        let expected = if s.data == "drop" {
            Outcome::Drop
        } else {
            Outcome::Ack
        };
        assert_eq!(s.outcome, expected);
        *once.entry(&s.partition_key).or_default() += 1;
    }
    assert!(once.values().all(|&c| c == 1), "a record settled twice");

    let metrics = f.host.block_on(f.host.admin(Some(TOKEN)).send(
        Method::GET,
        "/metrics",
        Vec::new(),
    ));
    let metrics = metrics.unwrap().message();
    // As many as status counted: 40 unless the busy shadow dropped a batch (counted above).
    let differ = format!(
        r#"shardhost_shadow_records_total{{subscription="tagged",result="differ"}} {}"#,
        shadow.differ
    );
    assert!(metrics.contains(&differ), "{metrics}");
    f.host.stop();
}

#[test]
fn a_shadow_that_traps_or_hangs_changes_and_delays_no_settlement() {
    let Some(f) = start("always_ack", 1, "1s") else {
        return;
    };
    f.set_shadow("scripted");
    for i in 0..10 {
        f.put(&format!("ok-{i}"), "ack");
    }
    f.wait_settled(10);
    f.wait_compared(10);
    f.put("poison", "panic");
    f.wait_settled(11);
    let trapped = f.wait_compared(11);
    assert_eq!(trapped.trapped, 1, "{trapped:#?}");
    // The shadow hangs on this record until its 1 s timeout; the shard does not wait for it.
    f.put("slow", "sleep:60000");
    f.wait_settled(12);
    for i in 0..5 {
        f.put(&format!("later-{i}"), "ack");
    }
    f.wait_settled(17);
    let shadow = f.shadow().unwrap();
    assert_eq!(
        shadow.timed_out, 0,
        "every record settled while the shadow still waited on the slow one: {shadow:#?}"
    );
    wait_until_else(
        "the shadow's timeout",
        Duration::from_secs(60),
        || f.shadow().is_some_and(|s| s.timed_out == 1),
        || format!("{:#?}", f.shadow()),
    );
    let all = f.seen.all();
    assert_eq!(all.len(), 17);
    let ack = version("always_ack");
    assert!(
        all.iter()
            .all(|s| s.outcome == Outcome::Ack && s.version == ack),
        "settled only by the current version, as it answers"
    );
    let first = &f.shadow().unwrap().first_differences;
    assert!(
        first
            .iter()
            .any(|d| d.partition_key == "poison" && d.candidate == "failed"),
        "{first:#?}"
    );
    f.host.stop();
}

#[test]
fn promote_makes_the_shadow_current_at_a_batch_boundary_and_shadow_off_drops_it() {
    let Some(f) = start("always_ack", 2, "5s") else {
        return;
    };
    // Nothing to promote or drop yet; a broken shadow is refused.
    let (status, _) = f.admin(Method::POST, "/subscriptions/tagged/promote", Vec::new());
    assert_eq!(status, StatusCode::CONFLICT);
    let (status, _) = f.admin(Method::DELETE, "/subscriptions/tagged/shadow", Vec::new());
    assert_eq!(status, StatusCode::CONFLICT);
    let broken = b"\0asm\x0d\0\x01\0 broken".to_vec();
    let (status, _) = f.admin(Method::PUT, "/subscriptions/tagged/shadow", broken);
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(f.shadow().is_none());

    f.set_shadow("always_drop");
    let (status, body) = f.admin(Method::DELETE, "/subscriptions/tagged/shadow", Vec::new());
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(f.shadow().is_none());

    f.set_shadow("always_drop");
    let mut n = 0;
    for i in 0..40 {
        f.put(&format!("key-{}", i % 7), &format!("before-{i}"));
        n += 1;
    }
    f.wait_settled(n);
    let (status, body) = f.admin(Method::POST, "/subscriptions/tagged/promote", Vec::new());
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(f.shadow().is_none(), "promoted: no shadow left");
    for i in 0..40 {
        f.put(&format!("key-{}", i % 7), &format!("after-{i}"));
        n += 1;
    }
    f.wait_settled(n);
    let all = f.seen.all();
    assert_eq!(all.len(), n, "each record settled once");
    let (ack, drop) = (version("always_ack"), version("always_drop"));
    for s in &all {
        let expected = if s.data.starts_with("before") {
            &ack
        } else {
            &drop
        };
        assert_eq!(&s.version, expected, "{} on the wrong version", s.data);
    }
    f.host.stop();
}

#[test]
fn a_fleet_shadow_runs_on_every_instance_and_promotes_fleet_wide() {
    use crate::fleet::{Fleet as Table, SUBSCRIPTION, text};
    let Some(f) = Table::new(2, "shadow-fleet") else {
        return;
    };
    let _a = f.start_fast("a", "always_ack");
    let _b = f.start_fast("b", "always_ack");
    let drop = guest("always_drop");
    let out = f.cli(
        "deploy",
        &[SUBSCRIPTION, drop.to_str().unwrap(), "--shadow"],
    );
    assert!(out.status.success(), "{}", text(&out));
    let drop_v = version("always_drop");
    let shadows = || {
        f.report()
            .instances
            .iter()
            .filter(|i| i.live)
            .filter_map(|i| i.heartbeat.subscriptions.get(SUBSCRIPTION)?.shadow.clone())
            .collect::<Vec<_>>()
    };
    // Both instances follow the row at their next poll.
    wait_until_else(
        "every instance running the fleet's shadow",
        Duration::from_secs(60),
        || {
            let s = shadows();
            s.len() == 2 && s.iter().all(|c| c.version == drop_v)
        },
        || format!("{:#?}", f.report()),
    );
    // Records on every shard until each instance has compared some (a batch that finds a
    // shadow busy is dropped, not compared: on a loaded machine one round may not do).
    let mut put = 0;
    let compared_everywhere = || {
        let s = shadows();
        s.len() == 2 && s.iter().all(|c| c.differ > 0)
    };
    for _round in 0..20 {
        for i in 0..40 {
            f.st.k.put(&f.st.stream, &format!("key-{i}"), "x");
        }
        put += 40;
        // Polled for up to 5 s before the next round.
        let until = std::time::Instant::now() + Duration::from_secs(5);
        while std::time::Instant::now() < until && !compared_everywhere() {
            std::thread::sleep(Duration::from_millis(100));
        }
        if compared_everywhere() {
            break;
        }
    }
    assert!(compared_everywhere(), "{:#?}", f.report());
    let differ: u64 = shadows().iter().map(|c| c.differ).sum();
    assert!(differ <= put, "{differ} of {put}");
    let out = f.cli("deploy", &[SUBSCRIPTION, "--promote"]);
    assert!(out.status.success(), "{}", text(&out));
    f.wait_running(&["a", "b"], &drop_v);
    wait_until_else(
        "the shadow gone everywhere",
        Duration::from_secs(60),
        || shadows().is_empty(),
        || format!("{:#?}", f.report()),
    );
    let desired = f.report().desired_of(SUBSCRIPTION).cloned().unwrap();
    assert_eq!(desired.version.as_deref(), Some(drop_v.as_str()));
}
