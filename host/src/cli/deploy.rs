//! `shardhost deploy [--admin URL] SUBSCRIPTION FILE.wasm` and `--rollback`

use std::path::PathBuf;

use clap::Args;

use super::{AdminArgs, CliError};

#[derive(Args, Debug)]
pub struct DeployArgs {
    #[command(flatten)]
    admin: AdminArgs,

    /// The subscription whose handler is replaced.
    subscription: String,

    /// The new handler component.
    #[arg(required_unless_present = "rollback", conflicts_with = "rollback")]
    file: Option<PathBuf>,

    /// Restore the handler that ran before the last swap.
    #[arg(long)]
    rollback: bool,
}

pub fn deploy(args: &DeployArgs) -> Result<(), CliError> {
    let client = args.admin.client()?;
    let name = &args.subscription;
    // Without a file it is a rollback (the arguments allow nothing else).
    let component = match &args.file {
        Some(file) => Some(std::fs::read(file).map_err(|source| CliError::ReadHandler {
            file: file.clone(),
            source,
        })?),
        None => None,
    };
    let versions = super::block_on(async {
        Ok(match component {
            Some(bytes) => client.deploy(name, bytes).await?,
            None => client.rollback(name).await?,
        })
    })?;
    let (old, new) = (versions.old, versions.new);
    if old == new {
        println!("subscription `{name}`: already runs {new}; nothing swapped");
    } else {
        println!("subscription `{name}`: handler swapped; shards switch at their next batch");
        println!("  old {old}");
        println!("  new {new}");
    }
    Ok(())
}
