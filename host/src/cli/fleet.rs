//! The fleet seen from the command line: through any instance's admin API or straight from the
//! lease table a config names; `deploy --wait` waits on it, `status` renders it.

use std::path::Path;
use std::time::Duration;

use super::CliError;
use super::admin_client::AdminClient;
use crate::config::{Config, SubscriptionConfig};
use crate::fleet::Fleet;
use crate::lease::now_ms;
use crate::status::fleet::{DesiredReport, FleetReport, Rollout};
use crate::version::short_version;

/// How often `--wait` looks again.
const WAIT_STEP: Duration = Duration::from_millis(500);

/// Where the fleet is read from.
pub enum FleetSource {
    Admin(AdminClient),
    Table(Fleet, Vec<String>),
}

impl FleetSource {
    /// The fleet of the lease table `config` names; a clear error with the memory store.
    pub async fn table(config: &Config) -> Result<Fleet, CliError> {
        let table = crate::supervisor::dynamo_table(config)
            .await
            .map_err(|source| CliError::Start {
                path: config.path.clone(),
                source: Box::new(source),
            })?
            .ok_or_else(|| CliError::NoFleet(config.path.clone()))?;
        let policy = crate::fleet::FleetPolicy {
            max_component_size: config.fleet.max_component_size,
            trusted: config.fleet.trusted_keys.clone(),
        };
        let table = crate::fleet_table::FleetTable::beside(&table);
        Ok(Fleet::new(table, &config.host.name).with_policy(policy))
    }

    /// The fleet now; `None` when the instance asked has no fleet (memory lease store).
    pub async fn report(&self) -> Result<Option<FleetReport>, CliError> {
        match self {
            FleetSource::Admin(client) => Ok(client.status().await?.fleet),
            FleetSource::Table(fleet, names) => Ok(Some(fleet.report(names).await?)),
        }
    }
}

/// Validates `bytes` (read from `file`) here, under `s`'s limits and grants, as an instance
/// would before running them: what a deploy, a shadow or a rollout through the table checks
/// before it writes anything.
pub async fn validate_here(
    config: &Config,
    s: &SubscriptionConfig,
    file: &Path,
    bytes: &[u8],
) -> Result<(), CliError> {
    let runtime = crate::wasm::Runtime::for_host(&config.host, config.meters_fuel())
        .map_err(CliError::Engine)?;
    runtime
        .load_bytes(&file.display().to_string(), bytes, s.limits, &s.wasi)
        .await
        .map(|_| ())
        .map_err(|source| CliError::Refused {
            file: file.to_owned(),
            subscription: s.name.clone(),
            source,
        })
}

/// The subscription `name` of `config`, or an error naming the ones it has.
pub fn subscription<'c>(
    config: &'c Config,
    name: &str,
) -> Result<&'c SubscriptionConfig, CliError> {
    config
        .subscription(name)
        .ok_or_else(|| CliError::UnknownSubscription {
            path: config.path.clone(),
            name: name.to_owned(),
            known: config
                .subscriptions
                .iter()
                .map(|s| s.name.clone())
                .collect(),
        })
}

/// Waits until every live instance running `subscription` runs `version` (generation
/// `generation`) or refused it; an error names the ones that refused or did not answer.
pub async fn wait(
    source: &FleetSource,
    subscription: &str,
    version: &str,
    generation: u64,
    timeout: Duration,
) -> Result<(), CliError> {
    let deadline = tokio::time::Instant::now() + timeout;
    let mut last = Rollout::default();
    loop {
        if let Some(report) = source.report().await? {
            last = report.rollout(subscription, version, generation);
            if last.pending.is_empty() {
                break;
            }
        }
        if tokio::time::Instant::now() >= deadline {
            break;
        }
        tokio::time::sleep(WAIT_STEP).await;
    }
    let short = short_version(version);
    if last.converged() {
        if last.running.is_empty() {
            println!("no live instance runs `{subscription}`; each one that starts runs {short}");
        } else {
            println!(
                "every live instance runs {short}: {}",
                last.running.join(", ")
            );
        }
        return Ok(());
    }
    Err(CliError::NotConverged {
        subscription: subscription.to_owned(),
        version: short.to_owned(),
        refused: last.refused,
        pending: last.pending,
        timeout,
    })
}

/// The fleet as text: each subscription's desired version, then each instance.
/// A rollout: running (with its time left) or how it ended.
fn render_rollout(r: &crate::fleet_table::Rollout, now: u64) -> String {
    let head = format!(
        "    rollout {} of {} on {} shard(s) ({}), rules {}",
        r.canary_id,
        short_version(&r.version),
        r.shards.len(),
        r.shards.join(", "),
        r.abort_on
    );
    match r.state {
        crate::fleet_table::RolloutState::Running => {
            let ends = r.started_at_ms.saturating_add(r.window_ms);
            format!(
                "{head}: running, started {} ago, window ends in {}\n",
                ago(now, r.started_at_ms),
                ago(ends.max(now), now)
            )
        }
        state => format!(
            "{head}: {} {} ago by {}: {}\n",
            format!("{state:?}").to_lowercase(),
            ago(now, r.decided_at_ms.unwrap_or(now)),
            r.decided_by.as_deref().unwrap_or("?"),
            r.reason.as_deref().unwrap_or("")
        ),
    }
}

/// What one subscription should run, and whether every live instance runs it.
fn render_desired(d: &DesiredReport, converged: bool, now: u64) -> String {
    let converged = if converged {
        "converged"
    } else {
        "not converged"
    };
    let mut out = match &d.version {
        Some(v) => {
            let mut out = format!(
                "  subscription `{}`: desired {} (generation {}, by {}, {} ago), {converged}\n",
                d.subscription,
                short_version(v),
                d.generation,
                d.deployed_by.as_deref().unwrap_or("?"),
                ago(now, d.deployed_at_ms.unwrap_or(now)),
            );
            if let Some(p) = &d.previous_version {
                out += &format!(
                    "    previous {} (deploy --rollback restores it)\n",
                    short_version(p)
                );
            }
            out
        }
        None => format!(
            "  subscription `{}`: no fleet deploy yet (each instance runs its config's file), {converged}\n",
            d.subscription
        ),
    };
    if let Some(r) = &d.rollout {
        out += &render_rollout(r, now);
    }
    out
}

pub fn render(fleet: &FleetReport) -> String {
    let now = now_ms();
    let mut out = format!("\nfleet `{}` (lease table)\n", fleet.service);
    for d in &fleet.desired {
        out += &render_desired(d, fleet.converged(&d.subscription), now);
    }
    let mut rows = vec![
        [
            "INSTANCE",
            "LIVE",
            "LAST BEAT",
            "SUBSCRIPTION",
            "VERSION",
            "GENERATION",
            "SHARDS",
            "REFUSED",
        ]
        .map(String::from),
    ];
    for i in &fleet.instances {
        let b = &i.heartbeat;
        for (name, r) in &b.subscriptions {
            rows.push([
                b.owner.clone(),
                if i.live { "yes" } else { "no" }.to_owned(),
                format!("{} ago", ago(now, b.beat_ms)),
                name.clone(),
                short_version(&r.version).to_owned(),
                r.generation.to_string(),
                r.shards.to_string(),
                r.refused.as_ref().map_or_else(
                    || "-".to_owned(),
                    |f| {
                        format!(
                            "{} (generation {}): {}",
                            short_version(&f.version),
                            f.generation,
                            f.error
                        )
                    },
                ),
            ]);
        }
    }
    if rows.len() == 1 {
        out += "  no instance has written a heartbeat\n";
    } else {
        out += &super::columns::table(&rows);
    }
    for i in fleet.instances.iter().filter(|i| i.live) {
        for (name, r) in &i.heartbeat.subscriptions {
            for f in &r.refused_trials {
                out += &format!("  {} refuses on `{name}`: {}\n", i.heartbeat.owner, f.error);
            }
        }
    }
    if !fleet.unreadable.is_empty() {
        out += &format!(
            "  {} instance row(s) skipped: they do not read as heartbeats\n",
            fleet.unreadable.len()
        );
        for u in &fleet.unreadable {
            out += &format!("    {}: {}\n", u.row, u.problem);
        }
    }
    out
}

/// `1.5s`, `3m`, `2h` since `then_ms`.
fn ago(now_ms: u64, then_ms: u64) -> String {
    let ms = now_ms.saturating_sub(then_ms);
    match ms {
        0..10_000 => format!("{:.1}s", ms as f64 / 1000.0),
        10_000..120_000 => format!("{}s", ms / 1000),
        120_000..7_200_000 => format!("{}m", ms / 60_000),
        _ => format!("{}h", ms / 3_600_000),
    }
}

/// `$USER@hostname`, for `deployed_by`.
pub fn who() -> String {
    let user = std::env::var("USER").unwrap_or_else(|_| "someone".to_owned());
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_| "localhost".to_owned());
    format!("{user}@{host}")
}

/// The config at `path`.
pub fn load(path: &Path) -> Result<Config, CliError> {
    Ok(Config::load(path)?)
}
