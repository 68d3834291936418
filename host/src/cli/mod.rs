//! The command line: one file per subcommand.

mod check;
mod dead_letters;
mod deploy;
mod invoke;
mod run;
mod status;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};
use tracing_subscriber::EnvFilter;

/// Exit codes: 0 ok, 1 runtime failure, 2 usage or config error.
pub const EXIT_RUNTIME: u8 = 1;
pub const EXIT_CONFIG: u8 = 2;

#[derive(Parser, Debug)]
#[command(
    name = "shardhost",
    version,
    about = "Reads Kinesis shards and calls WebAssembly handlers"
)]
struct Cli {
    /// More log output: -v shows every record's outcome and every checkpoint, -vv everything.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,

    /// Log line format.
    #[arg(long, value_enum, default_value_t = LogFormat::Text, global = true)]
    log_format: LogFormat,

    #[command(subcommand)]
    command: Command,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the host until SIGINT or SIGTERM.
    Run {
        /// The config file.
        #[arg(default_value = "shardhost.toml")]
        config: PathBuf,
    },
    /// Validate a config and load every handler in it.
    Check {
        /// The config file.
        config: PathBuf,
    },
    /// Run a handler over records locally (no AWS) and print each record's outcome.
    Invoke(invoke::InvokeArgs),
    /// Replace a subscription's handler in a running host (through its admin API).
    Deploy(deploy::DeployArgs),
    /// Show what a running host reads: shards, owners, checkpoints, lag, handler versions.
    Status(status::StatusArgs),
    /// List the records a retry cap retired to a dead-letter stream, or replay them.
    DeadLetters(dead_letters::DeadLettersArgs),
}

/// Where the admin API of a running host is.
#[derive(Args, Debug)]
struct AdminArgs {
    /// The admin API's URL.
    #[arg(long, default_value = "http://127.0.0.1:9750")]
    admin: String,

    /// The admin token ([admin] token in the host's config).
    #[arg(long, env = "SHARDHOST_ADMIN_TOKEN", hide_env_values = true)]
    token: Option<String>,
}

impl AdminArgs {
    /// A client for the admin API, or the exit code of a bad `--admin` URL (after saying why).
    fn client(&self) -> Result<shardhost::admin::client::AdminClient, u8> {
        shardhost::admin::client::AdminClient::new(&self.admin, self.token.clone()).map_err(|e| {
            eprintln!("{e}");
            EXIT_CONFIG
        })
    }
}

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(cli.verbose, cli.log_format);
    let code = match cli.command {
        Command::Run { config } => run::run(&config),
        Command::Check { config } => check::check(&config),
        Command::Invoke(args) => invoke::invoke(&args),
        Command::Deploy(args) => deploy::deploy(&args),
        Command::Status(args) => status::status(&args),
        Command::DeadLetters(args) => dead_letters::dead_letters(&args),
    };
    ExitCode::from(code)
}

/// Runs a subcommand's async body on a single-threaded runtime.
fn block_on(body: impl std::future::Future<Output = u8>) -> u8 {
    match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt.block_on(body),
        Err(e) => {
            eprintln!("cannot start the async runtime: {e}");
            EXIT_RUNTIME
        }
    }
}

fn init_logging(verbose: u8, format: LogFormat) {
    let default = match verbose {
        0 => "info,cranelift=warn,wasmtime=warn",
        1 => "info,shardhost=debug,cranelift=warn,wasmtime=warn",
        _ => "debug,cranelift=info,wasmtime=info",
    };
    let filter = EnvFilter::try_from_env("SHARDHOST_LOG")
        .or_else(|_| EnvFilter::try_from_default_env())
        .unwrap_or_else(|_| EnvFilter::new(default));
    // Colours only for a terminal: piped logs stay plain text for grep and collectors.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}
