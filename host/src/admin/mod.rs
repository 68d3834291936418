//! The admin HTTP API: health, status, metrics, and handler deploys.
//!
//! | route                                  | answers                                         |
//! |----------------------------------------|-------------------------------------------------|
//! | `GET /healthz`                         | `ok`, or 503 naming each failed task (never asks for the token: liveness probes) |
//! | `GET /status`                          | a [`Report`] as JSON                             |
//! | `GET /metrics`                         | OpenMetrics text                                 |
//! | `PUT /subscriptions/{name}/handler`    | validates the body as a component and swaps it in; 200 with the old and new versions, 422 with the reason, 413 past `max_upload` |
//! | `POST /subscriptions/{name}/rollback`  | restores the version before the last swap; 409 when there is none |
//!
//! With `token` set, every route but `/healthz` wants `Authorization: Bearer TOKEN` (401
//! otherwise; the scheme in any case, the token compared in constant time). The config refuses
//! a listen address off loopback without a token.
//!
//! What a browser or a slow client can do is bounded ([`guard`]): a request with an `Origin`
//! header (a web page's) is refused, and so is one whose `Host` is not the listen address or
//! `localhost` (DNS rebinding); a connection that sends no complete request head within
//! [`HEADER_READ_TIMEOUT`](guard::HEADER_READ_TIMEOUT) is closed; at most [`MAX_CONNECTIONS`](guard::MAX_CONNECTIONS) are open at once (more wait in
//! the kernel's backlog, taking no file descriptor); a request takes at most
//! [`REQUEST_TIMEOUT`](guard::REQUEST_TIMEOUT), an upload body at most [`UPLOAD_TIMEOUT`]; and a subscription takes
//! one upload at a time.

mod guard;
pub mod reply;
mod serve;
pub mod signed;

use guard::UPLOAD_TIMEOUT;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
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
use crate::status::{Report, StatusBoard, SubscriptionReport};
use reply::{ErrorReply, SwapReply};

/// The content type of `GET /metrics`.
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

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
    /// Each subscription's name and stream, in config order.
    pub subscriptions: Vec<(String, String)>,
    pub deployer: Arc<Deployer>,
    pub status: StatusBoard,
    pub metrics: Arc<Metrics>,
    /// With a DynamoDB lease table: `/status` shows the fleet, read from the table.
    pub fleet: Option<Arc<Fleet>>,
}

/// What the routes share besides [`AdminState`].
struct Shared {
    state: Arc<AdminState>,
    max_upload: usize,
    /// The subscriptions with an upload in progress.
    uploading: std::sync::Mutex<std::collections::HashSet<String>>,
}

/// A bound, not yet serving admin API.
pub struct AdminServer {
    listener: TcpListener,
    router: Router,
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
        Ok(AdminServer {
            listener,
            router: router(Arc::new(state), config, listen),
        })
    }

    /// Where it listens (the real port when the config said port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.listener
            .local_addr()
            .expect("a bound listener has an address")
    }

    /// Serves until `stop` fires.
    pub async fn serve(self, stop: CancellationToken) {
        serve::serve(self.listener, self.router, stop).await
    }
}

fn router(state: Arc<AdminState>, config: &AdminConfig, listen: SocketAddr) -> Router {
    let health = state.status.clone();
    let metrics = state.metrics.clone();
    let shared = Arc::new(Shared {
        state,
        max_upload: usize::try_from(config.max_upload).unwrap_or(usize::MAX),
        uploading: Default::default(),
    });
    let guarded = Router::new()
        .route("/status", get(status))
        .route("/metrics", get(metrics_text))
        .route("/subscriptions/{name}/handler", put(deploy))
        .route("/subscriptions/{name}/rollback", post(rollback))
        .route_layer(middleware::from_fn_with_state(
            config.token.as_deref().map(guard::Token::new).map(Arc::new),
            guard::require_token,
        ))
        .with_state(shared);
    let origin = Arc::new(guard::Origins::new(listen, metrics));
    Router::new()
        .route("/healthz", get(move || healthz(health.clone())))
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
        let names: Vec<String> = state.subscriptions.iter().map(|(n, _)| n.clone()).collect();
        match fleet.report(&names).await {
            Ok(f) => report.fleet = Some(f),
            Err(e) => tracing::warn!("status: cannot read the fleet from the lease table: {e}"),
        }
    }
    axum::Json(report)
}

/// The status of every subscription of this host.
pub fn report(state: &AdminState) -> Report {
    let handlers = state.deployer.handlers();
    Report {
        owner: state.owner.to_string(),
        subscriptions: state
            .subscriptions
            .iter()
            .map(|(name, stream)| {
                let handler = handlers.get(name);
                SubscriptionReport {
                    name: name.clone(),
                    stream: stream.clone(),
                    handler_version: handler.map(|h| h.version.clone()).unwrap_or_default(),
                    previous_version: handler.and_then(|h| h.previous_version.clone()),
                    last_deploy_error: handler.and_then(|h| h.last_deploy_error.clone()),
                    shards: state.status.shards_of(name),
                }
            })
            .collect(),
        failures: state.status.failures(),
        fleet: None,
    }
}

async fn metrics_text(State(shared): State<Arc<Shared>>) -> Response {
    (
        [(header::CONTENT_TYPE, OPENMETRICS)],
        shared.state.metrics.encode(),
    )
        .into_response()
}

/// Takes the upload only when no other upload for the subscription is in progress, and reads
/// its body within [`UPLOAD_TIMEOUT`] and `max_upload`.
async fn deploy(
    State(shared): State<Arc<Shared>>,
    Path(name): Path<String>,
    headers: axum::http::HeaderMap,
    body: Body,
) -> Response {
    let sign = match signed::sign_of(&headers) {
        Ok(sign) => sign,
        Err((status, message)) => return error(status, message),
    };
    let Some(_upload) = Upload::begin(&shared, &name) else {
        return error(
            StatusCode::CONFLICT,
            format!("an upload for `{name}` is already in progress; try again when it is done"),
        );
    };
    let read = axum::body::to_bytes(body, shared.max_upload);
    let body = match tokio::time::timeout(UPLOAD_TIMEOUT, read).await {
        Ok(Ok(body)) => body,
        Ok(Err(_)) => {
            return error(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!(
                    "the upload is larger than [admin] max_upload ({} bytes)",
                    shared.max_upload
                ),
            );
        }
        Err(_) => {
            return error(
                StatusCode::REQUEST_TIMEOUT,
                format!("the upload did not arrive within {UPLOAD_TIMEOUT:?}"),
            );
        }
    };
    let origin = format!("upload for `{name}` ({} bytes)", body.len());
    swapped(
        shared
            .state
            .deployer
            .deploy(&name, &body, &origin, &sign)
            .await,
    )
}

/// One upload in progress for a subscription; ends when dropped.
struct Upload<'a> {
    shared: &'a Shared,
    name: String,
}

impl<'a> Upload<'a> {
    fn begin(shared: &'a Shared, name: &str) -> Option<Upload<'a>> {
        let mut uploading = shared.uploading.lock().expect("upload set poisoned");
        uploading.insert(name.to_owned()).then(|| Upload {
            shared,
            name: name.to_owned(),
        })
    }
}

impl Drop for Upload<'_> {
    fn drop(&mut self) {
        if let Ok(mut uploading) = self.shared.uploading.lock() {
            uploading.remove(&self.name);
        }
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

fn swapped(result: Result<Deployed, DeployError>) -> Response {
    match result {
        Ok(s) => axum::Json(SwapReply::from(s)).into_response(),
        Err(e) => {
            let status = match e {
                DeployError::UnknownSubscription { .. } => StatusCode::NOT_FOUND,
                DeployError::Invalid { .. } => StatusCode::UNPROCESSABLE_ENTITY,
                DeployError::NothingToRollBack(_) => StatusCode::CONFLICT,
                ref e if e.unsigned() => StatusCode::FORBIDDEN,
                ref e if e.moved() => StatusCode::CONFLICT,
                DeployError::Fleet(_) => StatusCode::SERVICE_UNAVAILABLE,
            };
            error(status, e.to_string())
        }
    }
}
