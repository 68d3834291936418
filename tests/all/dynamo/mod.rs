//! The DynamoDB lease store against dynalite (`tests/stack` starts it): conditional writes on
//! owner and counter, the opened mark, handoff requests, release, the exact row layout
//! ruststream-kinesis 0.7 writes, earlier-version rows through `legacy_stream`, the table check at
//! start, and the fleet's rows beside the leases. Every test has its own table.
//!
//! Each test is a scenario taking the emulator's endpoint (in `leases`, `legacy`, `table_check`,
//! `fleet_rows`), listed once in [`every_scenario!`]: this module runs them all against
//! dynalite, `dynamo_txn::lease_store` against moto.

pub mod fleet_rows;
pub mod leases;
pub mod legacy;
pub mod table_check;

use std::collections::BTreeMap;
use std::time::Duration;

use crate::support::dynamo::{Dynamo, Row};
use crate::support::unique;
use aws_sdk_dynamodb::types::AttributeValue;
use shardhost::lease::{Checkpoint, DynamoLeaseStore, DynamoOptions, LeaseError};
use shardhost::record::Position;

/// One test per scenario, in the module that invokes it, each run against the endpoint that
/// `$endpoint()` answers (skipped when the stack did not start it).
macro_rules! every_scenario {
    ($endpoint:path) => {
        $crate::dynamo::every_scenario!(@tests $endpoint;
            leases::a_held_lease_cannot_be_taken_until_it_expires,
            leases::the_same_owner_regains_its_lease_at_once,
            leases::a_checkpoint_lands_only_while_its_writer_holds_the_lease,
            leases::release_keeps_the_checkpoint_and_frees_the_shard,
            leases::the_opened_mark_is_written_once_and_kept_by_later_writes,
            leases::a_handoff_request_keeps_the_row_its_holders_then_reserves_it_for_the_requester,
            leases::rows_have_exactly_the_documented_attributes_and_types,
            leases::a_malformed_row_is_a_malformed_error_naming_the_key_and_attribute,
            leases::a_lease_write_applied_whose_answer_was_lost_is_not_taken_for_a_lost_lease,
            legacy::a_legacy_row_is_adopted_for_the_named_stream,
            legacy::a_legacy_row_without_legacy_stream_refuses_the_shard,
            legacy::a_legacy_row_of_another_stream_is_ignored,
            table_check::a_missing_table_is_refused_with_the_create_command,
            table_check::a_table_with_the_wrong_key_schema_is_refused,
            table_check::a_lease_store_without_describe_table_permission_still_starts,
            fleet_rows::a_component_larger_than_an_item_is_stored_in_parts_beside_the_leases_and_read_back_whole,
            fleet_rows::a_desired_version_written_over_a_row_read_earlier_is_refused,
        );
    };
    (@tests $endpoint:path; $($module:ident::$name:ident),* $(,)?) => {
        $(
            #[tokio::test]
            async fn $name() {
                if let Some(endpoint) = $endpoint() {
                    $crate::dynamo::$module::$name(endpoint).await
                }
            }
        )*
    };
}
pub(crate) use every_scenario;

every_scenario!(crate::support::dynamodb_endpoint);

const TTL: Duration = Duration::from_secs(60);
const SHARD: &str = "shardId-000000000000";

/// A new lease table and a raw client on it.
async fn table(endpoint: &str, tag: &str) -> (Dynamo, String) {
    let raw = Dynamo::new(endpoint);
    let table = unique(tag);
    raw.create_lease_table(&table).await;
    (raw, table)
}

async fn store(endpoint: &str, table: &str, legacy_stream: Option<&str>) -> DynamoLeaseStore {
    let options = DynamoOptions {
        legacy_stream: legacy_stream.map(str::to_owned),
        ..DynamoOptions::local(table, endpoint)
    };
    DynamoLeaseStore::connect(options).await
}

fn at(seq: &str, sub: u32) -> Checkpoint {
    Checkpoint::At(Position::new(seq, sub))
}

fn lost<T: std::fmt::Debug>(r: Result<T, LeaseError>) -> bool {
    matches!(r, Err(LeaseError::Lost { .. }))
}

/// A row's attributes as (name, type, value) text, for comparing rows.
fn shape(row: &Row) -> BTreeMap<String, (&'static str, String)> {
    row.iter()
        .map(|(k, v)| {
            let tv = match v {
                AttributeValue::S(s) => ("S", s.clone()),
                AttributeValue::N(n) => ("N", n.clone()),
                other => ("other", format!("{other:?}")),
            };
            (k.clone(), tv)
        })
        .collect()
}

fn attr<'a>(row: &'a Row, name: &str) -> &'a str {
    match &row[name] {
        AttributeValue::S(v) | AttributeValue::N(v) => v,
        other => panic!("{name} is {other:?}"),
    }
}
