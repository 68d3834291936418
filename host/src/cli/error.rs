//! The command line's one failure type: what every subcommand returns, and the exit code it
//! ends the process with.

use std::error::Error;
use std::fmt;
use std::path::PathBuf;

use super::admin_client::{AdminError, UrlError};
use crate::config::{ConfigError, Location, Problem};
use crate::feed::FeedError;
use crate::fleet::FleetError;
use crate::handler::CallError;
use crate::source::SourceError;
use crate::supervisor::StartError;
use crate::wasm::LoadError;

/// Exit codes: 0 ok, 1 runtime failure, 2 usage or config error.
pub const EXIT_RUNTIME: u8 = 1;
pub const EXIT_CONFIG: u8 = 2;

/// Why a subcommand failed.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// The config does not load (`run`, `dead-letters`).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// `check`: every problem found, one a line, then how many.
    #[error("{}", problem_list(.path, .problems))]
    Check {
        path: PathBuf,
        problems: Vec<CheckProblem>,
    },
    /// What the config names cannot be set up (`run`, `dead-letters`).
    #[error("{}: {source}", .path.display())]
    Start {
        path: PathBuf,
        source: Box<StartError>,
    },
    #[error(transparent)]
    AdminUrl(#[from] UrlError),
    #[error("{}: cannot read the handler: {source}", .file.display())]
    ReadHandler {
        file: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    New(#[from] super::new::NewError),
    #[error(transparent)]
    Build(#[from] super::build::BuildError),
    /// `invoke`: the record file.
    #[error(transparent)]
    Records(#[from] FeedError),
    /// `invoke`: the handler does not load.
    #[error(transparent)]
    Handler(LoadError),
    #[error(
        "{}: [kinesis] endpoint = \"memory\": the embedded stream lives inside the running \
         host, so its dead letters cannot be read from outside",
        .0.display()
    )]
    EmbeddedDeadLetters(PathBuf),
    #[error(
        "{}: [kinesis] endpoint = \"memory\": the embedded stream lives inside the running \
         host and keeps no history outside it; replay a records file instead: --file \
         RECORDS.ndjson (the format `invoke` reads)",
        .0.display()
    )]
    EmbeddedReplay(PathBuf),
    /// `--http-answer`: the status or the body file.
    #[error(transparent)]
    HttpAnswer(#[from] crate::effects::answer::AnswerError),
    /// `deploy --canary-off` with no rollout running.
    #[error("subscription `{0}` has no rollout running")]
    NoRollout(String),
    /// `deploy --promote` with no shadow to promote.
    #[error("subscription `{0}` has no shadow to promote (set one with deploy --shadow)")]
    NoShadow(String),
    /// `replay`: the versions answered some records differently (the report shows them).
    #[error("{0} record(s) answered differently")]
    Differs(u64),

    #[error(
        "no cache directory: set $SHARDHOST_CACHE_DIR or $HOME, or [host] cache_dir in a \
         config given with --config"
    )]
    NoCacheDir,
    #[error("compile cache {}: {source}", .dir.display())]
    Cache {
        dir: PathBuf,
        source: std::io::Error,
    },

    #[error("cannot start the async runtime: {0}")]
    AsyncRuntime(#[source] std::io::Error),
    /// The wasm engine does not start.
    #[error(transparent)]
    Engine(LoadError),
    /// `invoke`: the handler loaded but does not instantiate.
    #[error(transparent)]
    Instantiate(CallError),
    #[error("cannot write the output: {0}")]
    Output(#[source] std::io::Error),
    /// `invoke`: calls failed (each is shown in the output and logged).
    #[error("the handler failed on {0} record(s)")]
    CallsFailed(usize),
    #[error(transparent)]
    Admin(#[from] AdminError),
    /// `dead-letters`: the stream cannot be read.
    #[error(transparent)]
    Source(#[from] SourceError),
    #[error(
        "replaying dead letter {letter} into `{stream}` failed after {replayed} replayed: {source}"
    )]
    Replay {
        letter: String,
        stream: String,
        replayed: usize,
        source: Box<SourceError>,
    },
    /// `dead-letters --replay`: letters left out (each named above).
    #[error("{0} dead letter(s) not replayed")]
    NotReplayed(usize),
    /// `run`: the host stopped because a task failed.
    #[error(transparent)]
    Stopped(StartError),
    /// `deploy --config`, `status --config` on a config without a DynamoDB lease table.
    #[error(
        "{}: [leases] store = \"memory\": there is no fleet in a lease table to deploy to or read \
         (deploy through the running host's admin API: --admin URL)",
        .0.display()
    )]
    NoFleet(PathBuf),
    #[error("{}: no subscription `{name}` (the config has: {})", .path.display(), .known.join(", "))]
    UnknownSubscription {
        path: PathBuf,
        name: String,
        known: Vec<String>,
    },
    /// `deploy --config`: the component fails validation; nothing was written.
    #[error(
        "{}: refused for subscription `{subscription}`: {source}; the fleet's desired version is unchanged",
        .file.display()
    )]
    Refused {
        file: PathBuf,
        subscription: String,
        source: LoadError,
    },
    /// The fleet's lease table.
    #[error(transparent)]
    Fleet(#[from] FleetError),
    /// `keygen`, `deploy --sign-key`: a key that cannot be read or written.
    #[error(transparent)]
    Key(#[from] crate::signing::KeyError),
    /// `deploy --sign-key --admin`: the instance has no fleet to sign for.
    #[error("{0}: this instance keeps its leases in memory: there is no fleet deploy to sign")]
    NothingToSign(String),
    /// `deploy --wait`: some live instances do not run the version.
    #[error("{}", not_converged(.subscription, .version, .refused, .pending, .timeout))]
    NotConverged {
        subscription: String,
        version: String,
        refused: Vec<(String, String)>,
        pending: Vec<String>,
        timeout: std::time::Duration,
    },
}

fn not_converged(
    subscription: &str,
    version: &str,
    refused: &[(String, String)],
    pending: &[String],
    timeout: &std::time::Duration,
) -> String {
    let mut text = format!("subscription `{subscription}`: the fleet does not all run {version}");
    for (owner, why) in refused {
        text += &format!("\n  {owner} refused it: {why}");
    }
    if !pending.is_empty() {
        text += &format!(
            "\n  no answer within {timeout:?} from: {}",
            pending.join(", ")
        );
    }
    text
}

/// One problem `check` found.
#[derive(Debug, thiserror::Error)]
pub enum CheckProblem {
    #[error("{0}")]
    Config(Problem),
    #[error("{at}: {source}")]
    Handler { at: Location, source: LoadError },
    #[error("subscription `{subscription}`: feed {source}")]
    Feed {
        subscription: String,
        source: FeedError,
    },
    #[error("[host] retry_keys_previous: {0}")]
    RetryKey(#[source] crate::envelope::key::KeyError),
}

fn problem_list(path: &std::path::Path, problems: &[CheckProblem]) -> String {
    let mut text = String::new();
    for p in problems {
        text += &format!("{p}\n");
    }
    text + &format!("{}: {} problem(s)", path.display(), problems.len())
}

impl CliError {
    /// The process's exit code.
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::New(e) => e.exit_code(),
            CliError::Build(e) => e.exit_code(),
            CliError::Config(_)
            | CliError::Check { .. }
            | CliError::Start { .. }
            | CliError::AdminUrl(_)
            | CliError::ReadHandler { .. }
            | CliError::Records(_)
            | CliError::Handler(_)
            | CliError::EmbeddedDeadLetters(_)
            | CliError::EmbeddedReplay(_)
            | CliError::HttpAnswer(_)
            | CliError::NoShadow(_)
            | CliError::NoRollout(_)
            | CliError::NoFleet(_)
            | CliError::UnknownSubscription { .. }
            | CliError::Refused { .. }
            | CliError::Key(_)
            | CliError::NothingToSign(_)
            | CliError::NoCacheDir => EXIT_CONFIG,
            CliError::AsyncRuntime(_)
            | CliError::Engine(_)
            | CliError::Instantiate(_)
            | CliError::Output(_)
            | CliError::CallsFailed(_)
            | CliError::Differs(_)
            | CliError::Admin(_)
            | CliError::Source(_)
            | CliError::Replay { .. }
            | CliError::NotReplayed(_)
            | CliError::Stopped(_)
            | CliError::Fleet(_)
            | CliError::NotConverged { .. }
            | CliError::Cache { .. } => EXIT_RUNTIME,
        }
    }

    /// Whether it goes to the log (a running host's failure) rather than plain to stderr.
    pub fn logged(&self) -> bool {
        matches!(self, CliError::Stopped(_))
    }

    /// A tool it ran (a build's) already said why, on stderr: nothing to add.
    pub fn said(&self) -> bool {
        matches!(self, CliError::Build(e) if e.said())
    }
}

/// An error and each cause below it that its message does not show already, `: `-separated on
/// one line (a trailing newline dropped).
pub struct Chain<'a>(pub &'a (dyn Error + 'static));

impl fmt::Display for Chain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut shown = self.0.to_string().trim_end().to_owned();
        let mut cause = self.0.source();
        while let Some(c) = cause {
            let text = c.to_string();
            let text = text.trim_end();
            if !shown.contains(text) {
                shown += ": ";
                shown += text;
            }
            cause = c.source();
        }
        f.write_str(&shown)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("outer: {0}")]
    struct Inline(#[source] std::io::Error);

    #[derive(Debug, thiserror::Error)]
    #[error("terse")]
    struct Terse(#[source] Inline);

    #[test]
    fn each_cause_shows_once() {
        let io = || std::io::Error::other("disk gone");
        assert_eq!(Chain(&Inline(io())).to_string(), "outer: disk gone");
        assert_eq!(
            Chain(&Terse(Inline(io()))).to_string(),
            "terse: outer: disk gone"
        );
    }

    #[test]
    fn config_errors_exit_2_and_runtime_failures_1() {
        let stdout = || std::io::Error::other("closed");
        assert_eq!(
            CliError::ReadHandler {
                file: "x.wasm".into(),
                source: stdout()
            }
            .exit_code(),
            EXIT_CONFIG
        );
        assert_eq!(CliError::Output(stdout()).exit_code(), EXIT_RUNTIME);
    }
}
