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
//! otherwise). The config refuses a listen address off loopback without a token.

pub mod client;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::config::AdminConfig;
use crate::deploy::{DeployError, Deployer};
use crate::handler::Swapped;
use crate::metrics::Metrics;
use crate::status::{Report, StatusBoard, SubscriptionReport};

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
        Ok(AdminServer {
            listener,
            router: router(
                Arc::new(state),
                config.token.clone(),
                usize::try_from(config.max_upload).unwrap_or(usize::MAX),
            ),
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
        let addr = self.local_addr();
        tracing::info!(%addr, "admin API listening");
        let served = axum::serve(self.listener, self.router)
            .with_graceful_shutdown(stop.cancelled_owned())
            .await;
        if let Err(e) = served {
            tracing::error!(%addr, "admin API stopped: {e}");
        }
    }
}

fn router(state: Arc<AdminState>, token: Option<String>, max_upload: usize) -> Router {
    let health = state.status.clone();
    let guarded = Router::new()
        .route("/status", get(status))
        .route("/metrics", get(metrics))
        .route(
            "/subscriptions/{name}/handler",
            put(deploy).layer(DefaultBodyLimit::max(max_upload)),
        )
        .route("/subscriptions/{name}/rollback", post(rollback))
        .route_layer(middleware::from_fn_with_state(
            token.map(Arc::<str>::from),
            require_token,
        ))
        .with_state(state);
    Router::new()
        .route("/healthz", get(move || healthz(health.clone())))
        .merge(guarded)
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

/// Answers 401 unless the request carries the token (when one is set). Runs before the body
/// is read, so an unauthenticated upload costs nothing.
async fn require_token(
    State(token): State<Option<Arc<str>>>,
    headers: HeaderMap,
    request: Request,
    next: Next,
) -> Response {
    if let Some(token) = token {
        let given = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        if !given.is_some_and(|g| same(g.as_bytes(), token.as_bytes())) {
            let mut response = error(
                StatusCode::UNAUTHORIZED,
                "missing or wrong bearer token (Authorization: Bearer TOKEN)".into(),
            );
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, "Bearer".parse().expect("valid"));
            return response;
        }
    }
    next.run(request).await
}

/// Compares in time that depends only on the lengths.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn error(status: StatusCode, message: String) -> Response {
    (status, axum::Json(serde_json::json!({ "error": message }))).into_response()
}

async fn status(State(state): State<Arc<AdminState>>) -> axum::Json<Report> {
    axum::Json(report(&state))
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
    }
}

async fn metrics(State(state): State<Arc<AdminState>>) -> Response {
    (
        [(header::CONTENT_TYPE, OPENMETRICS)],
        state.metrics.encode(),
    )
        .into_response()
}

async fn deploy(
    State(state): State<Arc<AdminState>>,
    Path(name): Path<String>,
    body: Bytes,
) -> Response {
    let origin = format!("upload for `{name}` ({} bytes)", body.len());
    swapped(state.deployer.deploy(&name, &body, &origin).await)
}

async fn rollback(State(state): State<Arc<AdminState>>, Path(name): Path<String>) -> Response {
    swapped(state.deployer.rollback(&name).await)
}

fn swapped(result: Result<Swapped, DeployError>) -> Response {
    match result {
        Ok(s) => axum::Json(serde_json::json!({ "old": s.old, "new": s.new })).into_response(),
        Err(e) => {
            let status = match e {
                DeployError::UnknownSubscription { .. } => StatusCode::NOT_FOUND,
                DeployError::Invalid { .. } => StatusCode::UNPROCESSABLE_ENTITY,
                DeployError::NothingToRollBack(_) => StatusCode::CONFLICT,
            };
            error(status, e.to_string())
        }
    }
}
