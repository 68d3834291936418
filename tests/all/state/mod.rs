//! State (`[subscription.state]`): handlers that remember. The shipping example books each
//! shipment once across a restart and across a killed instance (real `shardhost run` processes
//! on kinesis-mock and dynalite, and a carrier that counts bookings); a conditional write raced
//! by two instances has one winner; items carry the grant's expiry; a state table that cannot
//! be reached makes records wait, never settles them; a component that keeps state is refused
//! where no state is granted.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_sdk_dynamodb::types::{KeyType, ScalarAttributeType};
use serde_json::json;
use shardhost::Metrics;
use shardhost::capability::config::{ConfigGrant, ConfigValue};
use shardhost::capability::http::{HttpGrant, Origin};
use shardhost::capability::state::{StateGrant, StateStoreKind};
use shardhost::config::{Limits, WasiGrants};
use shardhost::handler::{CallContext, HandlerFactory, outcomes_per_record};
use shardhost::record::{BatchInfo, Outcome, Record};
use shardhost::testing::Runtime;

use crate::support::dynamo::{Dynamo, n, s};
use crate::support::fleet::{Paused, shardhost};
use crate::support::{
    HttpServer, Scratch, closed_origin, dynamodb_endpoint, dynamodb_fault_endpoint, guest, metric,
    unique,
};

/// A state table (`key` S, HASH) on dynalite.
pub(crate) fn state_table(d: &Dynamo, rt: &tokio::runtime::Runtime) -> String {
    let table = unique("state");
    rt.block_on(d.create_table(&table, &[("key", KeyType::Hash, ScalarAttributeType::S)]));
    table
}

/// A shipment record's data.
pub(crate) fn shipment(id: u64, carrier: &str) -> String {
    json!({"id": id, "address": format!("Main St {id}"), "carrier": carrier}).to_string()
}

mod story;

/// `[subscription.config]` naming the carrier's URL (the shipping example books there).
fn carrier_url(carrier: &HttpServer) -> ConfigGrant {
    let url = ConfigValue {
        value: format!("{}/carrier", carrier.origin()),
        from_env: false,
    };
    ConfigGrant([("carrier_url".to_owned(), url)].into())
}

/// The grants of the handlers called in process (the conformance handler and the shipping
/// example): state as given, HTTP to nowhere.
fn conformance_grants(store: StateStoreKind, ttl: Option<Duration>, namespace: &str) -> WasiGrants {
    WasiGrants::default()
        .with(StateGrant {
            store,
            ttl,
            buckets: Vec::new(),
            namespace: namespace.to_owned(),
            max_in_flight: 16,
            timeout: std::time::Duration::from_secs(2),
            commit: Default::default(),
        })
        .with(HttpGrant {
            allow: vec![Origin::parse("http://127.0.0.1:9").unwrap()],
            timeout: Duration::from_secs(2),
            max_body: 1 << 20,
            max_in_flight: 4,
            ca_file: None,
            allow_private: false,
        })
}

fn dynamo_store(table: &str, endpoint: &str) -> StateStoreKind {
    StateStoreKind::Dynamo {
        table: table.to_owned(),
        endpoint: Some(endpoint.to_owned()),
        region: None,
        test_credentials: true,
    }
}

async fn load(runtime: &Runtime, wasm: &Path, grants: &WasiGrants) -> Arc<dyn HandlerFactory> {
    let limits = Limits {
        timeout: CALL_TIMEOUT,
        ..Limits::default()
    };
    runtime
        .load_file(wasm, limits, grants)
        .await
        .unwrap_or_else(|e| panic!("{}: {e}", wasm.display()))
}

/// The call timeout of the handlers called in process.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// One call: each record's outcome; a failed call (a trap) fails the test.
async fn call(handler: &dyn HandlerFactory, records: Vec<(String, String)>) -> Vec<Outcome> {
    call_counted(handler, records, None).await
}

/// As `call`, counting into `metrics`.
async fn call_counted(
    handler: &dyn HandlerFactory,
    records: Vec<(String, String)>,
    metrics: Option<Arc<Metrics>>,
) -> Vec<Outcome> {
    let ctx = CallContext {
        subscription: Arc::from("state"),
        stream: Arc::from("state"),
        shard_id: Arc::from("shardId-000000000000"),
        publisher: None,
        delivered: None,
        metrics,
        log_budget: Default::default(),
        effects: None,
        pending: None,
    };
    let info = BatchInfo {
        stream: "state".into(),
        shard_id: "shardId-000000000000".into(),
        millis_behind_latest: Some(0),
        attempt: 1,
    };
    let records: Vec<Record> = records
        .into_iter()
        .enumerate()
        .map(|(i, (key, data))| Record {
            partition_key: Arc::from(key.as_str()),
            sequence_number: format!("4959{:052}", i + 1),
            sub_sequence_number: 0,
            approximate_arrival_timestamp: 1_700_000_000_000,
            data: data.into_bytes(),
        })
        .collect();
    let mut instance = handler.instantiate(&ctx).await.unwrap();
    let answer = instance.handle(&info, &records).await.unwrap();
    outcomes_per_record(answer, records.len(), instance.version()).unwrap()
}

/// A `state` command of the conformance handler (tests/conformance/README.md).
fn op(value: serde_json::Value) -> (String, String) {
    ("state".to_owned(), value.to_string())
}

/// Two hosts (two runtimes, two DynamoDB clients) race `set_if_absent` on the same keys:
/// for each key exactly one of them wrote.
#[test]
fn a_conditional_write_raced_by_two_instances_has_exactly_one_winner() {
    let Some(endpoint) = dynamodb_endpoint() else {
        return;
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    let d = Dynamo::new(&endpoint);
    let table = state_table(&d, &rt);
    let grants = conformance_grants(dynamo_store(&table, &endpoint), None, "race/test/");
    let keys: Vec<String> = (0..40).map(|i| format!("shipment-{i}")).collect();
    let wins = rt.block_on(async {
        let (one, two) = (
            Runtime::new(None, false).unwrap(),
            Runtime::new(None, false).unwrap(),
        );
        let (h1, h2) = (
            load(&one, &guest("conformance"), &grants).await,
            load(&two, &guest("conformance"), &grants).await,
        );
        let batch = |who: &str| {
            keys.iter()
                .map(|k| op(json!({"op": "set_if_absent", "key": k, "value": who, "expect": true})))
                .collect::<Vec<_>>()
        };
        let (a, b) = tokio::join!(
            call(h1.as_ref(), batch("one")),
            call(h2.as_ref(), batch("two"))
        );
        a.into_iter().zip(b).collect::<Vec<_>>()
    });
    for (key, (a, b)) in keys.iter().zip(&wins) {
        let won = [a, b].iter().filter(|o| ***o == Outcome::Ack).count();
        assert_eq!(
            won, 1,
            "{key}: {a:?} {b:?} (ack = wrote, drop = found it taken)"
        );
    }
}

/// With `ttl`, every item carries `expires` (seconds since the epoch, for DynamoDB's TTL);
/// an item past it reads as absent before DynamoDB deletes it, may be set again, and a
/// counter past it counts from zero again.
#[test]
fn items_carry_the_grants_expiry_and_expired_ones_read_as_absent() {
    let Some(endpoint) = dynamodb_endpoint() else {
        return;
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    let d = Dynamo::new(&endpoint);
    let table = state_table(&d, &rt);
    let week = Duration::from_secs(7 * 86_400);
    let grants = conformance_grants(dynamo_store(&table, &endpoint), Some(week), "ttl/test/");
    let runtime = Runtime::new(None, false).unwrap();
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    rt.block_on(async {
        let h = load(&runtime, &guest("conformance"), &grants).await;
        let set = op(json!({"op": "set", "key": "k", "value": "v", "expect": null}));
        assert_eq!(call(h.as_ref(), vec![set]).await, [Outcome::Ack]);
        let item = d
            .row_keyed(&table, "key", "ttl/test/default/k")
            .await
            .unwrap();
        let expires: u64 = item["expires"].as_n().unwrap().parse().unwrap();
        assert!(
            (now + week.as_secs()..now + week.as_secs() + 60).contains(&expires),
            "expires {expires}, now {now}"
        );
        // Past its expiry, not yet deleted by DynamoDB.
        d.client
            .put_item()
            .table_name(&table)
            .item("key", s("ttl/test/default/old"))
            .item(
                "value",
                aws_sdk_dynamodb::types::AttributeValue::B(b"stale".to_vec().into()),
            )
            .item("expires", n(now - 10))
            .send()
            .await
            .unwrap();
        // A counter past its expiry: counting starts again.
        d.client
            .put_item()
            .table_name(&table)
            .item("key", s("ttl/test/default/count"))
            .item("count", n(5))
            .item("expires", n(now - 10))
            .send()
            .await
            .unwrap();
        let cases = vec![
            op(json!({"op": "get", "key": "count", "expect": null})),
            op(json!({"op": "increment", "key": "count", "delta": 2, "expect": 2})),
            op(json!({"op": "increment", "key": "count", "delta": 1, "expect": 3})),
            op(json!({"op": "get", "key": "old", "expect": null})),
            op(json!({"op": "set_if_absent", "key": "old", "value": "fresh", "expect": true})),
            op(json!({"op": "get", "key": "old", "expect": "fresh"})),
        ];
        assert_eq!(call(h.as_ref(), cases).await, [Outcome::Ack; 6]);
    });
}

/// The shipping example with its state table unreachable: the booking waits (retry-after),
/// nothing is booked, nothing is settled.
#[test]
fn an_unreachable_state_table_makes_records_wait_and_books_nothing() {
    let carrier = HttpServer::start();
    let mut grants = conformance_grants(dynamo_store("state", &closed_origin()), None, "x/y/");
    let origin = Origin::parse(&carrier.origin()).unwrap();
    grants.update(|http: &mut HttpGrant| http.allow = vec![origin]);
    grants.insert(carrier_url(&carrier));
    let rt = tokio::runtime::Runtime::new().unwrap();
    let runtime = Runtime::new(None, false).unwrap();
    let outcomes = rt.block_on(async {
        let h = load(&runtime, &guest("ship"), &grants).await;
        call(h.as_ref(), vec![("order-1".to_owned(), shipment(1, "dhl"))]).await
    });
    assert!(
        matches!(outcomes[..], [Outcome::RetryAfter(_)]),
        "{outcomes:?}"
    );
    assert_eq!(carrier.requests(), 0, "booked without state");
}

/// A state table that stops answering (its dynalite paused): the first state call ends at the
/// grant's timeout, the rest of the call's at once, and the handler answers retry-after for
/// every record of a batch that would need 12 × 1 s of waiting in a 10 s call; without those
/// bounds the errors would come at the call's deadline and the call would die as a trap.
#[test]
fn a_stalled_state_table_leaves_the_handler_time_to_answer() {
    let Some((endpoint, pid, _turn)) = dynamodb_fault_endpoint() else {
        return;
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    let d = Dynamo::new(&endpoint);
    let table = state_table(&d, &rt);
    let carrier = HttpServer::start();
    let mut grants = conformance_grants(dynamo_store(&table, &endpoint), None, "stall/ship/");
    grants.update(|state: &mut StateGrant| state.timeout = Duration::from_secs(1));
    let origin = Origin::parse(&carrier.origin()).unwrap();
    grants.update(|http: &mut HttpGrant| http.allow = vec![origin]);
    grants.insert(carrier_url(&carrier));
    let runtime = Runtime::new(None, false).unwrap();
    let h = rt.block_on(load(&runtime, &guest("ship"), &grants));
    let metrics = Arc::new(Metrics::new());
    let outcomes = {
        let _paused = Paused::new(pid);
        let records = (1..=12)
            .map(|id| (format!("order-{id}"), shipment(id, "dhl")))
            .collect();
        rt.block_on(call_counted(h.as_ref(), records, Some(metrics.clone())))
    };
    assert!(
        outcomes.iter().all(|o| matches!(o, Outcome::RetryAfter(_))),
        "{outcomes:?}"
    );
    assert_eq!(carrier.requests(), 0, "booked without state");
    let text = metrics.encode();
    assert_eq!(
        metric(
            &text,
            "shardhost_state_calls_total",
            &["op=\"get\"", "result=\"timeout\""]
        ),
        12.0,
        "{text}"
    );
}

/// Every state call is counted by operation and result, and timed; a refused bucket, a value
/// too large and a conditional write that did not hold each have their own result.
#[test]
fn state_calls_are_counted_by_operation_and_result() {
    let grants = conformance_grants(StateStoreKind::Memory, None, "metrics/test/");
    let rt = tokio::runtime::Runtime::new().unwrap();
    let runtime = Runtime::new(None, false).unwrap();
    let metrics = Arc::new(Metrics::new());
    let outcomes = rt.block_on(async {
        let h = load(&runtime, &guest("conformance"), &grants).await;
        let ops = vec![
            op(json!({"op": "set_if_absent", "key": "k", "value": "a", "expect": true})),
            op(json!({"op": "set_if_absent", "key": "k", "value": "b", "expect": false})),
            op(json!({"op": "get", "bucket": "secret", "key": "k", "expect": {"error": "access-denied"}})),
            op(json!({"op": "set", "key": "big", "value_size": 358_401, "expect": {"error": "other"}})),
            op(json!({"op": "increment", "key": "n", "delta": 2, "expect": 2})),
        ];
        call_counted(h.as_ref(), ops, Some(metrics.clone())).await
    });
    assert_eq!(outcomes, [Outcome::Ack; 5]);
    let text = metrics.encode();
    let calls = |op: &str, result: &str| {
        let labels = [format!("op=\"{op}\""), format!("result=\"{result}\"")];
        let labels: Vec<&str> = labels.iter().map(String::as_str).collect();
        metric(&text, "shardhost_state_calls_total", &labels)
    };
    assert_eq!(calls("set_if_absent", "ok"), 1.0, "{text}");
    assert_eq!(calls("set_if_absent", "conflict"), 1.0, "{text}");
    assert_eq!(calls("open", "refused"), 1.0, "{text}");
    assert_eq!(calls("set", "refused"), 1.0, "{text}");
    assert_eq!(calls("increment", "ok"), 1.0, "{text}");
    assert!(
        metric(
            &text,
            "shardhost_state_call_seconds_count",
            &["op=\"increment\""]
        ) >= 1.0,
        "{text}"
    );
}

/// A component importing wasi:keyvalue is refused, naming the grant it needs, by `check`
/// (and so `run` and `deploy`, which validate the same way) and by `invoke` without --state.
#[test]
fn a_handler_that_keeps_state_is_refused_where_no_state_is_granted() {
    let dir = Scratch::new("state-refused");
    let config = format!(
        "[kinesis]\nendpoint = \"memory\"\n[[subscription]]\nname = \"ship\"\nstream = \"s\"\n\
         handler = \"{}\"\n[subscription.http]\nallow = [\"http://127.0.0.1:9\"]\n",
        guest("ship").display()
    );
    let path = dir.write("shardhost.toml", &config);
    let out = shardhost(&["check", path.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    for needle in [
        "wasi:keyvalue/store@0.2.0-draft",
        "grants no state",
        "[subscription.state]",
    ] {
        assert!(stderr.contains(needle), "`{needle}` missing: {stderr}");
    }
    let records = dir.write("r.ndjson", "{\"partition_key\":\"k\",\"data\":\"x\"}\n");
    let out = shardhost(&[
        "invoke",
        guest("ship").to_str().unwrap(),
        "--records",
        records.to_str().unwrap(),
        "--allow-http",
        "http://127.0.0.1:9",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("--state"), "{stderr}");
    let ok = dir.write("ok.toml", config + "[subscription.state]\n");
    let out = shardhost(&["check", ok.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("state: memory, buckets default"),
        "{stdout}"
    );
}

/// A component that needs two grants and has neither hears of both at once.
#[tokio::test]
async fn every_missing_grant_is_named_at_once() {
    let runtime = Runtime::new(None, false).unwrap();
    let refused = runtime
        .load_file(
            &guest("conformance"),
            Limits::default(),
            &WasiGrants::default(),
        )
        .await
        .err()
        .expect("no grants, no load")
        .to_string();
    for needle in [
        "wasi:http/outgoing-handler",
        "grants no HTTP",
        "wasi:keyvalue/store@0.2.0-draft",
        "shardhost:handler/conditional@0.1.2",
        "grants no state",
    ] {
        assert!(refused.contains(needle), "{needle}: {refused}");
    }
}

/// A counter never passes 2^64 − 1: the increment that would is refused and writes nothing, in
/// memory and in DynamoDB (which would store the larger number).
#[test]
fn a_counter_never_passes_the_largest_u64() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut stores = vec![StateStoreKind::Memory];
    if let Some(endpoint) = dynamodb_endpoint() {
        let table = state_table(&Dynamo::new(&endpoint), &rt);
        stores.push(dynamo_store(&table, &endpoint));
    }
    let runtime = Runtime::new(None, false).unwrap();
    for store in stores {
        let grants = conformance_grants(store.clone(), None, "max/test/");
        let outcomes = rt.block_on(async {
            let h = load(&runtime, &guest("conformance"), &grants).await;
            let ops = vec![
                op(json!({"op": "increment", "key": "n", "delta": u64::MAX, "expect": u64::MAX})),
                op(json!({"op": "increment", "key": "n", "delta": 1, "expect": {"error": "other"}})),
                op(json!({"op": "get", "key": "n", "expect": u64::MAX.to_string()})),
            ];
            call(h.as_ref(), ops).await
        });
        assert_eq!(outcomes, [Outcome::Ack; 3], "{store:?}");
    }
}

/// Two subscriptions (or two services) on one store never see each other's keys: each grant's
/// keys live under its own `SERVICE/SUBSCRIPTION/`, in memory and in one DynamoDB table.
#[test]
fn two_subscriptions_never_see_each_others_keys() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut stores = vec![StateStoreKind::Memory];
    if let Some(endpoint) = dynamodb_endpoint() {
        let table = state_table(&Dynamo::new(&endpoint), &rt);
        stores.push(dynamo_store(&table, &endpoint));
    }
    let runtime = Runtime::new(None, false).unwrap();
    for store in stores {
        let namespace =
            |service: &str, sub: &str| shardhost::capability::state::namespace(service, sub);
        let ship = conformance_grants(store.clone(), None, &namespace("shipping", "ship"));
        let audit = conformance_grants(store.clone(), None, &namespace("shipping", "audit"));
        let other = conformance_grants(store.clone(), None, &namespace("shipping/ship", "x"));
        let outcomes = rt.block_on(async {
            let wasm = guest("conformance");
            let (ship, audit, other) = (
                load(&runtime, &wasm, &ship).await,
                load(&runtime, &wasm, &audit).await,
                load(&runtime, &wasm, &other).await,
            );
            let set = op(json!({"op": "set", "key": "k", "value": "ship's", "expect": null}));
            let mut got = call(ship.as_ref(), vec![set]).await;
            for h in [&audit, &other] {
                let get = op(json!({"op": "get", "key": "k", "expect": null}));
                let claim =
                    op(json!({"op": "set_if_absent", "key": "k", "value": "mine", "expect": true}));
                got.extend(call(h.as_ref(), vec![get, claim]).await);
            }
            let mine = op(json!({"op": "get", "key": "k", "expect": "ship's"}));
            got.extend(call(ship.as_ref(), vec![mine]).await);
            got
        });
        assert_eq!(outcomes, [Outcome::Ack; 6], "{store:?}");
    }
}
