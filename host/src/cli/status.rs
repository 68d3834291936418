//! `shardhost status [--admin URL | --config FILE] [--json]`

use std::path::PathBuf;

use clap::Args;

use super::columns::table;
use super::fleet::{FleetSource, load, render as render_fleet};
use super::{AdminArgs, CliError};
use crate::lease::now_ms;
use crate::status::Report;
use crate::status::summary::{held, retrying};

#[derive(Args, Debug)]
pub struct StatusArgs {
    #[command(flatten)]
    admin: AdminArgs,

    /// Read the fleet straight from the lease table this config names (every instance's
    /// version and heartbeat; no admin API needed).
    #[arg(long, value_name = "FILE", conflicts_with = "admin")]
    config: Option<PathBuf>,

    /// Print the status as JSON (what `GET /status` answers).
    #[arg(long)]
    json: bool,
}

pub fn status(args: &StatusArgs) -> Result<(), CliError> {
    if let Some(path) = &args.config {
        let config = load(path)?;
        let fleet = super::block_on(async {
            let names = config
                .subscriptions
                .iter()
                .map(|s| s.name.clone())
                .collect();
            let source = FleetSource::Table(FleetSource::table(&config).await?, names);
            Ok(source.report().await?.expect("a table has a fleet"))
        })?;
        if args.json {
            println!(
                "{}",
                serde_json::to_string_pretty(&fleet).expect("a report serializes")
            );
        } else {
            print!("{}", render_fleet(&fleet));
        }
        return Ok(());
    }
    let client = args.admin.client()?;
    let report = super::block_on(async { Ok(client.status().await?) })?;
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report).expect("a report serializes")
        );
    } else {
        print!("{}", render(&report));
    }
    Ok(())
}

/// The report as a table per subscription.
fn render(report: &Report) -> String {
    let mut out = format!("owner {}\n", report.owner);
    for s in &report.subscriptions {
        out += &format!(
            "\nsubscription `{}` (stream {})\n  handler {}\n",
            s.name, s.stream, s.handler_version
        );
        if !s.read.is_empty() {
            out += &format!("  read {}\n", s.read);
        }
        if let Some(p) = &s.previous_version {
            out += &format!("  previous {p} (deploy --rollback restores it)\n");
        }
        if let Some(e) = &s.last_deploy_error {
            out += &format!("  last deploy refused: {e}\n");
        }
        if let Some(shadow) = &s.shadow {
            out += &render_shadow(shadow);
        }
        if let Some(totals) = &s.totals {
            out += &format!("  since this instance started: {totals}\n");
        }
        if s.shards.is_empty() {
            out += "  no shards read by this instance\n";
            continue;
        }
        let mut rows = vec![
            [
                "SHARD",
                "STATE",
                "OWNER",
                "CHECKPOINT",
                "LAG MS",
                "HANDLER",
                "HANDLED",
                "HELD",
                "LAST ERROR",
            ]
            .map(String::from),
        ];
        for shard in &s.shards {
            let st = &shard.status;
            rows.push([
                shard.shard_id.clone(),
                st.state.to_string(),
                st.owner.clone(),
                st.checkpoint.clone().unwrap_or_else(|| "-".into()),
                st.millis_behind_latest
                    .map_or_else(|| "-".into(), |ms| ms.to_string()),
                st.handler_version.chars().take(12).collect(),
                st.counts.settled.to_string(),
                st.counts.held.to_string(),
                st.last_error.clone().unwrap_or_else(|| "-".into()),
            ]);
        }
        out += &table(&rows);
        let now = now_ms();
        for shard in &s.shards {
            if let Some(held) = held(&shard.status, now) {
                out += &format!(
                    "  {} holds {held}: its checkpoint waits in front of it\n",
                    shard.shard_id
                );
            }
            if let Some(again) = retrying(&shard.status, now) {
                out += &format!(
                    "  {} calls again {again} (retry-after): its checkpoint waits in front of it\n",
                    shard.shard_id
                );
            }
        }
    }
    if let Some(fleet) = &report.fleet {
        out += &render_fleet(fleet);
    }
    out
}

/// A shadow's comparison so far.
fn render_shadow(s: &crate::shadow::ShadowReport) -> String {
    let mut out = format!(
        "  shadow {} (deploy --promote makes it current): {} agree, {} differ, {} trapped, \
         {} timed out, {} skipped; {} batch(es) compared, {} dropped ({} records)\n",
        s.version,
        s.agree,
        s.differ,
        s.trapped,
        s.timed_out,
        s.skipped,
        s.batches_compared,
        s.batches_dropped,
        s.records_dropped
    );
    if let Some(answer) = &s.http_answer {
        out += &format!("    unsent requests answered {answer}\n");
    }
    for d in &s.differences {
        out += &format!(
            "    {} -> {}: {} record(s)\n",
            d.current, d.candidate, d.records
        );
    }
    for d in &s.first_differences {
        out += &format!(
            "    {} {}  key {}  {} -> {}{}\n",
            d.shard_id,
            d.sequence_number,
            d.partition_key,
            d.current,
            d.candidate,
            d.error
                .as_deref()
                .map(|e| format!("  ({e})"))
                .unwrap_or_default()
        );
    }
    if !s.effects.is_empty() {
        let effects: Vec<String> = s.effects.iter().map(|(k, n)| format!("{k} {n}")).collect();
        out += &format!("    recorded, not performed: {}\n", effects.join(", "));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::{ShardReport, ShardState, ShardStatus, SubscriptionReport, Totals};

    #[test]
    fn a_subscription_shows_its_totals_and_each_held_record_under_its_shards() {
        let held = ShardStatus {
            checkpoint: Some("495".into()),
            held_at: Some("496".into()),
            held_key: Some("order-1006".into()),
            held_since_ms: Some(now_ms()),
            state: ShardState::Reading,
            ..ShardStatus::default()
        };
        let shard = |id: &str, status: ShardStatus| ShardReport {
            shard_id: id.into(),
            status,
        };
        let report = Report {
            owner: "me".into(),
            subscriptions: vec![SubscriptionReport {
                name: "ship".into(),
                stream: "shipments".into(),
                read: String::new(),
                handler_version: "v".into(),
                previous_version: None,
                last_deploy_error: None,
                shadow: None,
                totals: Some(Totals {
                    records: 3,
                    ack: 2,
                    retry: 1,
                    held: 1,
                    ..Totals::default()
                }),
                shards: vec![shard("s-0", held), shard("s-1", ShardStatus::default())],
            }],
            failures: Vec::new(),
            fleet: None,
        };
        let text = render(&report);
        assert!(
            text.contains(
                "  since this instance started: 3 records: 2 ack, 0 drop, 1 retry (1 held)\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("  s-0 holds 496 (order-1006) for ")
                && text.contains("s: its checkpoint waits in front of it\n"),
            "{text}"
        );
        assert!(!text.contains("s-1 holds"), "{text}");
    }
}
