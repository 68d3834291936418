//! The `shardhost` binary: parses the command line, runs the command, reports its failure once
//! (every cause) and exits with its code. The commands are `shardhost::cli`.

use std::process::ExitCode;

use clap::Parser;
use shardhost::cli::{Chain, Cli};

fn main() -> ExitCode {
    no_library_backtraces();
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

/// Errors carry no backtrace unless `RUST_LIB_BACKTRACE` asks for one. wasmtime's errors capture
/// one whenever `RUST_BACKTRACE` is set (as it often is where panics should show theirs), and an
/// error a guest is answered with (a dropped response body, a refused request) would then carry
/// kilobytes of frames into the guest and, on a debug build, load the binary's debug info to name
/// them: hundreds of MiB of host memory a guest could make the host spend. Panics keep their
/// backtraces (`RUST_BACKTRACE`).
fn no_library_backtraces() {
    if std::env::var_os("RUST_LIB_BACKTRACE").is_none() {
        // SAFETY: the first thing the process does, before any other thread exists.
        unsafe { std::env::set_var("RUST_LIB_BACKTRACE", "0") };
    }
}
