//! State committed with the checkpoint (`[subscription.state] commit = "with-checkpoint"`), on
//! kinesis-mock and moto's DynamoDB (the one emulator with `TransactWriteItems`): `shardhost
//! run` processes count orders per SKU (`tests/guests/sku-count`) while instances are killed
//! (-9) and restarted and shards change hands; the counts equal the records put, exactly, and
//! the same run with immediate writes counts records delivered again twice. A key two shards
//! write conflicts and ends exact; a record whose writes do not fit in one commit is named.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use crate::support::fleet::{Instance, Paused, Stack, stack_on};
use crate::support::{
    HostToml, Scratch, dynamodb_txn_endpoint, dynamodb_txn_fault_endpoint, kinesis_endpoint,
    unique, wait_until_else,
};

mod conflicts;

/// A stream on kinesis-mock, the lease table and a state table on moto.
struct Counting {
    st: Stack,
    state: String,
    dir: Scratch,
    /// What was put: orders per SKU.
    truth: BTreeMap<String, u64>,
    /// The last sequence number put to each shard.
    last: HashMap<String, String>,
    /// The pid of the DynamoDB emulator, when the test may pause it.
    pausable: Option<u32>,
}

impl Counting {
    fn new(shards: i32, tag: &str) -> Option<Counting> {
        Self::on(dynamodb_txn_endpoint()?, None, shards, tag)
    }

    /// On the moto that this test may pause.
    fn pausable(shards: i32, tag: &str) -> Option<Counting> {
        let (endpoint, pid) = dynamodb_txn_fault_endpoint()?;
        Self::on(endpoint, Some(pid), shards, tag)
    }

    fn on(dynamodb: String, pausable: Option<u32>, shards: i32, tag: &str) -> Option<Counting> {
        let st = stack_on(kinesis_endpoint()?, dynamodb, shards);
        let state = unique("state");
        st.rt.block_on(st.d.create_table(
            &state,
            &[(
                "key",
                aws_sdk_dynamodb::types::KeyType::Hash,
                aws_sdk_dynamodb::types::ScalarAttributeType::S,
            )],
        ));
        Some(Counting {
            st,
            state,
            dir: Scratch::new(tag),
            truth: BTreeMap::new(),
            last: HashMap::new(),
            pausable,
        })
    }

    /// Instance `owner` counting with `commit`, the guest's `config` added.
    fn config(&self, owner: &str, commit: &str, config: &[(&str, &str)]) -> HostToml {
        let mut sub = self
            .st
            .subscription("sku_count")
            .trim_horizon()
            .batch(50)
            .set("read_limit", 200)
            .nested("state", "table", self.state.as_str())
            .nested("state", "commit", commit);
        for (k, v) in config {
            sub = sub.nested("config", k, *v);
        }
        self.st
            .host(owner)
            .leases("ttl", "3s")
            .leases("renew_every", "1s")
            .leases("list_every", "1s")
            .leases("checkpoint_every", "2s")
            .subscription(sub)
    }

    fn start(&self, owner: &str, commit: &str) -> Instance {
        Instance::start(&self.dir, owner, self.config(owner, commit, &[]))
    }

    /// Puts `n` orders, SKUs `sku-0` .. `sku-6` in turn, under random-ish partition keys.
    fn put_orders(&mut self, from: usize, n: usize) {
        let records: Vec<(String, Vec<u8>)> = (from..from + n)
            .map(|i| {
                let sku = format!("sku-{}", i % 7);
                *self.truth.entry(sku.clone()).or_default() += 1;
                let data = serde_json::json!({"id": i, "sku": sku}).to_string();
                (format!("customer-{}", i * 7919 % 1009), data.into_bytes())
            })
            .collect();
        for (shard, seq) in self.st.k.put_many(&self.st.stream, &records) {
            let newer = self
                .last
                .get(&shard)
                .is_none_or(|s| s.len() < seq.len() || (s.len() == seq.len() && *s < seq));
            if newer {
                self.last.insert(shard, seq);
            }
        }
    }

    /// Orders counted per SKU: every `count/…/SKU` item of the state table, summed.
    fn counted(&self) -> BTreeMap<String, u64> {
        let mut counted = BTreeMap::new();
        for row in self.st.rt.block_on(self.st.d.rows(&self.state)) {
            let key = row.get("key").and_then(|k| k.as_s().ok()).cloned();
            let count = row
                .get("count")
                .and_then(|c| c.as_n().ok())
                .and_then(|c| c.parse::<u64>().ok());
            if let (Some(key), Some(count)) = (key, count)
                && key.contains("/count/")
            {
                let sku = key.rsplit('/').next().unwrap_or_default().to_owned();
                *counted.entry(sku).or_default() += count;
            }
        }
        counted
    }

    /// Whether every shard's checkpoint stands at the last record put to it.
    fn all_checkpointed(&self) -> bool {
        self.last.iter().all(|(shard, seq)| {
            self.st
                .checkpoint(shard)
                .is_some_and(|cp| cp.split('/').next() == Some(seq.as_str()))
        })
    }

    /// Kills (-9) an instance that has handled records since it started, the `turn`th one
    /// looked at first (waiting for one to have), and starts it again.
    fn kill_one_handling(
        &self,
        instances: &mut [Instance],
        owners: &[&str],
        turn: usize,
        commit: &str,
    ) {
        let n = instances.len();
        let mut victim = None;
        wait_until_else(
            "an instance handling records",
            Duration::from_secs(60),
            || {
                victim = (0..n)
                    .map(|i| (turn + i) % n)
                    .find(|&k| !instances[k].outcomes().is_empty());
                victim.is_some()
            },
            String::new,
        );
        let k = victim.expect("found above");
        instances[k].kill9();
        instances[k] = self.start(owners[k], commit);
    }

    /// Puts 40 × `chunk` orders while three instances count them, one of them killed (-9) and
    /// restarted after every 8 puts (and two more at the end), and the table paused for 2 s halfway when it may be; then waits
    /// until every shard is checkpointed at its end.
    fn count_through_kills(&mut self, commit: &str, chunk: usize) -> BTreeMap<String, u64> {
        let owners = ["a", "b", "c"];
        let mut instances: Vec<Instance> = owners.iter().map(|o| self.start(o, commit)).collect();
        let mut kills = 0;
        let mut paused: Option<(Paused, Instant)> = None;
        for at in 0..40 {
            if at == 20
                && let Some(pid) = self.pausable
            {
                paused = Some((Paused::new(pid), Instant::now()));
            }
            if paused
                .as_ref()
                .is_some_and(|(_, since)| since.elapsed() >= Duration::from_secs(2))
            {
                paused = None;
            }
            self.put_orders(at * chunk, chunk);
            if at % 8 == 7 {
                self.kill_one_handling(&mut instances, &owners, kills, commit);
                kills += 1;
            }
        }
        if let Some((_, since)) = &paused {
            // The outage lasts its 2 s even when the puts were quicker.
            std::thread::sleep(Duration::from_secs(2).saturating_sub(since.elapsed()));
        }
        drop(paused);
        // Two more while the last records are read.
        for k in 0..2 {
            self.kill_one_handling(&mut instances, &owners, kills + k, commit);
        }
        wait_until_else(
            "every shard checkpointed at its last record",
            Duration::from_secs(180),
            || self.all_checkpointed(),
            || {
                let rows: Vec<_> = self
                    .last
                    .keys()
                    .map(|s| (s.clone(), self.st.checkpoint(s)))
                    .collect();
                format!(
                    "checkpoints {rows:?}, last put {:?}, counted {:?}",
                    self.last,
                    self.counted()
                )
            },
        );
        drop(instances);
        self.counted()
    }
}

/// The run: 20 000 orders over 4 shards and 3 instances, instances killed (-9) and
/// restarted 7 times, shards handed off as they come back, the table (leases and state) paused for 2 s:
/// the counts committed with the checkpoint equal the orders put, per SKU, exactly.
#[test]
fn counts_committed_with_the_checkpoint_equal_the_records_put_across_kill_9_and_a_paused_table() {
    let Some(mut run) = Counting::pausable(4, "committed-kill9") else {
        return;
    };
    let counted = run.count_through_kills("with-checkpoint", 500);
    assert_eq!(counted, run.truth, "counted per SKU vs put");
}

/// The same run with writes that reach the store at once (4 000 orders: each write is a
/// request, and moto answers one at a time): records delivered again after a kill are counted
/// twice.
#[test]
fn immediate_writes_count_records_delivered_again_after_kill_9_twice() {
    let Some(mut run) = Counting::new(4, "immediate-kill9") else {
        return;
    };
    let counted = run.count_through_kills("immediate", 100);
    let (got, put): (u64, u64) = (counted.values().sum(), run.truth.values().sum());
    assert!(
        got > put,
        "immediate writes over a kill -9 counted {got} of {put}: {counted:?}"
    );
    eprintln!(
        "immediate writes counted {got} orders of {put} put ({} twice)",
        got - put
    );
}
