//! The check at start: the lease table exists and is keyed by `lease_key` (S) alone.

use std::time::Duration;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::error::{DisplayErrorContext, ProvideErrorMetadata};
use aws_sdk_dynamodb::types::{KeyType, ScalarAttributeType, TableDescription, TableStatus};

use super::row::KEY;
use crate::lease::LeaseError;

/// How long the check waits for a table that is still being created.
const CREATING_WAIT: Duration = Duration::from_secs(60);

/// Checks that `table` exists, is usable, and has exactly the key schema of the lease table.
pub(super) async fn check(
    client: &Client,
    table: &str,
    endpoint: Option<&str>,
) -> Result<(), LeaseError> {
    let deadline = tokio::time::Instant::now() + CREATING_WAIT;
    loop {
        let Some(description) = describe(client, table, endpoint).await? else {
            // The seeds' policy grants GetItem and UpdateItem only: without DescribeTable the
            // table is checked by its first use instead.
            tracing::warn!(
                table,
                "cannot check the lease table at start: DescribeTable is denied; going on (grant \
                 dynamodb:DescribeTable for a clear error when the table is missing or wrong)"
            );
            return Ok(());
        };
        check_key_schema(table, &description, endpoint)?;
        match description.table_status() {
            None | Some(TableStatus::Active) | Some(TableStatus::Updating) => return Ok(()),
            Some(TableStatus::Creating) if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(200)).await
            }
            Some(status) => {
                return Err(LeaseError::Refused(format!(
                    "lease table `{table}` is {status}, not ACTIVE: shardhost cannot keep leases in it"
                )));
            }
        }
    }
}

/// The table's description; `None` when this identity may not describe it.
async fn describe(
    client: &Client,
    table: &str,
    endpoint: Option<&str>,
) -> Result<Option<TableDescription>, LeaseError> {
    match client.describe_table().table_name(table).send().await {
        Ok(out) => out.table().cloned().map(Some).ok_or_else(|| {
            LeaseError::Store(format!(
                "describe lease table `{table}`: the answer holds no table"
            ))
        }),
        Err(e) if e.code() == Some("AccessDeniedException") => Ok(None),
        Err(e)
            if e.as_service_error()
                .is_some_and(|s| s.is_resource_not_found_exception()) =>
        {
            Err(LeaseError::Refused(format!(
                "lease table `{table}` does not exist. It is infrastructure, like the stream: \
                 create it once (Terraform, CloudFormation, or the AWS CLI), e.g.\n  {}",
                create_command(table, endpoint)
            )))
        }
        Err(e) => Err(LeaseError::Store(format!(
            "describe lease table `{table}`: {}",
            e.as_service_error()
                .and_then(|s| s.message())
                .map(str::to_owned)
                .unwrap_or_else(|| DisplayErrorContext(&e).to_string())
        ))),
    }
}

/// Refuses a table whose key schema is not exactly one HASH key `lease_key` of type S.
fn check_key_schema(
    table: &str,
    description: &TableDescription,
    endpoint: Option<&str>,
) -> Result<(), LeaseError> {
    let keys = description.key_schema();
    let type_of = |name: &str| {
        description
            .attribute_definitions()
            .iter()
            .find(|d| d.attribute_name() == name)
            .map(|d| d.attribute_type().clone())
    };
    let right = matches!(keys, [k] if k.attribute_name() == KEY
        && *k.key_type() == KeyType::Hash
        && type_of(KEY) == Some(ScalarAttributeType::S));
    if right {
        return Ok(());
    }
    let found = keys
        .iter()
        .map(|k| {
            let ty = type_of(k.attribute_name());
            format!(
                "{} ({}, {})",
                k.attribute_name(),
                k.key_type().as_str(),
                ty.as_ref().map_or("?", |t| t.as_str())
            )
        })
        .collect::<Vec<_>>()
        .join(", ");
    Err(LeaseError::Refused(format!(
        "lease table `{table}` has the key schema [{found}]; a lease table has exactly one \
         string partition key, [{KEY} (HASH, S)], and no sort key. Use a table created with\n  {}",
        create_command("NAME", endpoint)
    )))
}

/// The AWS CLI command that creates a lease table.
fn create_command(table: &str, endpoint: Option<&str>) -> String {
    let mut command = format!(
        "aws dynamodb create-table --table-name {table} \
         --attribute-definitions AttributeName={KEY},AttributeType=S \
         --key-schema AttributeName={KEY},KeyType=HASH --billing-mode PAY_PER_REQUEST"
    );
    if let Some(endpoint) = endpoint {
        command.push_str(" --endpoint-url ");
        command.push_str(endpoint);
    }
    command
}
