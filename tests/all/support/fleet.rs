//! Real `shardhost` processes on kinesis-mock and dynalite: start, kill -9, interrupt, and read
//! what each one logged (JSON lines).

use std::fs::File;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::dynamo::{Dynamo, Row};
use super::kinesis::Kinesis;
use super::{Scratch, dynamodb_endpoint, kinesis_endpoint, unique};

/// One host process; its JSON log goes to a file the test reads.
pub struct Instance {
    pub child: Child,
    pub log: PathBuf,
}

impl Instance {
    /// Starts `shardhost run` on `config` with info logs (and every outcome, at debug).
    pub fn start(dir: &Scratch, name: &str, config: &str) -> Instance {
        let path = dir.write(&format!("{name}.toml"), config);
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

    /// (shard, message) of every line the handler logged, in order.
    pub fn handled(&self) -> Vec<(String, String)> {
        self.lines()
            .into_iter()
            .filter(|v| v["target"] == "shardhost::guest")
            .map(|v| {
                let f = &v["fields"];
                (
                    f["shard"].as_str().unwrap_or_default().to_owned(),
                    f["message"].as_str().unwrap_or_default().to_owned(),
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

    /// When the first log line with this message was written.
    pub fn first_time_of(&self, message: &str) -> Option<std::time::SystemTime> {
        self.lines()
            .into_iter()
            .find(|v| v["fields"]["message"] == message)
            .and_then(|v| {
                humantime::parse_rfc3339_weak(v["timestamp"].as_str()?.trim_end_matches('Z')).ok()
            })
    }

    pub fn logged(&self, needle: &str) -> bool {
        self.text().contains(needle)
    }

    pub fn wait_for(&self, what: &str, timeout: Duration, pred: impl Fn(&Instance) -> bool) {
        let deadline = Instant::now() + timeout;
        while !pred(self) {
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}; log:\n{}",
                self.text()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
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

/// Waits up to `timeout` for `pred`, polling.
pub fn wait_until(what: &str, timeout: Duration, mut pred: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !pred() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A host config on a kinesis-mock stream and a dynalite lease table; `extra_leases` and
/// `extra_sub` are appended to `[leases]` and the subscription.
pub struct HostConfig<'a> {
    pub owner: &'a str,
    pub kinesis: &'a str,
    pub dynamodb: &'a str,
    pub table: &'a str,
    pub stream: &'a str,
    pub handler: PathBuf,
    pub leases: &'a str,
    pub subscription: &'a str,
}

impl HostConfig<'_> {
    pub fn render(&self) -> String {
        format!(
            r#"[host]
owner_id = "{}"

[kinesis]
endpoint = "{}"
test_credentials = true

[leases]
store = "dynamodb"
table = "{}"
endpoint = "{}"
{}

[[subscription]]
name = "test"
stream = "{}"
handler = "{}"
poll_interval = "100ms"
{}
"#,
            self.owner,
            self.kinesis,
            self.table,
            self.dynamodb,
            self.leases,
            self.stream,
            self.handler.display(),
            self.subscription,
        )
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
    let kinesis = kinesis_endpoint()?;
    let dynamodb = dynamodb_endpoint()?;
    let k = Kinesis::new(&kinesis);
    let d = Dynamo::new(&dynamodb);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let stream = unique("stream");
    let table = unique("leases");
    k.create(&stream, shards);
    rt.block_on(d.create_lease_table(&table));
    Some(Stack {
        kinesis,
        dynamodb,
        k,
        d,
        rt,
        stream,
        table,
    })
}

impl Stack {
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
