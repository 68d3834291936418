//! What the fleet's roster costs in DynamoDB capacity units, on dynalite (which answers
//! `ReturnConsumedCapacity` by DynamoDB's rules: a write is 1 WCU per KB of the item, a Scan
//! page 1 RCU per 4 KB read, half when eventually consistent), for fleets of 3, 100 and 1 000
//! instances whose heartbeats are written through `Fleet::beat` (each instance runs two
//! subscriptions; its heartbeat is about 420 bytes of JSON):
//! 1. one heartbeat write: its row put again with `ReturnConsumedCapacity = TOTAL`;
//! 2. one roster read (`status`, each `deploy --wait` poll): the Scan `Fleet::report` sends,
//!    sent again with `ReturnConsumedCapacity`, over the roster rows alone, then with 1 000 lease
//!    rows beside them, then (1 000 instances) with a 17.4 MiB component stored twice (desired
//!    and previous, as a Python handler's deploy leaves them); and the wall time of
//!    `Fleet::report` on dynalite;
//! 3. for comparison, what the single roster row of the earlier design would cost, computed from
//!    the same heartbeats' sizes (that design fails past 400 KB).
//!
//! `tests/stack cargo bench -p shardhost --bench roster`

use std::time::Instant;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, AttributeValue, BillingMode, KeySchemaElement, KeyType,
    ReturnConsumedCapacity, ScalarAttributeType, Select, TableStatus,
};
use shardhost::fleet_table::FleetTable;
use shardhost::lease::{DynamoLeaseStore, DynamoOptions, now_ms};
use shardhost::status::fleet::{Heartbeat, Running};
use shardhost::testing::Fleet;
use shardhost_test_support::median;

#[allow(dead_code)]
mod emulators;

const SERVICE: &str = "orders-service";
const FLEETS: [usize; 3] = [3, 100, 1_000];
const SHARDS: usize = 1_000;
/// Heartbeats per instance per hour at the default `[fleet] heartbeat = "10s"`.
const BEATS_PER_HOUR: f64 = 360.0;
/// The Python example handler's component (BENCHMARKS.md, issue 15).
const COMPONENT_BYTES: usize = 17_400 * 1_048_576 / 1_000;

fn main() {
    let (_, endpoint) = emulators::endpoints();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let client = emulators::dynamo_client(&endpoint);
    println!(
        "| instances | heartbeat row | WCU per beat | WCU per instance per hour | roster read: \
         roster rows only | + {SHARDS} lease rows | Fleet::report on dynalite | single-row \
         design: WCU per beat, RCU per read |"
    );
    for n in FLEETS {
        let table = format!("bench-roster-{n}-{}", std::process::id());
        rt.block_on(create_table(&client, &table));
        let store = FleetTable::beside(&rt.block_on(DynamoLeaseStore::connect(
            DynamoOptions::local(&table, &endpoint),
        )));
        let fleet = Fleet::new(store.clone(), SERVICE);
        let beats: Vec<Heartbeat> = (0..n).map(heartbeat).collect();
        for beat in &beats {
            rt.block_on(fleet.beat(beat)).unwrap();
        }
        let (row_bytes, wcu) = rt.block_on(rewrite(&client, &table, &beats[0].owner));
        let roster_only = rt.block_on(scan(&client, &table));
        rt.block_on(lease_rows(&client, &table));
        let with_leases = rt.block_on(scan(&client, &table));
        let took = median(
            (0..5)
                .map(|_| {
                    let started = Instant::now();
                    let report = rt.block_on(fleet.report(&["orders".to_owned()])).unwrap();
                    assert_eq!(report.instances.len(), n);
                    started.elapsed().as_secs_f64() * 1_000.0
                })
                .collect(),
        );
        let (single_wcu, single_rcu) = single_row(&beats);
        println!(
            "| {n} | {row_bytes} B | {wcu} | {} | {} | {} | {took:.0} ms | {single_wcu}, {single_rcu} |",
            wcu * BEATS_PER_HOUR,
            roster_only.render(),
            with_leases.render(),
        );
        if n == *FLEETS.last().unwrap() {
            rt.block_on(components(&store));
            let with_component = rt.block_on(scan(&client, &table));
            let started = Instant::now();
            rt.block_on(fleet.report(&["orders".to_owned()])).unwrap();
            println!(
                "{n} instances + {SHARDS} lease rows + a {:.1} MiB component stored twice: {}, \
                 Fleet::report {:.0} ms",
                COMPONENT_BYTES as f64 / 1_048_576.0,
                with_component.render(),
                started.elapsed().as_secs_f64() * 1_000.0
            );
        }
    }
}

/// The heartbeat of instance `i` as a production instance writes it: default-style owner id,
/// an admin address, two subscriptions.
fn heartbeat(i: usize) -> Heartbeat {
    let running = |version: char, generation| Running {
        version: version.to_string().repeat(64),
        generation,
        shards: 4,
        refused: None,
        canary: None,
        shadow: None,
        refused_trials: Vec::new(),
    };
    let now = now_ms();
    Heartbeat {
        owner: format!("ip-10-0-{}-{}-{:08x}", i / 250, i % 250, i * 7919),
        admin: Some(format!("http://10.0.{}.{}:9750", i / 250, i % 250)),
        started_ms: now - 3_600_000,
        beat_ms: now,
        beat_every_ms: 10_000,
        subscriptions: [
            ("orders".to_owned(), running('a', 12)),
            ("payments".to_owned(), running('b', 7)),
        ]
        .into(),
    }
}

async fn create_table(client: &Client, table: &str) {
    client
        .create_table()
        .table_name(table)
        .attribute_definitions(
            AttributeDefinition::builder()
                .attribute_name("lease_key")
                .attribute_type(ScalarAttributeType::S)
                .build()
                .unwrap(),
        )
        .key_schema(
            KeySchemaElement::builder()
                .attribute_name("lease_key")
                .key_type(KeyType::Hash)
                .build()
                .unwrap(),
        )
        .billing_mode(BillingMode::PayPerRequest)
        .send()
        .await
        .unwrap();
    // Set-up (not measured): dynalite creates the table in the background.
    loop {
        let out = client.describe_table().table_name(table).send().await;
        let status = out.ok().and_then(|o| o.table()?.table_status().cloned());
        if status == Some(TableStatus::Active) {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// Puts `owner`'s row (as `Fleet::beat` wrote it) again; answers its size as DynamoDB counts
/// it (attribute names and values) and the WCU the write consumed.
async fn rewrite(client: &Client, table: &str, owner: &str) -> (usize, f64) {
    let key = format!("#shardhost#instance#{SERVICE}#{owner}");
    let got = client
        .get_item()
        .table_name(table)
        .key("lease_key", AttributeValue::S(key))
        .send()
        .await
        .unwrap();
    let item = got.item().unwrap().clone();
    let bytes = item.iter().map(|(k, v)| k.len() + value_bytes(v)).sum();
    let put = client
        .put_item()
        .table_name(table)
        .set_item(Some(item))
        .return_consumed_capacity(ReturnConsumedCapacity::Total)
        .send()
        .await
        .unwrap();
    (
        bytes,
        put.consumed_capacity().unwrap().capacity_units().unwrap(),
    )
}

fn value_bytes(v: &AttributeValue) -> usize {
    match v {
        AttributeValue::S(s) => s.len(),
        // DynamoDB: about one byte per two significant digits, plus one.
        AttributeValue::N(n) => n.len().div_ceil(2) + 1,
        AttributeValue::B(b) => b.as_ref().len(),
        _ => 0,
    }
}

/// What one roster read consumed.
struct ScanCost {
    rcu: f64,
    pages: u32,
    instances: usize,
}

impl ScanCost {
    fn render(&self) -> String {
        format!(
            "{} RCU ({} page{}, {} instances)",
            self.rcu,
            self.pages,
            if self.pages == 1 { "" } else { "s" },
            self.instances
        )
    }
}

/// The Scan `Fleet::report` sends (the same filter, projection and consistency), with
/// `ReturnConsumedCapacity = TOTAL`, summed over its pages.
async fn scan(client: &Client, table: &str) -> ScanCost {
    let mut cost = ScanCost {
        rcu: 0.0,
        pages: 0,
        instances: 0,
    };
    let mut start = None;
    loop {
        let out = client
            .scan()
            .table_name(table)
            .filter_expression("begins_with(lease_key, :prefix) AND expires_at > :now")
            .projection_expression("heartbeat")
            .expression_attribute_values(
                ":prefix",
                AttributeValue::S(format!("#shardhost#instance#{SERVICE}#")),
            )
            .expression_attribute_values(":now", AttributeValue::N((now_ms() / 1_000).to_string()))
            .select(Select::SpecificAttributes)
            .return_consumed_capacity(ReturnConsumedCapacity::Total)
            .set_exclusive_start_key(start)
            .send()
            .await
            .unwrap();
        cost.pages += 1;
        cost.instances += out.items().len();
        cost.rcu += out
            .consumed_capacity()
            .and_then(|c| c.capacity_units())
            .unwrap_or_default();
        start = out.last_evaluated_key().cloned();
        if start.is_none() {
            return cost;
        }
    }
}

/// [`SHARDS`] lease rows as a running fleet leaves them (owner, expiry, counter, checkpoint).
async fn lease_rows(client: &Client, table: &str) {
    for i in 0..SHARDS {
        let s = |v: String| AttributeValue::S(v);
        let n = |v: u64| AttributeValue::N(v.to_string());
        client
            .put_item()
            .table_name(table)
            .item("lease_key", s(format!("orders-stream:shardId-{i:012}")))
            .item("lease_owner", s(format!("ip-10-0-0-{}-{:08x}", i % 250, i)))
            .item("lease_expiry", n(now_ms() + 10_000))
            .item("lease_counter", n(48_213 + i as u64))
            .item(
                "checkpoint",
                s(format!("4964{:052}", 1_000_000_007u64 * i as u64)),
            )
            .send()
            .await
            .unwrap();
    }
}

/// A component of [`COMPONENT_BYTES`] stored twice (two versions), as a deploy leaves the
/// desired and the previous version in the table.
async fn components(store: &FleetTable) {
    for version in ["1", "2"] {
        let bytes = vec![version.as_bytes()[0]; COMPONENT_BYTES];
        let version = version.repeat(64);
        store
            .put_component(SERVICE, "orders", &version, &bytes)
            .await
            .unwrap();
    }
}

/// The WCU per heartbeat and the RCU per (strongly consistent) read of the earlier design's one
/// roster row holding every heartbeat, from the row's size (`None` past DynamoDB's 400 KB).
fn single_row(beats: &[Heartbeat]) -> (String, String) {
    let key = format!("#shardhost#fleet#{SERVICE}");
    let bytes: usize = "lease_key".len()
        + key.len()
        + beats
            .iter()
            .map(|b| "instance#".len() + b.owner.len() + serde_json::to_string(b).unwrap().len())
            .sum::<usize>();
    if bytes > 400 * 1_024 {
        return (format!("fails ({bytes} B > 400 KB)"), "-".to_owned());
    }
    (
        bytes.div_ceil(1_024).to_string(),
        bytes.div_ceil(4_096).to_string(),
    )
}
