//! One conformance suite (`tests/conformance/`) for the three handler languages: the shipping
//! example in Rust, Python and JavaScript gives the same outcome for every shipping case, and
//! the conformance handler in each language keeps the contract (each and all, retry-after,
//! binary and 1 MiB data, 500-record batches, attempts, publish and seek refused, a handler
//! that raises, an answer of the wrong shape). The Python and JavaScript components are built
//! with their pinned toolchains by their own build scripts (a no-op when up to date).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use base64::Engine as _;
use serde_json::Value;
use shardhost::capability::config::{ConfigGrant, ConfigValue};
use shardhost::capability::http::{HttpGrant, Origin};
use shardhost::capability::state::{StateGrant, StateStoreKind};
use shardhost::config::{Limits, WasiGrants};
use shardhost::handler::{CallContext, HandlerFactory, outcomes_per_record};
use shardhost::record::{BatchInfo, Outcome, Record};
use shardhost::state::Commit;
use shardhost::state::commit::Pending;
use shardhost::testing::Runtime;

use aws_sdk_dynamodb::types::{KeyType, ScalarAttributeType};

use crate::support::dynamo::Dynamo;
use crate::support::{HttpServer, closed_origin, dynamodb_endpoint, guest, root, unique};

#[test]
fn the_rust_handlers_give_every_conformance_outcome() {
    conform(Language::Rust);
}

#[test]
fn the_python_handlers_give_every_conformance_outcome() {
    conform(Language::Python);
}

#[test]
fn the_javascript_handlers_give_every_conformance_outcome() {
    conform(Language::JavaScript);
}

/// The JavaScript SDK's default build compiles ahead of time (weval); `--no-aot` builds keep
/// the interpreter only, and must answer the same.
#[test]
fn the_javascript_handlers_built_without_aot_give_every_conformance_outcome() {
    conform(Language::JavaScriptNoAot);
}

#[derive(Clone, Copy, Debug)]
enum Language {
    Rust,
    Python,
    JavaScript,
    JavaScriptNoAot,
}

impl Language {
    /// The shipping example and the conformance handler, built.
    fn components(self) -> (PathBuf, PathBuf) {
        match self {
            Language::Rust => (guest("ship"), guest("conformance")),
            Language::Python => (
                built("examples/shipping/python", "ship.wasm"),
                built("tests/conformance/python", "conformance.wasm"),
            ),
            Language::JavaScript => (
                built("examples/shipping/js", "ship.wasm"),
                built("tests/conformance/js", "conformance.wasm"),
            ),
            Language::JavaScriptNoAot => (
                built_js_no_aot("examples/shipping/js/app.js", "ship.wasm"),
                built_js_no_aot("tests/conformance/js/app.js", "conformance.wasm"),
            ),
        }
    }
}

/// Runs `DIR/build` (once per process) and answers `DIR/OUTPUT`.
pub(crate) fn built(dir: &str, output: &str) -> PathBuf {
    static BUILT: OnceLock<Mutex<Vec<String>>> = OnceLock::new();
    let dir = root().join(dir);
    let done = BUILT.get_or_init(Default::default);
    let mut done = done.lock().unwrap_or_else(|p| p.into_inner());
    let key = dir.display().to_string();
    if !done.contains(&key) {
        let status = Command::new(dir.join("build"))
            .current_dir(&dir)
            .status()
            .expect("the build script runs");
        assert!(status.success(), "{}/build failed", dir.display());
        done.push(key);
    }
    let path = dir.join(output);
    assert!(path.exists(), "{} was not built", path.display());
    path
}

/// Builds `APP` with the JavaScript SDK's `componentize --no-aot` into target/js-no-aot/.
fn built_js_no_aot(app: &str, output: &str) -> PathBuf {
    let out = root().join("target").join("js-no-aot").join(output);
    let status = Command::new(root().join("guest-sdk/js/componentize"))
        .arg("--no-aot")
        .arg(root().join(app))
        .arg(&out)
        .status()
        .expect("componentize runs");
    assert!(status.success(), "componentize --no-aot {app} failed");
    out
}

fn conform(language: Language) {
    // One language at a time: each compiles two big components on every core, and four at
    // once on a small machine starve each other's calls of their timeouts.
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let (shipping, conformance_wasm) = language.components();
    let rt = tokio::runtime::Runtime::new().unwrap();
    // Compiled Python and JavaScript components are big (~35 MiB) and slow to compile: keep
    // them across runs.
    let cache = root().join("target").join("conformance-cache");
    let runtime = Runtime::new(Some(cache), false).unwrap();
    let server = HttpServer::start();
    let places = Places {
        base: server.origin(),
        other: "http://not-allowed.example".to_owned(),
        closed: closed_origin(),
    };
    let mut wrong = Vec::new();
    rt.block_on(async {
        let plain = places.grants(None);
        let shipping_plain = load(&runtime, &shipping, &plain).await;
        wrong.extend(shipping_cases("shipping.ndjson", shipping_plain.as_ref(), &places).await);
        let booking = places.grants(Some(format!("{}/carrier", places.base)));
        let shipping_booking = load(&runtime, &shipping, &booking).await;
        let booked = shipping_cases("shipping-booked.ndjson", shipping_booking.as_ref(), &places);
        wrong.extend(booked.await);
        let conformance = load(&runtime, &conformance_wasm, &plain).await;
        wrong.extend(contract_calls("contract.ndjson", conformance.as_ref(), &places, None).await);
        wrong.extend(contract_calls("http.ndjson", conformance.as_ref(), &places, None).await);
        wrong.extend(contract_calls("state.ndjson", conformance.as_ref(), &places, None).await);
        // The same cases committed with the checkpoint: each call's writes kept by the shard
        // and committed after it, as a worker does when the call's records all settle.
        let committed = places.committed(plain.clone());
        let conformance_committed = load(&runtime, &conformance_wasm, &committed).await;
        let shard = Arc::new(Pending::default());
        let cases = contract_calls(
            "state.ndjson",
            conformance_committed.as_ref(),
            &places,
            Some(&shard),
        );
        wrong.extend(
            cases
                .await
                .into_iter()
                .map(|c| format!("(with-checkpoint) {c}")),
        );
        // The same cases on DynamoDB (dynalite): every operation as the table store does it.
        if let Some(endpoint) = dynamodb_endpoint() {
            let table = unique("conformance-state");
            let d = Dynamo::new(&endpoint);
            d.create_table(&table, &[("key", KeyType::Hash, ScalarAttributeType::S)])
                .await;
            let on_table = places.state_in(plain.clone(), &table, &endpoint);
            let conformance = load(&runtime, &conformance_wasm, &on_table).await;
            let cases = contract_calls("state.ndjson", conformance.as_ref(), &places, None).await;
            wrong.extend(cases.into_iter().map(|c| format!("(dynamodb) {c}")));
        }
        let unreachable = places.unreachable_state(plain);
        let conformance = load(&runtime, &conformance_wasm, &unreachable).await;
        let cases = contract_calls(
            "state-unreachable.ndjson",
            conformance.as_ref(),
            &places,
            None,
        );
        wrong.extend(cases.await);
    });
    assert!(
        wrong.is_empty(),
        "{language:?}: {} outcome(s) differ from tests/conformance:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

/// The origins `http.ndjson` names: `{base}` (the test server, allowed), `{other}` (not
/// allowed) and `{closed}` (allowed, nothing listening).
struct Places {
    base: String,
    other: String,
    closed: String,
}

impl Places {
    /// What `tests/conformance/README.md` says the subscription grants, with `carrier_url`
    /// when given.
    fn grants(&self, carrier_url: Option<String>) -> WasiGrants {
        let origin = |o: &str| {
            let (host, port) = o["http://".len()..].split_once(':').unwrap();
            Origin {
                scheme: "http".into(),
                host: host.into(),
                port: port.parse().unwrap(),
            }
        };
        let value = |v: &str| ConfigValue {
            value: v.to_owned(),
            from_env: false,
        };
        let mut config = BTreeMap::from([
            ("greeting".to_owned(), value("hello")),
            ("empty".to_owned(), value("")),
        ]);
        if let Some(url) = carrier_url {
            config.insert("carrier_url".to_owned(), value(&url));
        }
        let namespace = if config.contains_key("carrier_url") {
            "booking"
        } else {
            "plain"
        };
        WasiGrants::default()
            .with(StateGrant {
                store: StateStoreKind::Memory,
                ttl: None,
                buckets: vec!["orders".to_owned()],
                namespace: format!("conformance/{namespace}/"),
                max_in_flight: 16,
                timeout: std::time::Duration::from_secs(2),
                commit: Default::default(),
            })
            .with(HttpGrant {
                allow: vec![origin(&self.base), origin(&self.closed)],
                timeout: Duration::from_secs(2),
                max_body: 64 * 1024,
                max_in_flight: 16,
                ca_file: None,
                allow_private: false,
            })
            .with(ConfigGrant(config))
    }

    /// `grants` with its state committed with the checkpoint (in memory).
    fn committed(&self, mut grants: WasiGrants) -> WasiGrants {
        grants.update(|state: &mut StateGrant| {
            state.commit = Commit::WithCheckpoint;
            state.namespace = "conformance/committed/".to_owned();
        });
        grants
    }

    /// `grants` with its state in a DynamoDB table where nothing listens.
    fn unreachable_state(&self, grants: WasiGrants) -> WasiGrants {
        self.state_in(grants, "unreachable", &self.closed)
    }

    /// `grants` with its state in the DynamoDB table `table` at `endpoint`.
    fn state_in(&self, mut grants: WasiGrants, table: &str, endpoint: &str) -> WasiGrants {
        grants.update(|state: &mut StateGrant| {
            state.store = StateStoreKind::Dynamo {
                table: table.to_owned(),
                endpoint: Some(endpoint.to_owned()),
                region: None,
                test_credentials: true,
            };
        });
        grants
    }

    /// A case file's text with the places filled in.
    fn fill(&self, text: &str) -> String {
        text.replace("{base}", &self.base)
            .replace("{other}", &self.other)
            .replace("{closed}", &self.closed)
    }
}

/// The call timeout of every conformance call (`http.ndjson` counts on it).
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

async fn load(runtime: &Runtime, path: &Path, grants: &WasiGrants) -> Arc<dyn HandlerFactory> {
    let limits = Limits {
        timeout: CALL_TIMEOUT,
        ..Limits::default()
    };
    runtime
        .load_file(path, limits, grants)
        .await
        .unwrap_or_else(|e| panic!("{}: the handler does not load: {e}", path.display()))
}

/// Every shipping case alone, then all of them in one batch: the outcomes `expect` says.
async fn shipping_cases(file: &str, handler: &dyn HandlerFactory, places: &Places) -> Vec<String> {
    let cases = lines(file, places);
    let records: Vec<Record> = cases
        .iter()
        .enumerate()
        .map(|(i, c)| record(i, c))
        .collect();
    let expected: Vec<String> = cases.iter().map(|c| text(&c["expect"])).collect();
    let mut wrong = Vec::new();
    let mut compare = |how: &str, i: usize, got: &str| {
        if got != expected[i] {
            let why = text(&cases[i]["why"]);
            wrong.push(format!(
                "{file} case {} ({why}), {how}: expected {}, got {got}",
                i + 1,
                expected[i]
            ));
        }
    };
    for (i, r) in records.iter().enumerate() {
        match call(handler, std::slice::from_ref(r), 1).await {
            Ok(got) => compare("alone", i, &got[0]),
            Err(e) => compare("alone", i, &format!("a failed call: {e}")),
        }
    }
    match call(handler, &records, 1).await {
        Ok(got) => got
            .iter()
            .enumerate()
            .for_each(|(i, g)| compare("in one batch", i, g)),
        Err(e) => wrong.push(format!("{file} in one batch: the call failed: {e}")),
    }
    wrong
}

/// Every call of `contract.ndjson`, on one instance (a fresh one after a failed call, as the
/// host does).
async fn contract_calls(
    file: &str,
    handler: &dyn HandlerFactory,
    places: &Places,
    shard: Option<&Arc<Pending>>,
) -> Vec<String> {
    let mut wrong = Vec::new();
    for c in lines(file, places) {
        let name = text(&c["name"]);
        let records: Vec<Record> = c["records"]
            .as_array()
            .unwrap()
            .iter()
            .enumerate()
            .map(|(i, r)| record(i, r))
            .collect();
        let attempt = c["attempt"].as_u64().unwrap_or(1) as u32;
        let got = call_on(handler, &records, attempt, shard).await;
        match (&c["expect"], got) {
            (Value::Array(expected), Ok(got)) => {
                let expected: Vec<String> = expected.iter().map(text).collect();
                if expected != got {
                    wrong.push(format!("{name}: expected {expected:?}, got {got:?}"));
                }
            }
            (Value::Object(e), Err(error)) => {
                let needle = text(&e["error"]);
                if !error.contains(&needle) {
                    wrong.push(format!("{name}: the error should say `{needle}`: {error}"));
                }
            }
            (expected, got) => wrong.push(format!("{name}: expected {expected}, got {got:?}")),
        }
    }
    wrong
}

/// One call of the handler: each record's outcome (`retry-after:N` for a delay), or the
/// call's error.
async fn call(
    handler: &dyn HandlerFactory,
    records: &[Record],
    attempt: u32,
) -> Result<Vec<String>, String> {
    call_on(handler, records, attempt, None).await
}

/// [`call`] as a shard committing its state with the checkpoint (`shard`, its pending writes)
/// makes it: the call's writes are kept and committed when every outcome settles.
async fn call_on(
    handler: &dyn HandlerFactory,
    records: &[Record],
    attempt: u32,
    shard: Option<&Arc<Pending>>,
) -> Result<Vec<String>, String> {
    let answer = call_once(handler, records, attempt, shard).await;
    if let Some(pending) = shard {
        let settled = answer
            .as_ref()
            .is_ok_and(|a| a.iter().all(|o| o == "ack" || o == "drop"));
        let span = match (records.first(), records.last()) {
            (Some(first), Some(last)) if settled => Some((first.position(), last.position())),
            _ => None,
        };
        pending.end_batch(span);
        if let (Some(set), Some(store)) = (pending.to_commit(None), pending.store()) {
            store
                .apply_commit(&set)
                .expect("the memory store commits")
                .expect("one shard: no conflict");
            pending.committed(&set);
        }
    }
    answer
}

async fn call_once(
    handler: &dyn HandlerFactory,
    records: &[Record],
    attempt: u32,
    shard: Option<&Arc<Pending>>,
) -> Result<Vec<String>, String> {
    let ctx = CallContext {
        subscription: Arc::from("conformance"),
        stream: Arc::from("conformance"),
        shard_id: Arc::from("shardId-000000000000"),
        publisher: None,
        delivered: None,
        metrics: None,
        log_budget: Default::default(),
        effects: None,
        pending: shard.cloned(),
    };
    let info = BatchInfo {
        stream: "conformance".into(),
        shard_id: "shardId-000000000000".into(),
        millis_behind_latest: Some(0),
        attempt,
    };
    let mut instance = handler.instantiate(&ctx).await.map_err(|e| e.to_string())?;
    let answer = instance
        .handle(&info, records)
        .await
        .and_then(|a| outcomes_per_record(a, records.len(), instance.version()))
        .map_err(|e| e.to_string())?;
    Ok(answer
        .into_iter()
        .map(|o| match o {
            Outcome::Ack => "ack".to_owned(),
            Outcome::Drop => "drop".to_owned(),
            Outcome::Retry => "retry".to_owned(),
            Outcome::RetryAfter(ms) => format!("retry-after:{ms}"),
        })
        .collect())
}

/// The `i`th record of a batch, from a case: `partition_key` and `data` (a string is its
/// text, any other JSON its compact JSON), `data_base64` or `data_fill: [byte, count]`.
fn record(i: usize, case: &Value) -> Record {
    let data = if let Some(b64) = case["data_base64"].as_str() {
        base64::engine::general_purpose::STANDARD
            .decode(b64)
            .unwrap()
    } else if let Some(fill) = case["data_fill"].as_array() {
        vec![fill[0].as_u64().unwrap() as u8; fill[1].as_u64().unwrap() as usize]
    } else {
        match &case["data"] {
            Value::String(s) => s.clone().into_bytes(),
            other => serde_json::to_vec(other).unwrap(),
        }
    };
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    Record {
        partition_key: Arc::from(text(&case["partition_key"])),
        sequence_number: format!("4959{:052}", i + 1),
        sub_sequence_number: 0,
        approximate_arrival_timestamp: now_ms,
        data,
    }
}

fn lines(file: &str, places: &Places) -> Vec<Value> {
    let path = root().join("tests/conformance").join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    places
        .fill(&text)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn text(v: &Value) -> String {
    v.as_str().unwrap_or_default().to_owned()
}
