//! Outbound HTTP for handlers granted it (`[subscription.http]`), through `wasi:http`.
//!
//! wasmtime-wasi-http gives the guest the `wasi:http` resources; every request it makes comes
//! to [`HttpHooks::send_request`](hooks), which sends it only to an allowed origin, and there
//! only to an address the grant lets it reach (`address.rs`: a name resolving inside the
//! host's networks is refused unless the grant names the address or allows private ones),
//! within the request's timeout (never past the call's deadline), with at most
//! `max_in_flight` requests of a call waiting for their responses at once, and a response body
//! of at most `max_body` bytes (`send.rs`) that counts against the instance's memory until the
//! guest reads it and is dropped at the end of the call if it does not (`held.rs`). The host
//! never follows a redirect: a guest (its SDK) that follows one makes a new request, checked
//! like the first. TLS is rustls on `ring`, trusting the platform's roots and the grant's
//! `ca_file` (`tls.rs`).
//!
//! A component that imports `wasi:http` is refused at load for a subscription that grants no
//! HTTP; an instance of one that does not is denied every request anyway.

mod address;
mod gate;
mod grant;
mod held;
mod hooks;
mod origin;
mod send;
mod tls;

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use wasmtime::component::Linker;
use wasmtime_wasi_http::p2::bindings as wasi_http;
use wasmtime_wasi_http::{WasiHttp, WasiHttpCtx, WasiHttpCtxView};

use super::{
    Capability, GrantError, Host, InstanceContext, Part, Prepared, Shared, imports_of, list,
};
use crate::config::Grants;
pub use gate::Gates;
use gate::HttpGate;
use hooks::HttpHooks;
pub use tls::TlsError;

/// The capability: `[subscription.http]`, `wasi:http`'s outgoing handler and types.
pub struct Http;

/// `[subscription.http]`: the origins a handler may send requests to, and the bounds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpGrant {
    /// `allow`: a request goes out only to one of these (redirects are requests too).
    pub allow: Vec<Origin>,
    /// Per request, from sending to the end of the response body; never longer than what is
    /// left of the call's timeout. Default [`defaults::HTTP_TIMEOUT`](crate::config::defaults::HTTP_TIMEOUT).
    pub timeout: Duration,
    /// The largest response body, in bytes. Default
    /// [`defaults::HTTP_MAX_BODY`](crate::config::defaults::HTTP_MAX_BODY).
    pub max_body: u64,
    /// Requests one call may have open at once. Default
    /// [`defaults::HTTP_MAX_IN_FLIGHT`](crate::config::defaults::HTTP_MAX_IN_FLIGHT).
    pub max_in_flight: u32,
    /// PEM certificates trusted besides the platform's roots (a private CA), resolved against
    /// the config file's directory.
    pub ca_file: Option<PathBuf>,
    /// `allow_private`: a name in `allow` may resolve to an address inside the host's networks
    /// (loopback, private, link-local, unique-local, ...). Without it, such an address is
    /// reached only where `allow` writes it literally (with its port).
    pub allow_private: bool,
}

/// `scheme://host[:port]`, as a browser compares them: scheme and host in lower case, the
/// port always known (80 for http, 443 for https when not written).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Origin {
    /// `http` or `https`.
    pub scheme: String,
    pub host: String,
    pub port: u16,
}

impl Origin {
    /// The default port of a scheme: 80 for http, 443 for https.
    pub fn default_port(scheme: &str) -> u16 {
        if scheme == "https" { 443 } else { 80 }
    }
}

impl fmt::Display for Origin {
    /// `scheme://host`, with `:port` only when it is not the scheme's default.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://{}", self.scheme, self.host)?;
        if self.port != Origin::default_port(&self.scheme) {
            write!(f, ":{}", self.port)?;
        }
        Ok(())
    }
}

impl<T: Host> Capability<T> for Http {
    fn add_to_linker(&self, linker: &mut Linker<T>) -> wasmtime::Result<()> {
        let options = wasi_http::LinkOptions::default();
        wasi_http::http::outgoing_handler::add_to_linker::<T, WasiHttp>(linker, view::<T>)?;
        wasi_http::http::types::add_to_linker::<T, WasiHttp>(linker, &options.into(), view::<T>)
    }

    fn provides(&self, package: &str, version: &str) -> bool {
        ["wasi:http/outgoing-handler", "wasi:http/types"].contains(&package)
            && version.starts_with("0.2.")
    }

    fn refusal(&self, imports: &[String], grants: &Grants) -> Option<String> {
        let sends = imports_of(imports, &["wasi:http/outgoing-handler"]);
        (grants.get::<HttpGrant>().is_none() && !sends.is_empty()).then(|| {
            format!(
                "imports {} (it sends HTTP requests), but the subscription grants no HTTP: add a \
                 [subscription.http] table with the origins it may reach (allow = [\"https://…\"]; \
                 `shardhost invoke`: --allow-http ORIGIN)",
                list(&sends)
            )
        })
    }

    fn prepare(&self, grants: &Grants, shared: &Shared) -> Result<Box<dyn Prepared>, GrantError> {
        let gate = match grants.get::<HttpGrant>() {
            Some(grant) => Some(shared.get::<Gates>().of(grant).map_err(Box::new)?),
            None => None,
        };
        Ok(Box::new(Ready { gate }))
    }
}

/// The store's `wasi:http` as wasmtime-wasi-http reaches it: requests made from here on end by
/// the current call's deadline.
fn view<T: Host>(store: &mut T) -> WasiHttpCtxView<'_> {
    let view = store.view::<HttpPart>();
    let part = view.part;
    part.hooks.deadline = view.deadline;
    WasiHttpCtxView {
        ctx: &mut part.ctx,
        table: view.table,
        hooks: &mut part.hooks,
    }
}

/// A component's HTTP: its grant's gate, none when it has no grant (every request denied).
struct Ready {
    gate: Option<Arc<HttpGate>>,
}

impl Prepared for Ready {
    fn instance(&self, cx: &InstanceContext<'_>) -> Option<Box<dyn Part>> {
        let hooks = HttpHooks::new(self.gate.clone(), cx.call, cx.deadline, cx.memory.clone());
        Some(Box::new(HttpPart {
            ctx: WasiHttpCtx::new(),
            hooks,
        }))
    }
}

/// One instance's outbound HTTP.
struct HttpPart {
    ctx: WasiHttpCtx,
    hooks: HttpHooks,
}

impl Part for HttpPart {
    /// Drops the response bodies the guest has not read: at the end of every call, and before
    /// the first (what start-up code asked for).
    fn end_call(&mut self) {
        self.hooks.end_call();
    }

    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }
}
