//! `shardhost deploy --config CFG SUBSCRIPTION FILE.wasm --shadow`, `--shadow-off` and
//! `--promote`: the fleet's shadow, straight through the lease table the config names (every
//! instance follows it at its next poll).

use std::path::PathBuf;

use super::CliError;
use super::fleet::{FleetSource, subscription, who};
use crate::config::Config;
use crate::effects::HttpAnswer;
use crate::fleet::Sign;
use crate::signing::SignKey;
use crate::version::{short_version, version_of};

/// What is asked of the fleet's shadow.
pub struct FleetShadowArgs<'a> {
    pub subscription: &'a str,
    pub file: Option<&'a PathBuf>,
    pub component: Option<Vec<u8>>,
    pub off: bool,
    pub promote: bool,
    pub key: Option<&'a SignKey>,
    /// What the shadow's unsent HTTP requests are answered (none: 503).
    pub http_answer: Option<HttpAnswer>,
}

pub async fn through_table(config: &Config, args: FleetShadowArgs<'_>) -> Result<(), CliError> {
    let s = subscription(config, args.subscription)?;
    let fleet = FleetSource::table(config).await?;
    let by = format!("{} (deploy --config)", who());
    let sign = match args.key {
        Some(key) => Sign::Key(key),
        None => Sign::No,
    };
    if let Some(bytes) = &args.component {
        let file = args.file.cloned().unwrap_or_default();
        // A fleet that would refuse it is told so before anything of the bytes runs here.
        fleet.signs_trial(&s.name, "a shadow", &version_of(bytes), &sign)?;
        super::fleet::validate_here(config, s, &file, bytes).await?;
        let answer = args.http_answer.as_ref();
        let shadow = fleet.set_shadow(&s.name, bytes, answer, &by, &sign).await?;
        println!(
            "subscription `{}`: every instance runs {} in shadow from its next poll: compared, never settled",
            s.name, shadow.version
        );
        if let Some(answer) = answer {
            println!("  unsent requests answered {}", answer.describe());
        }
        return Ok(());
    }
    let running = fleet.shadow(&s.name).await?.filter(|(_, sh)| sh.on);
    let Some((_, shadow)) = running else {
        return Err(CliError::NoShadow(s.name.clone()));
    };
    if args.promote {
        if let Some(key) = args.key {
            fleet.vouch_shadow(&s.name, &shadow, key)?;
        }
        let bytes = fleet.fetch(&s.name, &shadow.component()).await?;
        let desired = fleet.publish(&s.name, &bytes, None, &by, &sign).await?;
        fleet.shadow_off(&s.name, &by).await?;
        println!(
            "subscription `{}`: shadow {} promoted: fleet generation {} runs it",
            s.name,
            short_version(&shadow.version),
            desired.generation
        );
        return Ok(());
    }
    debug_assert!(args.off);
    fleet.shadow_off(&s.name, &by).await?;
    println!(
        "subscription `{}`: the fleet's shadow {} dropped",
        s.name,
        short_version(&shadow.version)
    );
    Ok(())
}
