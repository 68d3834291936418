//! `shardhost keygen --out FILE`: a new ed25519 key for signed fleet deploys.

use std::path::PathBuf;

use clap::Args;

use super::CliError;
use crate::signing::SignKey;

#[derive(Args, Debug)]
pub struct KeygenArgs {
    /// Where the private key goes (PKCS#8 PEM, mode 0600); an existing file is never replaced.
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
}

/// Writes the private key and prints the public one (`ed25519:…`) as one line on stdout.
pub fn keygen(args: &KeygenArgs) -> Result<(), CliError> {
    let key = SignKey::generate()?;
    key.write_new(&args.out)?;
    println!("{}", key.public());
    eprintln!(
        "wrote the private key to {} (readable by you only); put the public key above in \
         [fleet] trusted_keys, and deploy with `shardhost deploy --sign-key {}`",
        args.out.display(),
        args.out.display()
    );
    Ok(())
}
