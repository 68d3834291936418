//! The admin API's accept loop: HTTP/1.1 connections with a header-read timeout, at most
//! [`MAX_CONNECTIONS`] open (past it the one waiting longest without a request in flight is
//! closed, see [`conns`](super::conns)), all closed gracefully on stop.
//!
//! The loop never waits for a free place before accepting: a new connection is always taken
//! from the kernel's backlog at once, so a client that sends its head is heard whatever the
//! other connections do.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::conns::{Admitted, Conn, Conns};
use super::guard::{HEADER_READ_TIMEOUT, LINGER, MAX_CONNECTIONS, REQUEST_TIMEOUT};

/// How often, at most, crowding is logged.
const WARN_EVERY: Duration = Duration::from_secs(60);

/// Serves `router` on `listener` until `stop` fires; then lets open requests finish (each is
/// bounded by [`REQUEST_TIMEOUT`]).
pub(super) async fn serve(listener: TcpListener, router: Router, stop: CancellationToken) {
    match listener.local_addr() {
        Ok(addr) => tracing::info!(%addr, "admin API listening"),
        Err(e) => tracing::warn!("admin API listening (its address is unknown: {e})"),
    }
    let mut conns = Conns::new(MAX_CONNECTIONS);
    let mut connections = JoinSet::new();
    let mut crowded = Crowded::default();
    loop {
        while connections.try_join_next().is_some() {}
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
        match conns.admit() {
            Admitted::Yes { conn, made_room } => {
                if made_room {
                    crowded.made_room();
                }
                connections.spawn(connection(stream, router.clone(), conn, stop.clone()));
            }
            Admitted::Full => {
                crowded.refused();
                drop(stream);
            }
        }
    }
    let drain = async { while connections.join_next().await.is_some() {} };
    if tokio::time::timeout(REQUEST_TIMEOUT, drain).await.is_err() {
        tracing::warn!("admin API: requests still open at stop were dropped");
    }
}

/// Serves one connection until it ends, it is closed to make room, or `stop` fires.
async fn connection(stream: TcpStream, router: Router, conn: Arc<Conn>, stop: CancellationToken) {
    let closing = conn.closing().clone();
    tokio::select! {
        _ = serve_http(stream, router, conn, stop) => {}
        // No request is in flight: dropping the connection closes it.
        _ = closing.cancelled() => {}
    }
}

/// HTTP/1.1 on one connection; on `stop`, the request in flight is answered and no other
/// taken. Ends with a lingering close.
async fn serve_http(stream: TcpStream, router: Router, conn: Arc<Conn>, stop: CancellationToken) {
    let service = Tracked {
        inner: TowerToHyperService::new(router),
        conn,
    };
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT);
    let mut connection = http.serve_connection(TokioIo::new(stream), service);
    let mut stopping = false;
    let done = loop {
        tokio::select! {
            done = std::future::poll_fn(|cx| connection.poll_without_shutdown(cx)) => break done,
            _ = stop.cancelled(), if !stopping => stopping = true,
        }
        Pin::new(&mut connection).graceful_shutdown();
    };
    // A header-read timeout or a broken connection: nothing to answer.
    if done.is_ok() && !stopping {
        linger(connection.into_parts().io.into_inner(), &stop).await;
    }
}

/// Closes a connection whose last answer may have refused a body the client is still sending:
/// ends the answer (FIN), then discards what arrives for at most [`LINGER`] (or until `stop`)
/// before closing. Closing at once with unread bytes would reset the connection, and the
/// client could lose the answer (a `413` say) before reading it. A client that is done closes
/// its side at once, and so ends this.
async fn linger(mut stream: TcpStream, stop: &CancellationToken) {
    if stream.shutdown().await.is_err() {
        return;
    }
    let mut sink = vec![0u8; 16 << 10];
    let discard = async { while matches!(stream.read(&mut sink).await, Ok(n) if n > 0) {} };
    tokio::select! {
        _ = tokio::time::timeout(LINGER, discard) => {}
        _ = stop.cancelled() => {}
    }
}

/// A connection that was chosen to be closed takes no request (hyper closes it on this error).
#[derive(Debug, thiserror::Error)]
#[error("the connection is being closed to make room for another")]
struct Closing;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The router's service for one connection, marking each request in flight until it is
/// answered (so the connection is not closed to make room meanwhile).
struct Tracked<S> {
    inner: S,
    conn: Arc<Conn>,
}

impl<S, R> hyper::service::Service<R> for Tracked<S>
where
    S: hyper::service::Service<R>,
    S::Response: Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, BoxError>> + Send>>;

    fn call(&self, request: R) -> Self::Future {
        let Some(in_flight) = self.conn.begin() else {
            return Box::pin(std::future::ready(Err(Closing.into())));
        };
        let answer = self.inner.call(request);
        Box::pin(async move {
            let answer = answer.await.map_err(Into::into);
            drop(in_flight);
            answer
        })
    }
}

/// Logs that the admin API is crowded, at most once every [`WARN_EVERY`] for each kind.
#[derive(Default)]
struct Crowded {
    made_room: Option<Instant>,
    refused: Option<Instant>,
}

impl Crowded {
    fn made_room(&mut self) {
        if due(&mut self.made_room) {
            tracing::warn!(
                "admin API: {MAX_CONNECTIONS} connections open; closing the ones waiting longest \
                 without a request (slow or idle clients) to make room"
            );
        }
    }

    fn refused(&mut self) {
        if due(&mut self.refused) {
            tracing::warn!(
                "admin API: all {MAX_CONNECTIONS} open connections have a request in flight; \
                 closing new ones until one ends"
            );
        }
    }
}

/// Whether the last warning (`last`) is older than [`WARN_EVERY`]; if so, now is the last.
fn due(last: &mut Option<Instant>) -> bool {
    let due = last.is_none_or(|at| at.elapsed() >= WARN_EVERY);
    if due {
        *last = Some(Instant::now());
    }
    due
}
