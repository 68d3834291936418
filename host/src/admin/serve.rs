//! The admin API's accept loop: HTTP/1.1 connections with a header-read timeout, at most
//! [`MAX_CONNECTIONS`] at once, all closed gracefully on stop.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::guard::{HEADER_READ_TIMEOUT, MAX_CONNECTIONS, REQUEST_TIMEOUT};

/// Serves `router` on `listener` until `stop` fires; then lets open requests finish (each is
/// bounded by [`REQUEST_TIMEOUT`]).
pub(super) async fn serve(listener: TcpListener, router: Router, stop: CancellationToken) {
    match listener.local_addr() {
        Ok(addr) => tracing::info!(%addr, "admin API listening"),
        Err(e) => tracing::warn!("admin API listening (its address is unknown: {e})"),
    }
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let mut connections = JoinSet::new();
    let mut full_logged = false;
    loop {
        while connections.try_join_next().is_some() {}
        if slots.available_permits() == 0 && !full_logged {
            // Logged once per time it fills up: the rest wait in the listen backlog.
            tracing::warn!(
                "admin API: {MAX_CONNECTIONS} connections open; new ones wait until one closes"
            );
            full_logged = true;
        }
        let slot = tokio::select! {
            _ = stop.cancelled() => break,
            slot = slots.clone().acquire_owned() => slot.expect("the semaphore is never closed"),
        };
        let stream = tokio::select! {
            _ = stop.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    // Out of file descriptors, say: wait a moment rather than spin.
                    tracing::warn!("admin API: accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        if slots.available_permits() > 0 {
            full_logged = false;
        }
        let service = TowerToHyperService::new(router.clone());
        let stop = stop.clone();
        connections.spawn(async move {
            let _slot = slot;
            let mut http = hyper::server::conn::http1::Builder::new();
            http.timer(TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT);
            let connection = http.serve_connection(TokioIo::new(stream), service);
            tokio::pin!(connection);
            tokio::select! {
                _ = connection.as_mut() => {}
                _ = stop.cancelled() => {
                    connection.as_mut().graceful_shutdown();
                    let _ = connection.await;
                }
            }
        });
    }
    let drain = async { while connections.join_next().await.is_some() {} };
    if tokio::time::timeout(REQUEST_TIMEOUT, drain).await.is_err() {
        tracing::warn!("admin API: requests still open at stop were dropped");
    }
}
