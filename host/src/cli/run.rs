//! `shardhost run [CONFIG]`

use std::path::Path;

use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::lease::now_ms;
use crate::status::summary::stop_summary;
use crate::supervisor::{Host, StartError};

use super::CliError;

pub fn run(path: &Path) -> Result<(), CliError> {
    let config = Config::load(path)?;
    let names: Vec<String> = config
        .subscriptions
        .iter()
        .map(|s| s.name.clone())
        .collect();
    crate::allocator::release_large_buffers();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(CliError::AsyncRuntime)?;
    rt.block_on(async {
        let host = Host::prepare(config)
            .await
            .map_err(|source| CliError::Start {
                path: path.to_owned(),
                source: Box::new(source),
            })?;
        let stop = CancellationToken::new();
        tokio::spawn(stop_on_signal(stop.clone()));
        let (board, metrics) = (host.status(), host.metrics());
        let ran = host.run(stop).await;
        // Once the shards ran and stopped (their checkpoints written, leases released): where
        // each checkpoint ended, what is held, how the records were answered.
        if matches!(ran, Ok(()) | Err(StartError::Failed(_))) {
            for line in stop_summary(&board, &metrics, &names, now_ms()) {
                tracing::info!("{line}");
            }
        }
        ran.map_err(CliError::Stopped)
    })
}

/// The first SIGINT or SIGTERM stops gracefully; a second one exits at once.
async fn stop_on_signal(stop: CancellationToken) {
    use tokio::signal::unix::{SignalKind, signal};
    let Ok(mut term) = signal(SignalKind::terminate()) else {
        tracing::warn!("cannot listen for SIGTERM");
        return;
    };
    for n in 0.. {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
        if n == 0 {
            tracing::info!(
                "stopping: finishing in-flight batches, writing checkpoints, releasing leases (signal again to exit at once)"
            );
            stop.cancel();
        } else {
            tracing::warn!("second signal: exiting without a clean stop");
            std::process::exit(130);
        }
    }
}
