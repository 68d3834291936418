//! `shardhost deploy [--admin URL | --config FILE] SUBSCRIPTION (FILE.wasm | --rollback)
//! [--sign-key FILE] [--wait [--timeout D]]`, and through an instance's admin API
//! `deploy SUBSCRIPTION --shadow FILE.wasm`, `--shadow-off`, `--promote``
//!
//! Through an instance's admin API, or, with `--config`, straight into the lease table the config
//! names (validated here under the config's limits first): with a DynamoDB lease table either
//! one is a deploy to the whole fleet.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::admin_client::{AdminClient, AdminError};
use super::fleet::{FleetSource, load, subscription, wait, who};
use super::{AdminArgs, CliError};
use crate::admin::reply::SwapReply;
use crate::config::Config;
use crate::fleet::{FleetError, Intent, Sign};
use crate::fleet_table::new_id;
use crate::signing::{Scope, SignKey, Statement, TrustedKeys};
use crate::status::fleet::DesiredReport;
use crate::version::{short_version, version_of};
use hyper::StatusCode;

#[derive(Args, Debug)]
pub struct DeployArgs {
    #[command(flatten)]
    admin: AdminArgs,

    /// Deploy straight to the lease table this config names, validated here under its limits:
    /// every instance on the table converges on it (no admin API needed).
    #[arg(long, value_name = "FILE", conflicts_with = "admin")]
    config: Option<PathBuf>,

    /// The subscription whose handler is replaced.
    subscription: String,

    /// The new handler component.
    #[arg(
        required_unless_present_any = ["rollback", "shadow_off", "promote", "canary_off"],
        conflicts_with_all = ["rollback", "shadow_off", "promote", "canary_off"]
    )]
    file: Option<PathBuf>,

    /// Restore the handler that ran before the last deploy (fleet-wide with a DynamoDB table).
    #[arg(long, conflicts_with_all = ["shadow", "shadow_off", "promote"])]
    rollback: bool,

    /// Run FILE in shadow on the instance: after the current version on every batch, its
    /// answers compared and counted (status, metrics), never settled; its publishes, seeks,
    /// HTTP requests and state writes recorded, never performed.
    /// With a DynamoDB lease table every instance runs it (--config: straight to the table).
    #[arg(long, requires = "file")]
    shadow: bool,

    /// With --shadow: answer the shadow's unsent HTTP requests with STATUS (200 to 599) and,
    /// with `:FILE`, FILE's bytes as the body (at most 64 KiB; `.json`: `content-type:
    /// application/json`), so that its success path is compared; `status` says so. Default: 503.
    #[arg(long, value_name = "STATUS[:FILE]", requires = "shadow")]
    http_answer: Option<crate::effects::AnswerSpec>,

    /// Drop the shadow (the fleet's, with a DynamoDB lease table).
    #[arg(long, conflicts_with_all = ["shadow", "promote"])]
    shadow_off: bool,

    /// Make the shadow the current version, exactly as a deploy of it (fleet-wide with a
    /// DynamoDB lease table), and drop the shadow.
    #[arg(long, conflicts_with = "shadow")]
    promote: bool,

    /// Roll FILE out on this share of the stream's shards (whole shards, e.g. 10%), the
    /// fleet's version on the others; promoted when --canary-for passes clean, rolled back at
    /// the first rule of --abort-on broken (needs --config and a DynamoDB lease table).
    #[arg(long, value_name = "SHARE", value_parser = super::canary::share, requires_all = ["file", "config"], conflicts_with_all = ["shadow", "wait"])]
    canary: Option<u32>,

    /// How long a rollout must run clean before it is promoted.
    #[arg(long, value_name = "DURATION", default_value = "10m", value_parser = duration, requires = "canary")]
    canary_for: Duration,

    /// When a rollout is rolled back, comparing its shards with the others over the same
    /// minutes: `traps>X%` (failed records, points above the others), `retry>X%`, `p99>Nx`.
    #[arg(long, value_name = "RULES", default_value = crate::canary::rules::DEFAULT, requires = "canary")]
    abort_on: String,

    /// Roll the running rollout back now (needs --config).
    #[arg(long, requires = "config", conflicts_with_all = ["shadow", "shadow_off", "promote", "rollback"])]
    canary_off: bool,

    /// Return only when every live instance runs the new version; fail naming the instances
    /// that refused it or did not answer within --timeout.
    #[arg(long)]
    wait: bool,

    /// Sign the deploy, rollout or shadow with this private key (PKCS#8 PEM, `shardhost
    /// keygen`): instances with [fleet] trusted_keys run only what a trusted key signed. A
    /// signed rollback or promote first verifies the signature its version came with.
    #[arg(long, value_name = "FILE")]
    sign_key: Option<PathBuf>,

    /// How long --wait waits (e.g. 90s, 5m).
    #[arg(long, default_value = "60s", value_parser = duration, requires = "wait")]
    timeout: Duration,
}

fn duration(text: &str) -> Result<Duration, String> {
    crate::config::parse_duration(text)
}

pub fn deploy(args: &DeployArgs) -> Result<(), CliError> {
    let http_answer = match &args.http_answer {
        Some(spec) => Some(spec.load(crate::effects::answer::MAX_SHADOW_BODY)?),
        None => None,
    };
    // Without a file it is a rollback (the arguments allow nothing else).
    let component = match &args.file {
        Some(file) => Some(std::fs::read(file).map_err(|source| CliError::ReadHandler {
            file: file.clone(),
            source,
        })?),
        None => None,
    };
    let key = match &args.sign_key {
        Some(path) => Some(SignKey::read(path)?),
        None => None,
    };
    if let (true, Some(path)) = (args.shadow || args.shadow_off || args.promote, &args.config) {
        let config = load(path)?;
        let fleet_shadow = super::shadow::FleetShadowArgs {
            subscription: &args.subscription,
            file: args.file.as_ref(),
            component,
            off: args.shadow_off,
            promote: args.promote,
            key: key.as_ref(),
            http_answer,
        };
        return super::block_on(super::shadow::through_table(&config, fleet_shadow));
    }
    if args.shadow || args.shadow_off {
        return super::block_on(shadow(args, component, http_answer));
    }
    if let (Some(share), Some(path), Some(bytes)) = (args.canary, &args.config, &component) {
        let config = load(path)?;
        let canary = super::canary::CanaryArgs {
            subscription: &args.subscription,
            file: args.file.as_ref().expect("--canary requires a file"),
            bytes: bytes.clone(),
            share_permille: share,
            window: args.canary_for,
            abort_on: &args.abort_on,
            key: key.as_ref(),
        };
        return super::block_on(super::canary::start(&config, canary));
    }
    if let (true, Some(path)) = (args.canary_off, &args.config) {
        let config = load(path)?;
        return super::block_on(super::canary::stop(&config, &args.subscription));
    }
    match &args.config {
        Some(path) => {
            let config = load(path)?;
            super::block_on(through_table(args, &config, component, key.as_ref()))
        }
        None => super::block_on(through_admin(args, component, key.as_ref())),
    }
}

/// `--shadow FILE` and `--shadow-off`, through the instance's admin API.
async fn shadow(
    args: &DeployArgs,
    component: Option<Vec<u8>>,
    http_answer: Option<crate::effects::HttpAnswer>,
) -> Result<(), CliError> {
    let client = args.admin.client()?;
    let name = &args.subscription;
    match component {
        Some(bytes) => {
            let reply = client.shadow(name, bytes, http_answer.as_ref()).await?;
            println!(
                "subscription `{name}`: shadow set; it runs after the current version on every batch, compared, never settled"
            );
            println!("  shadow  {}", reply.shadow);
            if let Some(current) = &reply.current {
                println!("  current {current}");
            }
            if let Some(replaced) = &reply.replaced {
                println!("  replaced the shadow {replaced}");
            }
            if let Some(answer) = &http_answer {
                println!("  unsent requests answered {}", answer.describe());
            }
        }
        None => {
            let reply = client.shadow_off(name).await?;
            println!("subscription `{name}`: shadow {} dropped", reply.shadow);
        }
    }
    Ok(())
}

async fn through_admin(
    args: &DeployArgs,
    component: Option<Vec<u8>>,
    key: Option<&SignKey>,
) -> Result<(), CliError> {
    let client = args.admin.client()?;
    let name = &args.subscription;
    let reply = match key {
        None => match component {
            Some(bytes) => client.deploy(name, bytes, None).await?,
            None if args.promote => client.promote(name, None).await?,
            None => client.rollback(name, None).await?,
        },
        Some(key) => signed_through_admin(&client, name, component, key, args.promote).await?,
    };
    let (old, new) = (&reply.old, &reply.new);
    if old == new {
        println!("subscription `{name}`: this instance already runs {new}; nothing swapped");
    } else {
        println!("subscription `{name}`: handler swapped; shards switch at their next batch");
        println!("  old {old}");
        println!("  new {new}");
    }
    let Some(generation) = reply.generation else {
        if args.wait {
            println!("this host keeps its leases in memory: it has no fleet to wait for");
        }
        return Ok(());
    };
    println!("  fleet generation {generation}: every instance on the lease table follows");
    if args.wait {
        let source = FleetSource::Admin(client);
        wait(&source, name, new, generation, args.timeout).await?;
    }
    Ok(())
}

/// Signs for the generation the desired row gets next (read from the instance's status) and
/// deploys; signs again when another deploy moved the row meanwhile (409).
async fn signed_through_admin(
    client: &AdminClient,
    name: &str,
    component: Option<Vec<u8>>,
    key: &SignKey,
    promote: bool,
) -> Result<SwapReply, CliError> {
    let mut tries = 0;
    loop {
        tries += 1;
        let report = client.status().await?;
        let shadow = report
            .subscriptions
            .iter()
            .find(|s| s.name == name)
            .and_then(|s| s.shadow.as_ref())
            .map(|s| s.version.clone());
        let fleet = report
            .fleet
            .ok_or_else(|| CliError::NothingToSign(name.to_owned()))?;
        let desired = fleet.desired_of(name);
        let scope = Scope {
            table: &fleet.table,
            service: &fleet.service,
            subscription: name,
        };
        let version = match (&component, desired) {
            (Some(bytes), _) => version_of(bytes),
            // Promoting deploys the shadow's version: only when the fleet's shadow row holds
            // a signature this key vouches for.
            (None, _) if promote => {
                let shadow = shadow.ok_or_else(|| CliError::NoShadow(name.to_owned()))?;
                vouched_shadow(scope, desired, &shadow, key)?;
                shadow
            }
            (None, Some(d)) => match &d.previous_version {
                Some(v) => {
                    vouched_previous(scope, v, d.previous_signed.as_ref(), key)?;
                    v.clone()
                }
                None => return Err(FleetError::NothingToRollBack(name.to_owned()).into()),
            },
            (None, None) => return Err(FleetError::NothingToRollBack(name.to_owned()).into()),
        };
        let deploy_id = desired
            .filter(|d| d.problem.is_none())
            .and_then(|d| d.deploy_id.clone())
            .filter(|id| !id.is_empty())
            .unwrap_or_else(new_id);
        let generation = fleet.highest_generation(name) + 1;
        let statement = Statement::Deploy {
            scope,
            version: &version,
            generation,
            deploy_id: &deploy_id,
        };
        let intent = Intent {
            generation,
            deploy_id: deploy_id.clone(),
            signed: key.sign(&statement),
        };
        let sent = match &component {
            Some(bytes) => client.deploy(name, bytes.clone(), Some(&intent)).await,
            None if promote => client.promote(name, Some(&intent)).await,
            None => client.rollback(name, Some(&intent)).await,
        };
        match sent {
            Err(AdminError::Refused(r)) if r.status == StatusCode::CONFLICT && tries < 5 => {
                continue;
            }
            other => return Ok(other?),
        }
    }
}

/// Before a signed rollback through an instance: the previous version's own signature (kept
/// in the row, shown by the instance) must verify under `key` (only that key: through `--admin`
/// there is no config with trusted keys).
fn vouched_previous(
    scope: Scope<'_>,
    version: &str,
    was: Option<&Intent>,
    key: &SignKey,
) -> Result<(), CliError> {
    let keys = TrustedKeys::new(vec![key.public()]);
    Ok(crate::fleet::vouch_previous(scope, version, was, &keys)?)
}

/// Before a signed promote through an instance: the fleet's shadow row must name `version`,
/// on, under a signature `key` vouches for.
fn vouched_shadow(
    scope: Scope<'_>,
    desired: Option<&DesiredReport>,
    version: &str,
    key: &SignKey,
) -> Result<(), CliError> {
    let row = desired
        .and_then(|d| d.shadow.as_ref())
        .filter(|s| s.on && s.version == version)
        .ok_or_else(|| FleetError::Unvouched {
            subscription: scope.subscription.to_owned(),
            what: "a promotion of the shadow",
            version: version.to_owned(),
            why: "the instance's shadow is not the fleet's signed shadow; set it with --shadow \
                  --sign-key, or deploy its file with --sign-key"
                .into(),
        })?;
    let keys = TrustedKeys::new(vec![key.public()]);
    Ok(crate::fleet::vouch_shadow(scope, row, &keys)?)
}

async fn through_table(
    args: &DeployArgs,
    config: &Config,
    component: Option<Vec<u8>>,
    key: Option<&SignKey>,
) -> Result<(), CliError> {
    let sign = match key {
        Some(key) => Sign::Key(key),
        None => Sign::No,
    };
    let s = subscription(config, &args.subscription)?;
    let fleet = FleetSource::table(config).await?;
    let by = format!("{} (deploy --config)", who());
    let desired = match component {
        Some(bytes) => {
            let file = args.file.clone().unwrap_or_default();
            // A fleet that would refuse it is told so before anything of the bytes runs here.
            fleet.signs(&s.name, &version_of(&bytes), &sign)?;
            super::fleet::validate_here(config, s, &file, &bytes).await?;
            let running = std::fs::read(&s.handler).ok();
            fleet
                .publish(&s.name, &bytes, running.as_deref(), &by, &sign)
                .await?
        }
        None => fleet.rollback(&s.name, &by, &sign).await?,
    };
    let version = desired.component.version.clone();
    println!(
        "subscription `{}`: fleet generation {} runs {version}",
        s.name, desired.generation
    );
    if let Some(p) = &desired.previous {
        println!(
            "  previous {} (deploy --rollback restores it)",
            short_version(&p.version)
        );
    }
    if args.wait {
        let source = FleetSource::Table(fleet, vec![s.name.clone()]);
        wait(&source, &s.name, &version, desired.generation, args.timeout).await?;
    }
    Ok(())
}
