//! `shardhost dead-letters STREAM [--config CONFIG] [--json] [--replay]`: list the records a
//! retry cap retired to a dead-letter stream, or put them back into the streams they came from.

use std::path::PathBuf;

use base64::Engine;
use clap::Args;

use super::CliError;
use crate::config::{Config, KinesisEndpoint};
use crate::envelope::{self, EnvelopeKeys, Header, Kind};
use crate::source::kinesis::KinesisStreams;
use crate::source::{SourceError, StartPosition, StreamSource};

#[derive(Args, Debug)]
pub struct DeadLettersArgs {
    /// The dead-letter stream (a subscription's `dead_letter`).
    stream: String,

    /// The config whose [kinesis] section says where the stream is.
    #[arg(long, default_value = "shardhost.toml")]
    config: PathBuf,

    /// One JSON object per dead letter instead of text.
    #[arg(long)]
    json: bool,

    /// Put each dead letter's original record back into the stream it was first read from
    /// (same partition key and data, as a first attempt). Only letters this fleet made (their
    /// MAC verifies under its key) whose stream a subscription of the config reads.
    #[arg(long)]
    replay: bool,
}

/// One dead letter as read back.
struct Letter {
    sequence_number: String,
    header: Header,
    data: Vec<u8>,
}

pub fn dead_letters(args: &DeadLettersArgs) -> Result<(), CliError> {
    let config = Config::load(&args.config)?;
    if config.kinesis.endpoint == KinesisEndpoint::Memory {
        return Err(CliError::EmbeddedDeadLetters(args.config.clone()));
    }
    super::block_on(async {
        let key = crate::supervisor::fleet_envelope_keys(&config)
            .await
            .map_err(|source| CliError::Start {
                path: args.config.clone(),
                source: Box::new(source),
            })?;
        let source = KinesisStreams::connect(&config.kinesis).await;
        let letters = read(&source, &key, &args.stream).await?;
        if args.replay {
            return replay(&source, &config, &letters).await;
        }
        for l in &letters {
            if args.json {
                println!("{}", json(l));
            } else {
                println!("{}", text(l));
            }
        }
        if !args.json {
            eprintln!("{} dead letter(s) in `{}`", letters.len(), args.stream);
        }
        Ok(())
    })
}

/// Every dead letter in the stream, shard by shard from the oldest.
async fn read(
    source: &KinesisStreams,
    key: &EnvelopeKeys,
    stream: &str,
) -> Result<Vec<Letter>, SourceError> {
    let mut letters = Vec::new();
    let shards = source.list_shards(stream).await?;
    for shard in shards {
        let mut reader = source
            .open(stream, &shard.shard_id, &StartPosition::TrimHorizon)
            .await?;
        let mut empty_reads = 0;
        loop {
            let batch = reader.read(1000).await?;
            let caught_up = batch.end_of_shard || batch.millis_behind_latest == Some(0);
            if batch.records.is_empty() {
                empty_reads += 1;
                if caught_up || empty_reads >= 3 {
                    break;
                }
                continue;
            }
            empty_reads = 0;
            for r in batch.records {
                match envelope::unwrap(key, &r.data) {
                    Ok(Some((header, data))) if header.kind == Kind::DeadLetter => {
                        letters.push(Letter {
                            sequence_number: r.sequence_number.clone(),
                            data: data.to_vec(),
                            header,
                        })
                    }
                    Err(why) => eprintln!(
                        "{stream}: record {} is not a dead letter of this fleet ({why}); skipped",
                        r.sequence_number
                    ),
                    Ok(_) => eprintln!(
                        "{stream}: record {} is not a dead letter; skipped",
                        r.sequence_number
                    ),
                }
            }
            if batch.end_of_shard {
                break;
            }
        }
    }
    Ok(letters)
}

async fn replay(
    source: &KinesisStreams,
    config: &Config,
    letters: &[Letter],
) -> Result<(), CliError> {
    let read: std::collections::HashSet<&str> = config
        .subscriptions
        .iter()
        .map(|s| s.stream.as_str())
        .collect();
    let (ours, refused): (Vec<&Letter>, Vec<&Letter>) = letters
        .iter()
        .partition(|l| read.contains(l.header.origin.stream.as_str()));
    for l in &refused {
        eprintln!(
            "dead letter {} names stream `{}`, which no subscription of the config reads: not replayed",
            l.sequence_number, l.header.origin.stream
        );
    }
    let (references, ours): (Vec<&Letter>, Vec<&Letter>) = ours
        .into_iter()
        .partition(|l| l.header.data_omitted.is_some());
    for l in &references {
        let o = &l.header.origin;
        eprintln!(
            "dead letter {} is a reference (its {} bytes did not fit beside the envelope): not \
             replayed; the record is in `{}` shard {} at {} until the stream's retention ends",
            l.sequence_number,
            l.header.data_omitted.unwrap_or(0),
            o.stream,
            o.shard_id,
            o.sequence_number
        );
    }
    for (n, l) in ours.iter().enumerate() {
        let o = &l.header.origin;
        source
            .put(&o.stream, &o.partition_key, l.data.clone())
            .await
            .map_err(|source| CliError::Replay {
                letter: l.sequence_number.clone(),
                stream: o.stream.clone(),
                replayed: n,
                source: Box::new(source),
            })?;
    }
    println!("{} dead letter(s) put back into their streams", ours.len());
    match refused.len() + references.len() {
        0 => Ok(()),
        left_out => Err(CliError::NotReplayed(left_out)),
    }
}

fn data_fields(data: &[u8]) -> (&'static str, serde_json::Value) {
    match std::str::from_utf8(data) {
        Ok(text) => ("data", text.into()),
        Err(_) => (
            "data_base64",
            base64::engine::general_purpose::STANDARD
                .encode(data)
                .into(),
        ),
    }
}

fn json(l: &Letter) -> serde_json::Value {
    let h = &l.header;
    let mut v = serde_json::json!({
        "sequence_number": l.sequence_number,
        "partition_key": h.origin.partition_key,
        "attempts": h.attempt,
        "reason": h.reason,
        "handler_version": h.handler_version,
        "origin": {
            "stream": h.origin.stream,
            "shard_id": h.origin.shard_id,
            "sequence_number": h.origin.sequence_number,
        },
    });
    if let Some(size) = h.data_omitted {
        v["data_omitted"] = size.into();
    } else {
        let (key, data) = data_fields(&l.data);
        v[key] = data;
    }
    v
}

fn text(l: &Letter) -> String {
    let h = &l.header;
    let data = match h.data_omitted {
        Some(size) => {
            format!("omitted ({size} bytes; a reference to the record in its stream)").into()
        }
        None => data_fields(&l.data).1,
    };
    format!(
        "{}  from {}/{} {}  key {}  after {} attempt(s): {}  handler {}  data {}",
        l.sequence_number,
        h.origin.stream,
        h.origin.shard_id,
        h.origin.sequence_number,
        h.origin.partition_key,
        h.attempt,
        h.reason.as_deref().unwrap_or("?"),
        h.handler_version
            .as_deref()
            .map_or("?", |v| crate::version::short_version(v)),
        data
    )
}
