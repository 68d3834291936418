//! Nothing lost: the paths where records could be skipped, leases starve, or a subscription die
//! silently — tried with real `shardhost` processes on kinesis-mock and dynalite, and with hosts
//! in process where a failure has to be injected.

use crate::support;
use shardhost::status::ShardState;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::support::dynamo::{Dynamo, n, s};
use crate::support::fleet::{Instance, stack};
use crate::support::kinesis::Kinesis;
use crate::support::proxy::DelayProxy;
use crate::support::{
    HostToml, Scratch, Subscription, dynamodb_endpoint, guest, kinesis_endpoint, unique, wait_until,
};

const SHARD_0: &str = "shardId-000000000000";

fn keys(outcomes: &[(String, String)], outcome: &str) -> BTreeSet<String> {
    outcomes
        .iter()
        .filter(|(_, o)| o == outcome)
        .map(|(k, _)| k.clone())
        .collect()
}

#[test]
fn a_shard_read_but_never_checkpointed_is_read_again_from_where_it_was_first_opened() {
    let Some(st) = stack(1) else { return };
    let dir = Scratch::new("opened");
    let config = |handler| {
        st.config("a", handler)
            .leases("list_every", "1s")
            .leases("checkpoint_every", "200ms")
    };
    // start_at = latest (the default); the first record this reader sees is held.
    let mut a = Instance::start(&dir, "a", config("scripted"));
    wait_until("a to open the shard", Duration::from_secs(60), || {
        st.row(SHARD_0).is_some_and(|r| r.contains_key("opened_at"))
    });
    let mut n = 0;
    wait_until("a to hold a record", Duration::from_secs(30), || {
        st.k.put(&st.stream, &format!("held-{n}"), "retry");
        n += 1;
        // Paces the probes: one record every 300 ms until one is held.
        std::thread::sleep(Duration::from_millis(300));
        !keys(&a.outcomes(), "retry").is_empty()
    });
    let held = keys(&a.outcomes(), "retry");
    let behind: Vec<String> = (0..4).map(|i| format!("behind-{i}")).collect();
    for key in &behind {
        st.k.put(&st.stream, key, format!("log:{key}"));
    }
    a.wait_for(
        "a to handle the records behind it",
        Duration::from_secs(30),
        |i| {
            let acked = keys(&i.outcomes(), "ack");
            behind.iter().all(|k| acked.contains(k))
        },
    );
    st.k.split(&st.stream, SHARD_0);
    let children: Vec<String> = (0..5).map(|i| format!("child-{i}")).collect();
    for key in &children {
        st.k.put(&st.stream, key, format!("log:{key}"));
    }
    assert_eq!(a.interrupt(), Some(0), "a stops cleanly");

    // A release that acks everything.
    let b = Instance::start(&dir, "b", config("always_ack"));
    let expected: BTreeSet<String> = held
        .iter()
        .chain(&behind)
        .chain(&children)
        .cloned()
        .collect();
    b.wait_for(
        "every record that arrived after the shard was first opened",
        Duration::from_secs(60),
        |i| keys(&i.outcomes(), "ack").is_superset(&expected),
    );
    assert!(
        b.logged("rewinding shard"),
        "the rewind is logged with its reason"
    );
}

#[test]
fn a_host_killed_before_its_first_checkpoint_delivers_what_arrived_while_it_was_down() {
    let Some(st) = stack(1) else { return };
    let dir = Scratch::new("down");
    // No checkpoint is written for an hour: the host dies before its first one.
    let config = st
        .config("a", "scripted")
        .leases("list_every", "1s")
        .leases("checkpoint_every", "1h");
    let mut a = Instance::start(&dir, "a", &config);
    let mut n = 0;
    wait_until("a to read", Duration::from_secs(60), || {
        st.k.put(&st.stream, &format!("probe-{n}"), format!("log:probe-{n}"));
        n += 1;
        // Paces the probes: one record every 300 ms until one is handled.
        std::thread::sleep(Duration::from_millis(300));
        !a.handled().is_empty()
    });
    a.kill9();
    let after: Vec<String> = (0..5).map(|i| format!("after-{i}")).collect();
    for key in &after {
        st.k.put(&st.stream, key, format!("log:{key}"));
    }
    let again = Instance::start(&dir, "a2", &config);
    again.wait_for(
        "the records put while the host was down",
        Duration::from_secs(60),
        |i| {
            let seen: BTreeSet<String> = i.handled().into_iter().map(|(_, t)| t).collect();
            after.iter().all(|k| seen.contains(k))
        },
    );
}

#[test]
fn a_third_instance_never_takes_a_shard_another_asked_for() {
    let Some(st) = stack(2) else { return };
    let dir = Scratch::new("third");
    // Idle shards: a holder learns of a request at its next renewal, up to 4 s later.
    let config = |owner| {
        st.config(owner, "scripted")
            .leases("ttl", "20s")
            .leases("renew_every", "4s")
            .leases("list_every", "500ms")
    };
    let shards = [SHARD_0, "shardId-000000000001"];
    let a = Instance::start(&dir, "a", config("a"));
    wait_until("a to hold both shards", Duration::from_secs(60), || {
        shards.iter().all(|s| st.owner(s).as_deref() == Some("a"))
    });
    let _b = Instance::start(&dir, "b", config("b")); // runs until the test ends
    wait_until("b to ask for a shard", Duration::from_secs(30), || {
        shards.iter().any(|s| {
            let row = st.row(s).unwrap_or_default();
            let is_b =
                |attribute| row.get(attribute).and_then(|v| v.as_s().ok()) == Some(&"b".to_owned());
            is_b("handoff_to") || is_b("lease_owner")
        })
    });
    let c = Instance::start(&dir, "c", config("c").leases("balance", false));
    c.wait_for("c to run", Duration::from_secs(30), |i| {
        i.logged("host running")
    });
    let mut owners_seen = BTreeSet::new();
    wait_until("the handoff from a to b", Duration::from_secs(30), || {
        let owners: Vec<Option<String>> = shards.iter().map(|s| st.owner(s)).collect();
        owners_seen.extend(owners.iter().flatten().cloned());
        owners.contains(&Some("b".to_owned())) && owners.contains(&Some("a".to_owned()))
    });
    // Proving something does not happen: watches the owners over two more listing periods of c.
    let until = std::time::Instant::now() + Duration::from_secs(2);
    while std::time::Instant::now() < until {
        owners_seen.extend(shards.iter().filter_map(|s| st.owner(s)));
    }
    assert!(
        !owners_seen.contains("c"),
        "c never held a shard: owners seen {owners_seen:?}\nc's log:\n{}",
        c.text()
    );
    assert!(a.logged("handing it over"));
}

#[test]
fn renewals_go_on_while_a_slow_lease_store_holds_up_the_listing() {
    let Some(st) = stack(8) else { return };
    let dir = Scratch::new("slow");
    // Seven shards held by a live instance elsewhere: each listing asks about each of them.
    let far = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
        + 600_000;
    for i in 1..8 {
        let key = format!("{}:shardId-{i:012}", st.stream);
        st.rt.block_on(st.d.put_row(
            &st.table,
            &[
                ("lease_key", s(&key)),
                ("lease_owner", s("elsewhere")),
                ("lease_expiry", n(far)),
                ("lease_counter", n(1)),
            ],
        ));
    }
    let proxy = DelayProxy::start(&st.dynamodb);
    let config = |host: HostToml| {
        host.leases("ttl", "6s")
            .leases("renew_every", "1s")
            .leases("list_every", "1s")
            .leases("balance", false)
            .subscription(st.subscription("scripted").trim_horizon())
    };
    let b = Instance::start(&dir, "b", config(st.host_on("b", &proxy.url())));
    wait_until("b to hold shard 0", Duration::from_secs(60), || {
        st.owner(SHARD_0).as_deref() == Some("b")
    });
    // From now on every call of b to the table takes about 0.7 s: a listing (two calls per
    // foreign shard) takes longer than the ttl.
    proxy.set_delay(Duration::from_millis(700));
    let c = Instance::start(&dir, "c", config(st.host("c")));
    c.wait_for("c to run", Duration::from_secs(30), |i| {
        i.logged("host running")
    });
    let until = std::time::Instant::now() + Duration::from_secs(15);
    while std::time::Instant::now() < until {
        assert_eq!(
            st.owner(SHARD_0).as_deref(),
            Some("b"),
            "b's lease was renewed on time and nobody took it\nb's log:\n{}",
            b.text()
        );
        // Proving something does not happen: samples the owner every 100 ms for 15 s.
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(!b.logged("lease renewal failed"), "{}", b.text());
}

/// A lease store that panics on the first checkpoint write and holds every release until told.
struct Faulty {
    inner: shardhost::lease::MemoryLeaseStore,
    release: Arc<tokio::sync::Semaphore>,
}

#[async_trait::async_trait]
impl shardhost::lease::LeaseStore for Faulty {
    async fn acquire(
        &self,
        key: &shardhost::lease::LeaseKey,
        owner: &str,
        ttl: Duration,
    ) -> Result<Option<shardhost::lease::Lease>, shardhost::lease::LeaseError> {
        self.inner.acquire(key, owner, ttl).await
    }
    async fn renew(
        &self,
        lease: &shardhost::lease::Lease,
        ttl: Duration,
    ) -> Result<shardhost::lease::Lease, shardhost::lease::LeaseError> {
        self.inner.renew(lease, ttl).await
    }
    async fn checkpoint(
        &self,
        _lease: &shardhost::lease::Lease,
        _checkpoint: &shardhost::lease::Checkpoint,
    ) -> Result<shardhost::lease::Lease, shardhost::lease::LeaseError> {
        panic!("a bug in the lease store");
    }
    async fn mark_opened(
        &self,
        lease: &shardhost::lease::Lease,
        at_ms: u64,
    ) -> Result<shardhost::lease::Lease, shardhost::lease::LeaseError> {
        self.inner.mark_opened(lease, at_ms).await
    }
    async fn read(
        &self,
        key: &shardhost::lease::LeaseKey,
    ) -> Result<Option<shardhost::lease::Lease>, shardhost::lease::LeaseError> {
        self.inner.read(key).await
    }
    async fn release(
        &self,
        lease: &shardhost::lease::Lease,
    ) -> Result<(), shardhost::lease::LeaseError> {
        let _permit = self.release.acquire().await;
        self.inner.release(lease).await
    }
}

/// GET `path` from a host's admin API: (status code, body).
fn get(addr: std::net::SocketAddr, path: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let mut conn = std::net::TcpStream::connect(addr).unwrap();
    write!(conn, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").unwrap();
    let mut answer = String::new();
    conn.read_to_string(&mut answer).unwrap();
    let code = answer
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = answer
        .split("\r\n\r\n")
        .nth(1)
        .unwrap_or_default()
        .to_owned();
    (code, body)
}

#[test]
fn a_failed_shard_worker_makes_the_host_unhealthy_releases_its_lease_and_stops_with_an_error() {
    let dir = Scratch::new("panic");
    dir.write("feed.ndjson", support::text_record("k", "ack"));
    let config = HostToml::memory()
        .leases("checkpoint_every", "1ms")
        .admin()
        .subscription(Subscription::new("fragile", "s", guest("scripted")).feed("feed.ndjson"));
    let path = dir.write("shardhost.toml", config.render());
    let config = shardhost::config::Config::load(&path).unwrap_or_else(|e| panic!("{e}"));
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut host = rt
        .block_on(shardhost::Host::prepare(config))
        .unwrap_or_else(|e| panic!("{e}"));
    let release = Arc::new(tokio::sync::Semaphore::new(0));
    let store = Arc::new(Faulty {
        inner: shardhost::lease::MemoryLeaseStore::new(),
        release: release.clone(),
    });
    host.use_lease_store(store.clone());
    let admin = host.admin_addr().unwrap();
    let stop = tokio_util::sync::CancellationToken::new();
    let done = rt.spawn(host.run(stop.clone()));
    // The host drains (its release is held here): it answers unhealthy meanwhile.
    let (mut code, mut body) = (0, String::new());
    wait_until("/healthz to answer 503", Duration::from_secs(30), || {
        (code, body) = get(admin, "/healthz");
        code == 503
    });
    assert!(
        body.contains("fragile") && body.contains("a bug in the lease store"),
        "{body}"
    );
    release.add_permits(100);
    let result = rt.block_on(async {
        tokio::time::timeout(Duration::from_secs(30), done)
            .await
            .expect("the host stops by itself after a failure")
            .unwrap()
    });
    let err = result.expect_err("a failed task makes run fail");
    assert!(err.to_string().contains("fragile"), "{err}");
    let key = shardhost::lease::LeaseKey::new("s", SHARD_0);
    let row = rt
        .block_on(shardhost::lease::LeaseStore::read(&*store, &key))
        .unwrap()
        .unwrap();
    assert_eq!(row.owner, None, "the failed shard's lease was released");
}

#[test]
fn a_lease_row_with_absurd_values_refuses_that_shard_only() {
    let Some(endpoint) = dynamodb_endpoint() else {
        return;
    };
    let d = Dynamo::new(&endpoint);
    let table = unique("absurd");
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(d.create_lease_table(&table));
    let stream = unique("absurd");
    let rows = [
        ("shardId-000000000000", "lease_expiry"),
        ("shardId-000000000001", "checkpoint"),
    ];
    rt.block_on(d.put_row(
        &table,
        &[
            ("lease_key", s(&format!("{stream}:{}", rows[0].0))),
            ("lease_owner", s("elsewhere")),
            ("lease_expiry", n(u64::MAX - 10)),
            ("lease_counter", n(1)),
        ],
    ));
    rt.block_on(d.put_row(
        &table,
        &[
            ("lease_key", s(&format!("{stream}:{}", rows[1].0))),
            ("checkpoint", s("somewhere")),
            ("lease_counter", n(1)),
        ],
    ));
    let dir = Scratch::new("absurd");
    let config = HostToml::memory()
        .dynamodb_leases(&table, &endpoint)
        .leases("list_every", "200ms")
        .subscription(Subscription::new("sub", &stream, guest("scripted")).create_if_missing(3));
    let running = support::Running::start(&dir, config);
    running.wait_for("the sound shard to be read", |board| {
        board.shard("sub", "shardId-000000000002").get().state == ShardState::Reading
    });
    for (shard, attribute) in rows {
        running.wait_for("the shard to be refused", |board| {
            board.shard("sub", shard).get().state == ShardState::Refused
        });
        let error = running
            .status
            .shard("sub", shard)
            .get()
            .last_error
            .unwrap_or_default();
        assert!(
            error.contains(shard) && error.contains(attribute),
            "the error names the row and the attribute: {error}"
        );
    }
    running.stop();
}

#[test]
fn a_handoff_during_a_closed_shards_last_batch_delivers_its_unanswered_records_and_the_children_start()
 {
    let Some(endpoint) = kinesis_endpoint() else {
        return;
    };
    let k = Kinesis::new(&endpoint);
    let stream = unique("lastbatch");
    k.create(&stream, 1);
    // The parent's last batch: a slow first delivery, then a retry copy (another attempt
    // number, so another call, which the handoff interrupts).
    k.put(&stream, "slow", "sleep:2000");
    let copy = retry_copy("test", &stream, "log:copy");
    k.put(&stream, "copy", copy);
    k.split(&stream, SHARD_0);
    let children: Vec<String> = (0..4).map(|i| format!("child-{i}")).collect();
    for key in &children {
        k.put(&stream, key, format!("log:{key}"));
    }
    let dir = Scratch::new("lastbatch");
    let seen = support::Outcomes::default();
    let config = HostToml::kinesis(&endpoint)
        .set("host", "retry_key", RETRY_KEY)
        .leases("ttl", "2s")
        .leases("renew_every", "300ms")
        .leases("list_every", "200ms")
        .leases("checkpoint_every", "100ms")
        .subscription(
            Subscription::new("test", &stream, guest("scripted"))
                .trim_horizon()
                .poll_interval("100ms")
                .max_attempts(3)
                .dead_letter(&format!("{stream}.dead"))
                .create_if_missing(1),
        );
    let host = support::Running::start_with(&dir, config, |h| h.on_outcome(seen.tap()));
    host.wait_for("the parent to be read", |board| {
        board.shard("test", SHARD_0).get().state == ShardState::Reading
    });
    // Another instance asks for the parent while its last batch runs.
    let key = shardhost::lease::LeaseKey::new(&stream, SHARD_0);
    let row = host.block_on(host.leases.read(&key)).unwrap().unwrap();
    assert!(
        host.block_on(request_handoff(&*host.leases, &row)),
        "the request is written"
    );
    wait_until(
        "the copy and every child record to be handled",
        Duration::from_secs(60),
        || {
            let acked: BTreeSet<String> = seen
                .all()
                .into_iter()
                .filter(|s| s.outcome == shardhost::record::Outcome::Ack)
                .map(|s| s.partition_key)
                .collect();
            acked.contains("copy") && children.iter().all(|c| acked.contains(c))
        },
    );
    host.stop();
}

/// A retry copy (attempt 2) of `data` for `subscription`, as a host of the fleet makes it.
fn retry_copy(subscription: &str, stream: &str, data: &str) -> Vec<u8> {
    use shardhost::testing::envelope::{Header, Kind, Origin};
    let header = Header {
        kind: Kind::Retry,
        subscription: subscription.to_owned(),
        attempt: 2,
        origin: Origin {
            stream: stream.to_owned(),
            shard_id: SHARD_0.to_owned(),
            sequence_number: "1".to_owned(),
            sub_sequence_number: 0,
            partition_key: "copy".to_owned(),
        },
        reason: None,
        handler_version: None,
        data_omitted: None,
    };
    let key = shardhost::testing::envelope::EnvelopeKey::from_secret(RETRY_KEY);
    shardhost::testing::envelope::wrap(&key, &header, data.as_bytes())
}

const RETRY_KEY: &str = "delivery-test-secret";

/// Asks the holder of `row` to hand it over to an instance named `elsewhere`.
async fn request_handoff(
    store: &dyn shardhost::lease::LeaseStore,
    row: &shardhost::lease::Lease,
) -> bool {
    store.request_handoff(row, "elsewhere").await.unwrap()
}
