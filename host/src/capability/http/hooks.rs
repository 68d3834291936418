//! The hooks wasmtime-wasi-http calls for a store: where every request of a guest goes.

use std::sync::Arc;
use std::time::Instant;

use tokio::sync::Semaphore;
use wasmtime_wasi_http::{Error, RequestOptions, WasiBody, WasiHttpHooks};

use http_body_util::{BodyExt, Full};

use super::gate::{HttpGate, origin_of};
use super::held::Bodies;
use super::send::{Outbound, Sent};
use crate::effects::{Effect, Effects, HttpAnswer};
use crate::handler::CallContext;
use crate::memory::MemoryBudget;
use crate::metrics::Metrics;
use hyper as http;

/// One instance's side of outbound HTTP: its component's gate (none: no grant), the current
/// call's deadline, the permits of its requests in flight and the response bodies it holds.
pub(crate) struct HttpHooks {
    gate: Option<Arc<HttpGate>>,
    /// When the current call (or instantiation) runs out of time: no request outlives it.
    pub(crate) deadline: Instant,
    in_flight: Arc<Semaphore>,
    subscription: Arc<str>,
    metrics: Option<Arc<Metrics>>,
    /// A version on trial: its requests are recorded and, unless they only read under
    /// `--http live`, answered without being sent (503, or as `--http-answer` told).
    effects: Option<Arc<Effects>>,
    /// The response bodies read for the guest, counted against its memory budget.
    bodies: Arc<Bodies>,
}

impl HttpHooks {
    pub(crate) fn new(
        gate: Option<Arc<HttpGate>>,
        ctx: &CallContext,
        deadline: Instant,
        memory: Arc<MemoryBudget>,
    ) -> HttpHooks {
        let permits = gate.as_ref().map_or(0, |g| g.grant.max_in_flight as usize);
        HttpHooks {
            gate,
            deadline,
            in_flight: Arc::new(Semaphore::new(permits)),
            subscription: ctx.subscription.clone(),
            metrics: ctx.metrics.clone(),
            effects: ctx.effects.clone(),
            bodies: Bodies::new(memory),
        }
    }

    /// Ends a call (or the instantiation): the response bodies the guest has not read are
    /// dropped, giving their memory back.
    pub(crate) fn end_call(&mut self) {
        self.bodies.end_call();
    }

    fn deny(&self, origin: &str) -> Sent {
        if let Some(m) = &self.metrics {
            m.http_error(&self.subscription, "other", "denied");
        }
        match &self.gate {
            Some(gate) => gate.log_denied(&self.subscription, origin),
            None => tracing::warn!(
                subscription = &*self.subscription,
                origin,
                "handler request denied: the subscription grants no HTTP (no [subscription.http])"
            ),
        }
        Box::new(async { Err(Error::HttpRequestDenied) })
    }
}

impl WasiHttpHooks for HttpHooks {
    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        _options: Option<RequestOptions>,
        _fut: Box<dyn Future<Output = Result<(), Error>> + Send>,
    ) -> Sent {
        let origin = origin_of(request.uri());
        let Some(gate) = self.gate.clone() else {
            let shown = origin.map_or_else(|| request.uri().to_string(), |o| o.to_string());
            return self.deny(&shown);
        };
        let origin = match origin {
            Some(origin) if gate.grant.allows(&origin) => origin,
            Some(origin) => return self.deny(&origin.to_string()),
            None => return self.deny(&request.uri().to_string()),
        };
        // The guest's own timeouts (request-options) are not needed: the grant's timeout holds
        // from the start of the request to the end of its body, and never past the call.
        let deadline = self.deadline.min(Instant::now() + gate.grant.timeout);
        let outbound = Outbound {
            gate,
            origin,
            deadline,
            in_flight: self.in_flight.clone(),
            subscription: self.subscription.clone(),
            metrics: self.metrics.clone(),
            bodies: self.bodies.clone(),
            call: self.bodies.call(),
        };
        match self.effects.clone() {
            None => Box::new(outbound.send(request)),
            Some(effects) => on_trial(&effects, outbound, request),
        }
    }
}

/// A request of a version on trial: recorded; sent only when it reads and reads are live.
fn on_trial(effects: &Arc<Effects>, outbound: Outbound, request: http::Request<WasiBody>) -> Sent {
    let method = request.method().to_string();
    let uri = request.uri().to_string();
    if !effects.sends(&method) {
        let answer = effects.answer();
        effects.record(Effect::Http {
            method,
            uri,
            status: answer.map_or(503, |a| a.status),
            sent: false,
            stubbed: answer.is_some(),
        });
        let response = answer.map_or_else(unavailable, stubbed);
        let deadline = tokio::time::Instant::from_std(outbound.deadline);
        return Box::new(async move {
            // The guest writes its body after it sends the request: taken in full (never kept)
            // so that it sees the answer, not a body it could not write.
            let _ = tokio::time::timeout_at(deadline, drain(request.into_body())).await;
            Ok((response, done()))
        });
    }
    let effects = effects.clone();
    Box::new(async move {
        let answer = outbound.send(request).await;
        let status = answer.as_ref().map_or(0, |(r, _)| r.status().as_u16());
        effects.record(Effect::Http {
            method,
            uri,
            status,
            sent: true,
            stubbed: false,
        });
        answer
    })
}

/// Reads a request body to its end (or its first error), keeping nothing.
async fn drain(mut body: WasiBody) {
    while let Some(Ok(_)) = body.frame().await {}
}

/// 503 with no body: what a version on trial gets for a request that was not sent.
fn unavailable() -> http::Response<WasiBody> {
    response(http::StatusCode::SERVICE_UNAVAILABLE, Vec::new())
}

/// The answer `--http-answer` told: its status, body, `content-type` and `content-length`.
fn stubbed(answer: &HttpAnswer) -> http::Response<WasiBody> {
    let status =
        http::StatusCode::from_u16(answer.status).unwrap_or(http::StatusCode::SERVICE_UNAVAILABLE);
    let mut response = response(status, answer.body.clone());
    let headers = response.headers_mut();
    headers.insert(http::header::CONTENT_LENGTH, answer.body.len().into());
    if let Some(value) = answer
        .content_type
        .as_deref()
        .and_then(|t| http::header::HeaderValue::from_str(t).ok())
    {
        headers.insert(http::header::CONTENT_TYPE, value);
    }
    response
}

fn response(status: http::StatusCode, body: Vec<u8>) -> http::Response<WasiBody> {
    let body = Full::new(hyper::body::Bytes::from(body))
        .map_err(|never| match never {})
        .boxed_unsync();
    let mut response = http::Response::new(body);
    *response.status_mut() = status;
    response
}

fn done() -> Box<dyn Future<Output = Result<(), wasmtime_wasi_http::Error>> + Send> {
    Box::new(async { Ok(()) })
}
