//! `shardhost put SUBSCRIPTION (FILE | --key PK --data TEXT) [--admin URL] [--token T]`: records
//! put into a running host's embedded stream through its admin API, as `feed` puts them at
//! start; each record's shard and sequence number printed.
//!
//! A file is checked here first (every bad line named), then sent in bodies the host takes
//! (at most 5 MiB each, whole lines), in order.

use std::path::PathBuf;

use clap::Args;

use super::{AdminArgs, CliError};
use crate::admin::reply::PutRecord;

/// The largest body sent: what the host takes in one put.
const BODY_MAX: usize = 5 << 20;

#[derive(Args, Debug)]
pub struct PutArgs {
    #[command(flatten)]
    admin: AdminArgs,

    /// The subscription whose embedded stream the records go into.
    subscription: String,

    /// A records file: NDJSON, one {"partition_key": …, "data": …} a line (as `invoke` and
    /// `feed` read).
    #[arg(required_unless_present = "data", conflicts_with = "data")]
    file: Option<PathBuf>,

    /// One record's data, taken as its text (with --key).
    #[arg(long, value_name = "TEXT", requires = "key")]
    data: Option<String>,

    /// The partition key of the --data record.
    #[arg(long, value_name = "PK", requires = "data")]
    key: Option<String>,
}

pub fn put(args: &PutArgs) -> Result<(), CliError> {
    let lines = match (&args.file, &args.data, &args.key) {
        (Some(file), _, _) => lines_of(file)?,
        (None, Some(data), Some(key)) => {
            let line = serde_json::json!({ "partition_key": key, "data": data });
            vec![line.to_string()]
        }
        _ => unreachable!("clap requires a file or --data with --key"),
    };
    let client = args.admin.client()?;
    let name = &args.subscription;
    super::block_on(async {
        let mut keys = lines.iter().map(|l| key_of(l));
        let mut total = 0;
        for body in bodies(&lines) {
            let reply = client.put(name, body).await?;
            if total == 0 {
                println!(
                    "subscription `{name}`: putting into the embedded stream `{}`",
                    reply.stream
                );
            }
            for PutRecord {
                shard_id,
                sequence_number,
            } in &reply.records
            {
                let key = keys.next().unwrap_or_default();
                println!("  {shard_id}  {sequence_number}  key {key}");
            }
            total += reply.records.len();
        }
        println!("{total} record(s) put");
        Ok(())
    })
}

/// The non-blank lines of a records file, once every line is known to be a record.
fn lines_of(file: &PathBuf) -> Result<Vec<String>, CliError> {
    crate::feed::load(file)?;
    let text = std::fs::read_to_string(file).map_err(|e| crate::feed::FeedError {
        file: file.clone(),
        lines: Vec::new(),
        unreadable: Some(e.to_string()),
    })?;
    Ok(text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(str::to_owned)
        .collect())
}

/// The partition key of a line already checked to be a record.
fn key_of(line: &str) -> String {
    serde_json::from_str::<serde_json::Value>(line)
        .ok()
        .and_then(|v| v["partition_key"].as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// The lines in bodies of at most [`BODY_MAX`] bytes (a longer line alone: the host says why
/// it refuses it).
fn bodies(lines: &[String]) -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = Vec::new();
    let mut body = Vec::new();
    for line in lines {
        if !body.is_empty() && body.len() + line.len() + 1 > BODY_MAX {
            out.push(std::mem::take(&mut body));
        }
        body.extend_from_slice(line.as_bytes());
        body.push(b'\n');
    }
    if !body.is_empty() {
        out.push(body);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_large_file_goes_in_bodies_the_host_takes_of_whole_lines() {
        let line = format!(
            "{{\"partition_key\":\"k\",\"data\":\"{}\"}}",
            "x".repeat(1 << 20)
        );
        let lines = vec![line; 12];
        let bodies = bodies(&lines);
        assert_eq!(bodies.len(), 3);
        assert!(
            bodies
                .iter()
                .all(|b| b.len() <= BODY_MAX && b.ends_with(b"\n"))
        );
        assert_eq!(
            bodies.iter().map(|b| b.len()).sum::<usize>(),
            12 * (lines[0].len() + 1)
        );
        assert_eq!(key_of(&lines[0]), "k");
    }
}
