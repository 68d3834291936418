//! The metric families as Prometheus sees them: names and help texts.

use prometheus_client::registry::Registry;

use super::Metrics;

impl Metrics {
    /// What handlers answer, how long their calls take, which version runs.
    pub(super) fn register_handler_metrics(&self, registry: &mut Registry) {
        registry.register(
            "records",
            "Records handled, by subscription, shard and outcome (a trapped record counts as retry)",
            self.records.clone(),
        );
        registry.register(
            "records_failed",
            "Records whose handler call failed (a trap, a timeout, a limit, a wrong answer, an instance that did not start), by subscription and shard; records_total counts them as retry too",
            self.records_failed.clone(),
        );
        registry.register(
            "handler_call_seconds",
            "Duration of handler calls",
            self.call_seconds.clone(),
        );
        registry.register(
            "handler_traps",
            "Handler calls that failed, by kind (trap, timeout, memory, fuel, wrong-answer, instantiate)",
            self.traps.clone(),
        );
        registry.register(
            "handler_version_info",
            "The handler version (sha256 of the component) a subscription runs: 1 for the current one",
            self.handler_version.clone(),
        );
        registry.register(
            "handler_swaps",
            "Handler swaps (deploy, rollback, watch), by result (ok, refused)",
            self.swaps.clone(),
        );
    }

    /// Reading shards and keeping their leases and checkpoints.
    pub(super) fn register_shard_metrics(&self, registry: &mut Registry) {
        registry.register(
            "millis_behind_latest",
            "How far the last read of a shard was behind the tip of the stream, in ms",
            self.millis_behind.clone(),
        );
        registry.register(
            "held_since_timestamp_seconds",
            "Since when (Unix time) this instance holds the record that stops a shard's checkpoint (a retry answer or a failed call, held until it settles); no sample while none is held",
            self.held_since.clone(),
        );
        registry.register(
            "leases_held",
            "Shard leases this instance holds",
            self.leases_held.clone(),
        );
        registry.register(
            "lease_renewal_failures",
            "Lease renewals that failed (each fences its shard)",
            self.renewal_failures.clone(),
        );
        registry.register(
            "checkpoint_write_failures",
            "Checkpoint writes the lease store failed (each tried again while the lease is valid)",
            self.checkpoint_failures.clone(),
        );
        registry.register(
            "checkpoint_writes",
            "Checkpoints written to the lease store",
            self.checkpoint_writes.clone(),
        );
        registry.register(
            "reads",
            "Reads of a shard (GetRecords calls) that answered, empty or not",
            self.reads.clone(),
        );
        registry.register(
            "read_records",
            "Records per read (KPL user records counted one by one)",
            self.read_records.clone(),
        );
        registry.register(
            "fleet_table_requests",
            "Lease-table requests of the fleet machinery (desired versions, component bytes, heartbeats), by kind (read, write)",
            self.fleet_requests.clone(),
        );
        registry.register(
            "read_throttles",
            "Reads of a shard the stream service refused for its read limit (ProvisionedThroughputExceeded)",
            self.read_throttles.clone(),
        );
    }

    /// Retries, dead letters, and what was stopped at a limit.
    pub(super) fn register_containment_metrics(&self, registry: &mut Registry) {
        registry.register(
            "retry_copies",
            "Retry copies published under a retry cap (max_attempts)",
            self.retry_copies.clone(),
        );
        registry.register(
            "retry_copies_unclaimed",
            "Retry copies read that name a subscription this host does not run (renamed or removed): skipped",
            self.retry_copies_unclaimed.clone(),
        );
        registry.register(
            "dead_letters",
            "Records sent to the dead-letter stream after their last attempt",
            self.dead_letters.clone(),
        );
        registry.register(
            "envelopes_rejected",
            "Records that looked like retry copies but were not made by this fleet for this subscription and stream: one claiming this subscription that no key of the host authenticates is dead-lettered (held without a cap), any other is handled as an ordinary record or skipped",
            self.envelopes_rejected.clone(),
        );
        registry.register(
            "contained",
            "Containment events: a handler, a record or a client stopped at a limit (by event)",
            self.contained.clone(),
        );
    }
}
