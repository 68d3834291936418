//! The hooks wasmtime-wasi-http calls for a store: where every request of a guest goes.

use std::sync::Arc;
use std::time::Instant;

use tokio::sync::Semaphore;
use wasmtime_wasi_http::{Error, RequestOptions, WasiBody, WasiHttpHooks};

use super::send::{Outbound, Sent};
use super::{HttpGate, http, origin_of};
use crate::handler::CallContext;
use crate::metrics::Metrics;

/// One instance's side of outbound HTTP: its component's gate (none: no grant), the current
/// call's deadline, and the permits of its requests in flight.
pub(in crate::wasm) struct HttpHooks {
    gate: Option<Arc<HttpGate>>,
    /// When the current call (or instantiation) runs out of time: no request outlives it.
    pub(in crate::wasm) deadline: Instant,
    in_flight: Arc<Semaphore>,
    subscription: Arc<str>,
    metrics: Option<Arc<Metrics>>,
}

impl HttpHooks {
    pub(in crate::wasm) fn new(
        gate: Option<Arc<HttpGate>>,
        ctx: &CallContext,
        deadline: Instant,
    ) -> HttpHooks {
        let permits = gate.as_ref().map_or(0, |g| g.grant.max_in_flight as usize);
        HttpHooks {
            gate,
            deadline,
            in_flight: Arc::new(Semaphore::new(permits)),
            subscription: ctx.subscription.clone(),
            metrics: ctx.metrics.clone(),
        }
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
        };
        Box::new(outbound.send(request))
    }
}
