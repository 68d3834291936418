//! What a host is before it reads: its owner id, its lease store (and, with a DynamoDB table,
//! the fleet's rows beside the leases), and the key its retry copies and dead letters are
//! authenticated with.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::path::Path;
use std::sync::Arc;

use super::StartError;
use crate::config::{Config, LeaseStoreKind};
use crate::envelope::{EnvelopeKey, EnvelopeKeys};
use crate::fleet_table::FleetTable;
use crate::lease::{DynamoLeaseStore, DynamoOptions, LeaseStore, MemoryLeaseStore};
use crate::wasm::Runtime;

/// The owner id of this process: the configured one, else hostname + a random suffix.
pub fn owner_id(config: &Config) -> String {
    if let Some(id) = &config.host.owner_id {
        return id.clone();
    }
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "shardhost".to_owned());
    let suffix = RandomState::new().hash_one(std::process::id()) as u32;
    format!("{host}-{suffix:08x}")
}

/// Where a host keeps its leases, and what authenticates its envelopes.
pub(super) struct Stores {
    pub leases: Arc<dyn LeaseStore>,
    /// With a DynamoDB table: the fleet's rows beside the leases (desired versions, roster,
    /// rollouts, shadows).
    pub fleet: Option<FleetTable>,
    pub envelopes: EnvelopeKeys,
}

/// The configured lease store, checked (a DynamoDB table must exist with the right key), and the
/// key that authenticates envelopes.
pub(super) async fn lease_store(
    config: &Config,
    cache: Option<&Path>,
) -> Result<Stores, StartError> {
    match dynamo_table(config).await? {
        None => Ok(Stores {
            leases: Arc::new(MemoryLeaseStore::new()),
            fleet: None,
            envelopes: envelope_keys(config, cache, None, Make::IfMissing).await?,
        }),
        Some(store) => {
            let fleet = FleetTable::beside(&store);
            let envelopes = envelope_keys(config, cache, Some(&fleet), Make::IfMissing).await?;
            Ok(Stores {
                leases: Arc::new(store),
                fleet: Some(fleet),
                envelopes,
            })
        }
    }
}

/// The configured DynamoDB lease table, checked; `None` with the memory store.
pub async fn dynamo_table(config: &Config) -> Result<Option<DynamoLeaseStore>, StartError> {
    let LeaseStoreKind::Dynamo {
        table,
        endpoint,
        region,
        test_credentials,
    } = &config.leases.store
    else {
        return Ok(None);
    };
    let store = DynamoLeaseStore::connect(DynamoOptions {
        table: table.clone(),
        endpoint: endpoint.clone(),
        region: region.clone(),
        test_credentials: *test_credentials,
        legacy_stream: config.leases.legacy_stream.clone(),
    })
    .await;
    store.check_table().await.map_err(StartError::Leases)?;
    Ok(Some(store))
}

/// The keys that authenticate this fleet's retry copies and dead letters, found as a host of
/// `config` finds them, for tools that only read (`shardhost dead-letters`): they make no key,
/// in the lease table or the cache directory. Where a host would make one, nothing was ever
/// sealed under it yet, so a key of this process stands in: nothing opens under it.
pub async fn fleet_envelope_keys(config: &Config) -> Result<EnvelopeKeys, StartError> {
    let cache = Runtime::cache_dir_of(&config.host);
    let table = dynamo_table(config).await?;
    let fleet = table.as_ref().map(FleetTable::beside);
    envelope_keys(config, cache.as_deref(), fleet.as_ref(), Make::Never).await
}

/// Whether a missing key is made (a host) or not (a tool that only reads).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Make {
    IfMissing,
    Never,
}

/// See [`crate::envelope::key`]: the configured secret; else the lease table's key (said loudly:
/// whoever reads the table can forge copies); else the cache directory's key file. Then the
/// previous keys.
async fn envelope_keys(
    config: &Config,
    cache: Option<&Path>,
    table: Option<&FleetTable>,
    make: Make,
) -> Result<EnvelopeKeys, StartError> {
    let previous = EnvelopeKey::configured_previous(&config.host.retry_keys_previous)
        .map_err(StartError::EnvelopeKey)?;
    let mut keys = previous.keys;
    if previous.lease_table {
        keys.extend(lease_table_key(table).await?);
    }
    let current = match current_key(config, cache, table, make).await? {
        Some(key) => key,
        None => {
            tracing::debug!("no envelope key was made yet: nothing made under one can be opened");
            EnvelopeKey::random().map_err(StartError::EnvelopeKey)?
        }
    };
    let keys = EnvelopeKeys::new(current, keys);
    let previous: Vec<String> = keys.previous().iter().map(EnvelopeKey::id).collect();
    tracing::info!(
        key_id = keys.current().id(), previous = ?previous,
        "retry copies and dead letters are made under key {}", keys.current().id()
    );
    Ok(keys)
}

/// The key kept in the lease table, named as a previous key: for a fleet moving from it to a
/// configured key (copies made under it are opened meanwhile; whoever reads the table can forge
/// them meanwhile too, hence the warning).
async fn lease_table_key(table: Option<&FleetTable>) -> Result<Option<EnvelopeKey>, StartError> {
    let Some(store) = table else {
        tracing::warn!(
            "retry_keys_previous names \"lease-table\", but the leases are not in a DynamoDB table: ignored"
        );
        return Ok(None);
    };
    let key = store
        .stored_envelope_key()
        .await
        .map_err(StartError::Leases)?
        .map(EnvelopeKey::from_bytes);
    if key.is_some() {
        tracing::warn!(
            table = store.table_name(),
            "copies made under the key kept in the lease table are still opened (retry_keys_previous): \
             whoever can read the table can forge them until \"lease-table\" is taken out"
        );
    }
    Ok(key)
}

/// The current key; `None` when it would have to be made and `make` says not to.
async fn current_key(
    config: &Config,
    cache: Option<&Path>,
    table: Option<&FleetTable>,
    make: Make,
) -> Result<Option<EnvelopeKey>, StartError> {
    if let Some(key) = EnvelopeKey::configured(config.host.retry_key.as_deref()) {
        return Ok(Some(key));
    }
    if let Some(store) = table {
        let bytes = match make {
            Make::IfMissing => Some(store.envelope_key().await.map_err(StartError::Leases)?),
            Make::Never => store
                .stored_envelope_key()
                .await
                .map_err(StartError::Leases)?,
        };
        let Some(bytes) = bytes else {
            return Ok(None);
        };
        tracing::warn!(
            table = store.table_name(),
            "retry copies and dead letters are authenticated with a key kept in the lease table: \
             whoever can read the table can forge retry copies (set [host] retry_key or \
             SHARDHOST_RETRY_KEY on every instance; docs/concepts/retries.md)"
        );
        return Ok(Some(EnvelopeKey::from_bytes(bytes)));
    }
    match (cache, make) {
        (Some(dir), Make::IfMissing) => EnvelopeKey::in_dir(dir)
            .map(Some)
            .map_err(StartError::EnvelopeKey),
        (Some(dir), Make::Never) => {
            EnvelopeKey::stored_in_dir(dir).map_err(StartError::EnvelopeKey)
        }
        (None, Make::Never) => Ok(None),
        (None, Make::IfMissing) => {
            tracing::warn!(
                "no cache directory: retry copies are authenticated with a key of this process only (set [host] retry_key)"
            );
            EnvelopeKey::random()
                .map(Some)
                .map_err(StartError::EnvelopeKey)
        }
    }
}
