//! Real `shardhost` processes on kinesis-mock and dynalite: start, kill -9, interrupt, and read
//! what each one logged (JSON lines).

use std::fmt::Display;
use std::fs::File;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::dynamo::{Dynamo, Row};
use super::kinesis::Kinesis;
use super::{
    HostToml, Scratch, Subscription, dynamodb_endpoint, guest, kinesis_endpoint, unique,
    wait_until_else,
};

/// One host process; its JSON log goes to a file the test reads.
pub struct Instance {
    pub child: Child,
    pub log: PathBuf,
}

impl Instance {
    /// Starts `shardhost run` on `config` with info logs (and every outcome, at debug).
    pub fn start(dir: &Scratch, name: &str, config: impl Display) -> Instance {
        let path = dir.write(&format!("{name}.toml"), config.to_string());
        let log = dir.0.join(format!("{name}.log"));
        let child = Command::new(env!("CARGO_BIN_EXE_shardhost"))
            .args(["--log-format", "json", "run"])
            .arg(&path)
            .env("SHARDHOST_LOG", "info,shardhost::dispatch=debug")
            .stdout(Stdio::null())
            .stderr(File::create(&log).unwrap())
            .spawn()
            .unwrap();
        Instance { child, log }
    }

    pub fn text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn lines(&self) -> Vec<serde_json::Value> {
        self.text()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// (shard, message) of every line the handler logged, in order; the shard is the span the
    /// line was written in.
    pub fn handled(&self) -> Vec<(String, String)> {
        self.lines()
            .into_iter()
            .filter(|v| v["target"] == "shardhost::guest")
            .map(|v| {
                (
                    v["span"]["shard"].as_str().unwrap_or_default().to_owned(),
                    v["fields"]["message"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned(),
                )
            })
            .collect()
    }

    /// (partition key, outcome) of every record the host settled, in order.
    pub fn outcomes(&self) -> Vec<(String, String)> {
        self.lines()
            .into_iter()
            .filter(|v| v["fields"]["partition_key"].is_string())
            .map(|v| {
                let f = &v["fields"];
                let message = f["message"].as_str().unwrap_or_default();
                (
                    f["partition_key"].as_str().unwrap_or_default().to_owned(),
                    message.split(':').next().unwrap_or_default().to_owned(),
                )
            })
            .collect()
    }

    /// Every record this instance answered ack or drop, in order.
    pub fn settled(&self) -> Vec<SettledLine> {
        self.lines()
            .into_iter()
            .filter(|v| {
                v["fields"]["sequence_number"].is_string() && v["fields"]["handler"].is_string()
            })
            .map(|v| {
                let f = &v["fields"];
                let text = |x: &serde_json::Value| x.as_str().unwrap_or_default().to_owned();
                SettledLine {
                    shard: text(&v["span"]["shard"]),
                    sequence: text(&f["sequence_number"]),
                    handler: text(&f["handler"]),
                    outcome: text(&f["message"]),
                }
            })
            .collect()
    }

    pub fn logged(&self, needle: &str) -> bool {
        self.text().contains(needle)
    }

    pub fn wait_for(&self, what: &str, timeout: Duration, pred: impl Fn(&Instance) -> bool) {
        wait_until_else(
            what,
            timeout,
            || pred(self),
            || format!("log:\n{}", self.text()),
        );
    }

    /// Whether the process is still running.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGINT, then waits for the exit code.
    pub fn interrupt(&mut self) -> Option<i32> {
        signal(self.child.id(), "INT");
        self.child.wait().unwrap().code()
    }
}

/// One record an instance settled, from its debug log line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SettledLine {
    pub shard: String,
    pub sequence: String,
    /// The first 12 hex digits of the handler version that answered.
    pub handler: String,
    /// `ack` or `drop`.
    pub outcome: String,
}

/// Runs the `shardhost` command line to its end.
pub fn shardhost(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_shardhost"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

impl Drop for Instance {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// Sends a signal (`STOP`, `CONT`, `INT`, ...) to a process.
pub fn signal(pid: u32, name: &str) {
    let status = Command::new("kill")
        .args([&format!("-{name}"), &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success(), "kill -{name} {pid}");
}

/// A paused process (`kill -STOP`), resumed when dropped.
pub struct Paused(pub u32);

impl Paused {
    pub fn new(pid: u32) -> Paused {
        signal(pid, "STOP");
        Paused(pid)
    }
}

impl Drop for Paused {
    fn drop(&mut self) {
        signal(self.0, "CONT");
    }
}

/// A fresh stream on kinesis-mock and a fresh lease table on dynalite, for one test.
pub struct Stack {
    pub kinesis: String,
    pub dynamodb: String,
    pub k: Kinesis,
    pub d: Dynamo,
    pub rt: tokio::runtime::Runtime,
    pub stream: String,
    pub table: String,
}

/// A stack with a stream of `shards` shards; `None` (skipped) without the emulators.
pub fn stack(shards: i32) -> Option<Stack> {
    Some(stack_on(kinesis_endpoint()?, dynamodb_endpoint()?, shards))
}

/// A stack with a stream of `shards` shards on these emulators.
pub fn stack_on(kinesis: String, dynamodb: String, shards: i32) -> Stack {
    let k = Kinesis::new(&kinesis);
    let d = Dynamo::new(&dynamodb);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let stream = unique("stream");
    let table = unique("leases");
    k.create(&stream, shards);
    rt.block_on(d.create_lease_table(&table));
    Stack {
        kinesis,
        dynamodb,
        k,
        d,
        rt,
        stream,
        table,
    }
}

impl Stack {
    /// Instance `owner`'s host: the stack's stream and its lease table at `dynamodb`.
    pub fn host_on(&self, owner: &str, dynamodb: &str) -> HostToml {
        HostToml::kinesis(&self.kinesis)
            .owner(owner)
            .dynamodb_leases(&self.table, dynamodb)
    }

    /// Instance `owner`'s host on the stack's stream and lease table.
    pub fn host(&self, owner: &str) -> HostToml {
        self.host_on(owner, &self.dynamodb)
    }

    /// Subscription `test` of the stack's stream, running the guest `handler`, polling every
    /// 100 ms.
    pub fn subscription(&self, handler: &str) -> Subscription {
        Subscription::new("test", &self.stream, guest(handler)).poll_interval("100ms")
    }

    /// Instance `owner` running the guest `handler`.
    pub fn config(&self, owner: &str, handler: &str) -> HostToml {
        self.host(owner).subscription(self.subscription(handler))
    }

    /// The lease row of one shard of the stream.
    pub fn row(&self, shard: &str) -> Option<Row> {
        self.rt
            .block_on(self.d.row(&self.table, &format!("{}:{shard}", self.stream)))
    }

    pub fn owner(&self, shard: &str) -> Option<String> {
        self.row(shard)?
            .get("lease_owner")
            .and_then(|v| v.as_s().ok())
            .cloned()
    }

    pub fn checkpoint(&self, shard: &str) -> Option<String> {
        self.row(shard)?
            .get("checkpoint")
            .and_then(|v| v.as_s().ok())
            .cloned()
    }
}
