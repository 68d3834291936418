//! The command line: one file per subcommand, each returning a [`CliError`]; `main.rs` parses
//! the arguments, runs the command and reports its error.

pub mod admin_client;
mod build;
mod cache;
mod canary;
mod check;
mod columns;
mod dead_letters;
mod deploy;
mod error;
mod fleet;
mod invoke;
mod keygen;
mod new;
mod put;
mod replay;
mod run;
mod sdk;
mod shadow;
mod status;

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use tracing_subscriber::EnvFilter;

use admin_client::AdminClient;
pub use error::{Chain, CheckProblem, CliError, EXIT_CONFIG, EXIT_RUNTIME};

/// The command line.
#[derive(Parser, Debug)]
#[command(
    name = "shardhost",
    version,
    about = "Reads Kinesis shards and calls WebAssembly handlers"
)]
pub struct Cli {
    /// More log output: -v shows every record's outcome and every checkpoint, -vv everything.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,

    /// Log line format.
    #[arg(long, value_enum, default_value_t = LogFormat::Text, global = true)]
    log_format: LogFormat,

    #[command(subcommand)]
    command: Command,
}

/// How log lines look.
#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

/// The subcommands.
#[derive(Subcommand, Debug)]
enum Command {
    /// Make a handler project: the handler, a unit test, sample records and a shardhost.toml
    /// on the embedded stream.
    New(new::NewArgs),
    /// Build a handler's component (Rust, Python or JavaScript: found from the project).
    Build(build::BuildArgs),
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
    /// Replace a subscription's handler: in a running host (its admin API), and with a DynamoDB
    /// lease table on every instance of the fleet (also straight through the table: --config).
    Deploy(deploy::DeployArgs),
    /// Show what a running host reads (shards, owners, checkpoints, lag, handler versions) and,
    /// with a DynamoDB lease table, what every instance of the fleet runs.
    Status(status::StatusArgs),
    /// Put records into a running host's embedded stream (its admin API): a records file, or
    /// one record with --key and --data.
    Put(put::PutArgs),
    /// List the records a retry cap retired to a dead-letter stream, or replay them.
    DeadLetters(dead_letters::DeadLettersArgs),
    /// Run a handler version over a subscription's history next to the version it runs now,
    /// with every effect recorded, not performed; report the records they answer differently.
    Replay(replay::ReplayArgs),
    /// List the compiled components cached on this machine, or clear them.
    Cache(cache::CacheArgs),
    /// Make a key that signs fleet deploys: writes the private key to --out (mode 0600) and
    /// prints the public key for [fleet] trusted_keys.
    Keygen(keygen::KeygenArgs),
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
    /// A client for the admin API.
    fn client(&self) -> Result<AdminClient, CliError> {
        Ok(AdminClient::new(&self.admin, self.token.clone())?)
    }
}

impl Cli {
    /// Runs the subcommand.
    pub fn run(self) -> Result<(), CliError> {
        match self.command {
            Command::New(args) => new::new(&args),
            Command::Build(args) => build::build(&args, self.verbose > 0),
            Command::Run { config } => run::run(&config),
            Command::Check { config } => check::check(&config),
            Command::Invoke(args) => invoke::invoke(&args),
            Command::Deploy(args) => deploy::deploy(&args),
            Command::Status(args) => status::status(&args),
            Command::Put(args) => put::put(&args),
            Command::DeadLetters(args) => dead_letters::dead_letters(&args),
            Command::Replay(args) => replay::replay(&args),
            Command::Cache(args) => cache::cache(&args),
            Command::Keygen(args) => keygen::keygen(&args),
        }
    }

    /// Logs to stderr at the level `-v` asks for (or `SHARDHOST_LOG` / `RUST_LOG`).
    pub fn init_logging(&self) {
        init_logging(self.verbose, self.log_format)
    }
}

/// Runs a subcommand's async body on a single-threaded runtime.
fn block_on<T>(
    body: impl std::future::Future<Output = Result<T, CliError>>,
) -> Result<T, CliError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(CliError::AsyncRuntime)?
        .block_on(body)
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
