//! `shardhost cache [list|clear] [--config FILE]`: the compiled components the host keeps on
//! disk (by version, size and last use), or remove them all.

use std::path::PathBuf;
use std::time::SystemTime;

use clap::{Args, ValueEnum};

use super::CliError;
use crate::config::{Config, HostConfig};
use crate::wasm::{CacheDir, Runtime, human_bytes};

#[derive(Args, Debug)]
pub struct CacheArgs {
    /// `list` the entries (the default) or `clear` them all.
    #[arg(value_enum, default_value_t = CacheAction::List)]
    action: CacheAction,
    /// The config whose `[host] cache_dir` and `cache_max` to use (default: the default cache
    /// directory: $SHARDHOST_CACHE_DIR, $XDG_CACHE_HOME/shardhost or ~/.cache/shardhost).
    #[arg(long)]
    config: Option<PathBuf>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum CacheAction {
    List,
    Clear,
}

pub fn cache(args: &CacheArgs) -> Result<(), CliError> {
    let host = match &args.config {
        Some(path) => Config::load(path)?.host,
        None => HostConfig::default(),
    };
    let Some(dir) = Runtime::cache_dir_of(&host) else {
        return Err(CliError::NoCacheDir);
    };
    let dir = CacheDir::new(&dir);
    let failed = |source| CliError::Cache {
        dir: dir.path().to_owned(),
        source,
    };
    match args.action {
        CacheAction::Clear => {
            let (n, bytes) = dir.clear().map_err(failed)?;
            println!(
                "removed {n} compiled component(s), {}, from {}",
                human_bytes(bytes),
                dir.path().display()
            );
        }
        CacheAction::List => {
            let entries = dir.entries().map_err(failed)?;
            let now = SystemTime::now();
            println!("{:<14}{:>12}  LAST USED", "VERSION", "SIZE");
            for e in entries.iter().rev() {
                let ago = now.duration_since(e.last_used).unwrap_or_default();
                println!(
                    "{:<14}{:>12}  {} ({} ago)",
                    crate::version::short_version(&e.version),
                    human_bytes(e.bytes),
                    humantime::format_rfc3339_seconds(e.last_used),
                    humantime::format_duration(std::time::Duration::from_secs(ago.as_secs()))
                );
            }
            let total: u64 = entries.iter().map(|e| e.bytes).sum();
            println!(
                "{} entries, {} of {} (cache_max), in {}",
                entries.len(),
                human_bytes(total),
                human_bytes(host.cache_max),
                dir.path().display()
            );
        }
    }
    Ok(())
}
