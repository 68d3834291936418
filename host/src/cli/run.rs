//! `shardhost run [CONFIG]`

use std::path::Path;

use shardhost::config::Config;
use shardhost::supervisor::Host;
use tokio_util::sync::CancellationToken;

use super::{EXIT_CONFIG, EXIT_RUNTIME};

pub fn run(path: &Path) -> u8 {
    let config = match Config::load(path) {
        Ok(c) => c,
        Err(e) => {
            eprint!("{e}");
            return EXIT_CONFIG;
        }
    };
    shardhost::allocator::release_large_buffers();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("cannot start the async runtime: {e}");
            return EXIT_RUNTIME;
        }
    };
    rt.block_on(async {
        let host = match Host::prepare(config).await {
            Ok(h) => h,
            Err(e) => {
                eprintln!("{}: {e}", path.display());
                return EXIT_CONFIG;
            }
        };
        let stop = CancellationToken::new();
        tokio::spawn(stop_on_signal(stop.clone()));
        match host.run(stop).await {
            Ok(()) => 0,
            Err(e) => {
                tracing::error!("{e}");
                EXIT_RUNTIME
            }
        }
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
