//! `shardhost deploy [--admin URL] SUBSCRIPTION FILE.wasm` and `--rollback`

use std::path::PathBuf;

use clap::Args;
use hyper::Method;

use super::{AdminArgs, EXIT_CONFIG, EXIT_RUNTIME};
use shardhost::admin::client::refused;

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

pub fn deploy(args: &DeployArgs) -> u8 {
    let client = match args.admin.client() {
        Ok(c) => c,
        Err(code) => return code,
    };
    let name = &args.subscription;
    let (path, body) = match &args.file {
        Some(file) => match std::fs::read(file) {
            Ok(bytes) => (format!("/subscriptions/{name}/handler"), bytes),
            Err(e) => {
                eprintln!("{}: cannot read the handler: {e}", file.display());
                return EXIT_CONFIG;
            }
        },
        None => (format!("/subscriptions/{name}/rollback"), Vec::new()),
    };
    let method = if args.rollback {
        Method::POST
    } else {
        Method::PUT
    };
    super::block_on(async {
        let answer = match client.send(method, &path, body).await {
            Ok(a) => a,
            Err(e) => {
                eprintln!("{e}");
                return EXIT_RUNTIME;
            }
        };
        if !answer.status.is_success() {
            eprintln!("deploy refused: {}", refused(&answer));
            return EXIT_RUNTIME;
        }
        let versions: serde_json::Value = serde_json::from_slice(&answer.body).unwrap_or_default();
        let old = versions["old"].as_str().unwrap_or("?");
        let new = versions["new"].as_str().unwrap_or("?");
        if old == new {
            println!("subscription `{name}`: already runs {new}; nothing swapped");
        } else {
            println!("subscription `{name}`: handler swapped; shards switch at their next batch");
            println!("  old {old}");
            println!("  new {new}");
        }
        0
    })
}
