//! The `shardhost` binary: parses the command line, runs the command, reports its failure once
//! (every cause) and exits with its code. The commands are `shardhost::cli`.

use std::process::ExitCode;

use clap::Parser;
use shardhost::cli::{Chain, Cli};

fn main() -> ExitCode {
    let cli = Cli::parse();
    cli.init_logging();
    let Err(e) = cli.run() else {
        return ExitCode::SUCCESS;
    };
    if e.said() {
        // The tool it ran printed why.
    } else if e.logged() {
        tracing::error!("{}", Chain(&e));
    } else {
        eprintln!("{}", Chain(&e));
    }
    ExitCode::from(e.exit_code())
}
