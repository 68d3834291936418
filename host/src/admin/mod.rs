//! The admin HTTP API: health, status, metrics, and handler deploys.
//!
//! | route                                  | answers                                         |
//! |----------------------------------------|-------------------------------------------------|
//! | `GET /healthz`                         | `ok`, or 503 naming each failed task (never asks for the token: liveness probes) |
//! | `GET /`, `/page/status.js`, `/page/status.css` | the status page ([`page`]): no data, so no token; its script asks the routes below with it |
//! | `GET /status`                          | a [`Report`] as JSON                             |
//! | `GET /status/history`                  | the last 15 minutes' outcomes per second and lag, and recent errors ([`history`]) |
//! | `GET /metrics`                         | OpenMetrics text when `Accept` names it (Prometheus does), else the classic text format 0.0.4 (`promtool check metrics`, curl) |
//! | `PUT /subscriptions/{name}/handler`    | validates the body as a component and swaps it in; 200 with the old and new versions, 422 with the reason, 413 past `max_upload` |
//! | `POST /subscriptions/{name}/rollback`  | restores the version before the last swap; 409 when there is none |
//! | `PUT /subscriptions/{name}/shadow`     | validates the body and runs it in shadow (`crate::shadow`); 422, 413 as a deploy; its unsent HTTP requests answered as the `x-shardhost-http-answer` headers say ([`http_answer`]), 400 when they are malformed |
//! | `DELETE /subscriptions/{name}/shadow`  | drops the shadow; 409 when there is none |
//! | `POST /subscriptions/{name}/promote`   | deploys the shadow's bytes and drops it; 409 when there is none |
//! | `POST /subscriptions/{name}/records`   | puts the records of the body (NDJSON, as `feed`) into the embedded stream the subscription reads ([`put`]); 409 on a host that reads Kinesis, 413 past 5 MiB, 422 with the bad line |
//!
//! With `token` set, every route but `/healthz` and the status page's three static files wants `Authorization: Bearer TOKEN` (401
//! otherwise; the scheme in any case, the token compared in constant time). The config refuses
//! a listen address off loopback without a token.
//!
//! # What a client can do, and what it cannot
//!
//! A request is checked in this order, each step before anything after it is read:
//! `Origin` and `Host` ([`guard`]: a web page's request, or one for another host name, DNS
//! rebinding, is refused) → the token → for a deploy, the subscription's name (404), the
//! length it declares (`Content-Length` past `max_upload`: 413) and one upload per
//! subscription at a time (409) → only then the body, cut at `max_upload` as it streams (a
//! chunked one too) and within [`UPLOAD_TIMEOUT`](guard::UPLOAD_TIMEOUT); for a put
//! ([`put`]) likewise, its bound 5 MiB and a host on Kinesis refused (409) first. A refused
//! request's body is never asked for (no `100 Continue`), buffered or waited for: the
//! connection ends after the answer, discarding what the client still sends for at most
//! [`LINGER`](guard::LINGER) (2 s) so that it reads its answer rather than a reset. So
//! without the token nothing but request heads is ever read.
//!
//! Connections ([`serve`], [`conns`]): the accept loop never waits before accepting. A
//! connection is *waiting* until its request head has arrived (at most
//! [`HEADER_READ_TIMEOUT`](guard::HEADER_READ_TIMEOUT), 5 s) and again from its answer until
//! the next head (the same 5 s), and has a request *in flight* in between. At most
//! [`MAX_CONNECTIONS`](guard::MAX_CONNECTIONS) (256) are open: one more closes the connection
//! that has waited longest; when every open one has a request in flight the new one is closed.
//! What follows:
//!
//! - Silent, slow (a head a byte at a time) and idle keep-alive clients, in any number, hold
//!   at most 256 file descriptors, each for at most 5 s (or until it is closed to make room),
//!   and cannot keep anyone else from an answer: a client that sends its head as soon as it
//!   is connected is the newest waiting connection until its head is in, so it is closed only
//!   if 256 others connect within that time (on loopback, well under a millisecond; over a
//!   network, one round trip). An attacker who can connect that fast, all the time, can make
//!   honest requests fail (closed, never unanswered for long); a retry races again. Nothing
//!   slower than that fails one.
//! - Only a request in flight keeps its place, and without the token every request is
//!   answered as soon as its head is read (401, 403, 404, `/healthz`). Long requests are
//!   a token holder's (or, with no token, a local client's: the listen address is then
//!   loopback): an upload's body at most [`UPLOAD_TIMEOUT`](guard::UPLOAD_TIMEOUT) and one
//!   per subscription, any request at most [`REQUEST_TIMEOUT`](guard::REQUEST_TIMEOUT) (a
//!   `/status` or rollback waiting on a slow lease table).
//! - An answer the client does not read, and a lingering close, hold their connection only
//!   until someone needs its place: no request is in flight, so it may be closed to make room.
//! - An honest client's idle keep-alive connection may be closed to make room; HTTP clients
//!   reconnect (the CLI's opens one connection per request).
//! - Not bounded here: a flood that fills the kernel's listen backlog or SYN queue before
//!   anything is accepted (the kernel's SYN cookies and a firewall's business).

mod conns;
mod guard;
mod history;
pub mod http_answer;
mod page;
mod put;
pub mod reply;
mod serve;
pub mod signed;
mod upload;

use upload::deploy;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::config::AdminConfig;
use crate::deploy::Deployed;
use crate::deploy::{DeployError, Deployer};
use crate::fleet::Fleet;
use crate::metrics::Metrics;
use crate::status::{Report, StatusBoard, SubscriptionReport, Totals};
use reply::{ErrorReply, SwapReply};

/// The content type of `GET /metrics`.
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// The content type of `GET /metrics` for a client that does not ask for OpenMetrics.
const CLASSIC_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Why the admin API cannot start.
#[derive(Debug, thiserror::Error)]
#[error("[admin] cannot listen on {addr}: {source}")]
pub struct BindError {
    addr: SocketAddr,
    source: std::io::Error,
}

/// What the routes read and act on.
pub struct AdminState {
    pub owner: Arc<str>,
    /// Each subscription, in config order.
    pub subscriptions: Vec<SubscriptionInfo>,
    pub deployer: Arc<Deployer>,
    pub status: StatusBoard,
    pub metrics: Arc<Metrics>,
    /// With a DynamoDB lease table: `/status` shows the fleet, read from the table.
    pub fleet: Option<Arc<Fleet>>,
    /// With `[kinesis] endpoint = "memory"`: the embedded stream, which `shardhost put` puts
    /// records into.
    pub embedded: Option<crate::source::memory::MemoryStreams>,
}

/// A subscription as `/status` names it.
#[derive(Clone, Debug)]
pub struct SubscriptionInfo {
    pub name: String,
    pub stream: String,
    /// How it reads (`polling`, `fan-out (consumer NAME)`).
    pub read: String,
}

/// What the routes share besides [`AdminState`].
struct Shared {
    state: Arc<AdminState>,
    /// What the status page charts.
    history: Arc<history::History>,
    max_upload: usize,
    /// The subscriptions with an upload in progress.
    uploading: std::sync::Mutex<std::collections::HashSet<String>>,
}

/// A bound, not yet serving admin API.
pub struct AdminServer {
    listener: TcpListener,
    router: Router,
    state: Arc<AdminState>,
    history: Arc<history::History>,
}

impl AdminServer {
    /// Binds the listen address now, so a port in use fails the start, not later.
    pub async fn bind(config: &AdminConfig, state: AdminState) -> Result<AdminServer, BindError> {
        let listener = TcpListener::bind(config.listen)
            .await
            .map_err(|source| BindError {
                addr: config.listen,
                source,
            })?;
        let listen = listener.local_addr().unwrap_or(config.listen);
        let state = Arc::new(state);
        let history = Arc::new(history::History::new());
        Ok(AdminServer {
            listener,
            router: router(state.clone(), history.clone(), config, listen),
            state,
            history,
        })
    }

    /// Where it listens (the real port when the config said port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.listener
            .local_addr()
            .expect("a bound listener has an address")
    }

    /// Serves until `stop` fires, sampling the status page's history meanwhile.
    pub async fn serve(self, stop: CancellationToken) {
        tokio::join!(
            serve::serve(self.listener, self.router, stop.clone()),
            history::run(self.history, self.state, stop),
        );
    }
}

fn router(
    state: Arc<AdminState>,
    history: Arc<history::History>,
    config: &AdminConfig,
    listen: SocketAddr,
) -> Router {
    let health = state.status.clone();
    let metrics = state.metrics.clone();
    let shared = Arc::new(Shared {
        state,
        history,
        max_upload: usize::try_from(config.max_upload).unwrap_or(usize::MAX),
        uploading: Default::default(),
    });
    let guarded = Router::new()
        .route("/status", get(status))
        .route("/status/history", get(status_history))
        .route("/metrics", get(metrics_text))
        .route("/subscriptions/{name}/handler", put(deploy))
        .route("/subscriptions/{name}/rollback", post(rollback))
        .route(
            "/subscriptions/{name}/shadow",
            put(upload::shadow).delete(shadow_off),
        )
        .route("/subscriptions/{name}/promote", post(promote))
        .route("/subscriptions/{name}/records", post(put::put))
        .route_layer(middleware::from_fn_with_state(
            config.token.as_deref().map(guard::Token::new).map(Arc::new),
            guard::require_token,
        ))
        .with_state(shared);
    let origin = Arc::new(guard::Origins::new(listen, metrics));
    Router::new()
        .route("/healthz", get(move || healthz(health.clone())))
        // The status page's files hold no data: a browser's navigation cannot send the token.
        .route("/", get(page::index))
        .route(page::SCRIPT_PATH, get(page::script))
        .route(page::STYLE_PATH, get(page::style))
        .merge(guarded)
        .layer(middleware::from_fn_with_state(origin, guard::same_origin))
}

/// `ok`, or 503 naming every failed task (a supervisor should restart the host).
async fn healthz(status: crate::status::StatusBoard) -> Response {
    let failures = status.failures();
    if failures.is_empty() {
        return "ok\n".into_response();
    }
    let mut body = String::from("unhealthy\n");
    for f in failures {
        body.push_str(&format!("{}\n", crate::coordinator::TaskFailed(f)));
    }
    (StatusCode::SERVICE_UNAVAILABLE, body).into_response()
}

pub(super) fn error(status: StatusCode, message: String) -> Response {
    (status, axum::Json(ErrorReply { error: message })).into_response()
}

async fn status(State(shared): State<Arc<Shared>>) -> axum::Json<Report> {
    let state = &shared.state;
    let mut report = report(state);
    if let Some(fleet) = &state.fleet {
        let names: Vec<String> = state.subscriptions.iter().map(|s| s.name.clone()).collect();
        match fleet.report(&names).await {
            Ok(f) => report.fleet = Some(f),
            Err(e) => tracing::warn!("status: cannot read the fleet from the lease table: {e}"),
        }
    }
    axum::Json(report)
}

/// `GET /status/history`: the samples the status page charts.
async fn status_history(State(shared): State<Arc<Shared>>) -> axum::Json<history::HistoryReport> {
    axum::Json(shared.history.report())
}

/// The status of every subscription of this host.
pub fn report(state: &AdminState) -> Report {
    let handlers = state.deployer.handlers();
    Report {
        owner: state.owner.to_string(),
        subscriptions: state
            .subscriptions
            .iter()
            .map(|s| {
                let handler = handlers.get(&s.name);
                SubscriptionReport {
                    name: s.name.clone(),
                    stream: s.stream.clone(),
                    read: s.read.clone(),
                    handler_version: handler.map(|h| h.version.clone()).unwrap_or_default(),
                    previous_version: handler.and_then(|h| h.previous_version.clone()),
                    last_deploy_error: handler.and_then(|h| h.last_deploy_error.clone()),
                    shadow: handler.and_then(|h| h.shadow.clone()),
                    totals: Some(Totals::of(&s.name, &state.status, &state.metrics)),
                    shards: state.status.shards_of(&s.name),
                }
            })
            .collect(),
        failures: state.status.failures(),
        fleet: None,
    }
}

async fn metrics_text(
    State(shared): State<Arc<Shared>>,
    headers: axum::http::HeaderMap,
) -> Response {
    let openmetrics = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("application/openmetrics-text"));
    let metrics = &shared.state.metrics;
    if openmetrics {
        ([(header::CONTENT_TYPE, OPENMETRICS)], metrics.encode()).into_response()
    } else {
        (
            [(header::CONTENT_TYPE, CLASSIC_TEXT)],
            metrics.encode_classic(),
        )
            .into_response()
    }
}

async fn rollback(
    State(shared): State<Arc<Shared>>,
    Path(name): Path<String>,
    headers: axum::http::HeaderMap,
) -> Response {
    match signed::sign_of(&headers) {
        Ok(sign) => swapped(shared.state.deployer.rollback(&name, &sign).await),
        Err((status, message)) => error(status, message),
    }
}

async fn shadow_off(State(shared): State<Arc<Shared>>, Path(name): Path<String>) -> Response {
    match shared.state.deployer.shadow_off(&name).await {
        Ok(shadow) => axum::Json(reply::ShadowReply {
            shadow,
            current: None,
            replaced: None,
        })
        .into_response(),
        Err(e) => refusal(e),
    }
}

/// `POST /subscriptions/{name}/promote`: the shadow becomes current, as a deploy of its bytes.
async fn promote(
    State(shared): State<Arc<Shared>>,
    Path(name): Path<String>,
    headers: axum::http::HeaderMap,
) -> Response {
    match signed::sign_of(&headers) {
        Ok(sign) => swapped(shared.state.deployer.promote(&name, &sign).await),
        Err((status, message)) => error(status, message),
    }
}

fn swapped(result: Result<Deployed, DeployError>) -> Response {
    match result {
        Ok(s) => axum::Json(SwapReply::from(s)).into_response(),
        Err(e) => refusal(e),
    }
}

fn refusal(e: DeployError) -> Response {
    let status = match e {
        DeployError::UnknownSubscription { .. } => StatusCode::NOT_FOUND,
        DeployError::Invalid { .. } => StatusCode::UNPROCESSABLE_ENTITY,
        DeployError::NothingToRollBack(_) | DeployError::NoShadow(_) => StatusCode::CONFLICT,
        ref e if e.unsigned() => StatusCode::FORBIDDEN,
        ref e if e.moved() => StatusCode::CONFLICT,
        DeployError::Fleet(_) => StatusCode::SERVICE_UNAVAILABLE,
    };
    error(status, e.to_string())
}
