//! One allowed request: resolve its name and keep the addresses the grant lets it reach
//! (`address.rs`), connect to those (TLS for https), send, read the whole response body (at
//! most `max_body`, by the request's deadline, counted against the instance's memory:
//! `held.rs`), and hand the response back.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use http_body_util::BodyExt;
use hyper::body::{Body, Frame, Incoming};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::sync::Semaphore;
use tokio::time::{Sleep, timeout_at};
use tokio_rustls::rustls::pki_types::ServerName;
use wasmtime_wasi_http::{Error, WasiBody};

use super::Origin;
use super::address;
use super::gate::HttpGate;
use super::held::Bodies;
use crate::memory::OverBudget;
use crate::memory::human_bytes;
use crate::metrics::Metrics;
use hyper as http;

/// What the hook answers: the response (or why there is none), and a future wasmtime runs
/// beside the response's body.
pub(super) type Sent = Box<
    dyn Future<
            Output = Result<
                (
                    http::Response<WasiBody>,
                    Box<dyn Future<Output = Result<(), Error>> + Send>,
                ),
                Error,
            >,
        > + Send,
>;

/// A request on its way out, with what bounds it.
pub(super) struct Outbound {
    pub(super) gate: Arc<HttpGate>,
    pub(super) origin: Origin,
    /// The end of the request's timeout, or of the call, whichever comes first.
    pub(super) deadline: Instant,
    pub(super) in_flight: Arc<Semaphore>,
    pub(super) subscription: Arc<str>,
    pub(super) metrics: Option<Arc<Metrics>>,
    /// Where the response body is held for the guest, and the call the request was made in.
    pub(super) bodies: Arc<Bodies>,
    pub(super) call: u64,
}

/// Why a request got no response, and what the metrics call it.
pub(super) struct Failed {
    error: Error,
    kind: &'static str,
}

impl From<Error> for Failed {
    fn from(error: Error) -> Failed {
        let kind = kind_of(&error);
        Failed { error, kind }
    }
}

trait Io: AsyncRead + AsyncWrite + Send + Unpin + 'static {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin + 'static> Io for T {}

impl Outbound {
    /// Sends `request` and answers its response, counting either in the metrics.
    pub(super) async fn send(
        self,
        request: http::Request<WasiBody>,
    ) -> Result<
        (
            http::Response<WasiBody>,
            Box<dyn Future<Output = Result<(), Error>> + Send>,
        ),
        Error,
    > {
        let started = Instant::now();
        let count = Count {
            metrics: self.metrics.clone(),
            subscription: self.subscription.clone(),
            origin: self.origin.to_string(),
        };
        match self.exchange(request).await {
            Ok(response) => {
                count.response(response.status().as_u16(), started.elapsed().as_secs_f64());
                let done: Box<dyn Future<Output = Result<(), Error>> + Send> =
                    Box::new(async { Ok(()) });
                Ok((response, done))
            }
            Err(Failed { error, kind }) => {
                count.error(kind);
                Err(error)
            }
        }
    }

    async fn exchange(
        &self,
        mut request: http::Request<WasiBody>,
    ) -> Result<http::Response<WasiBody>, Failed> {
        let deadline = tokio::time::Instant::from_std(self.deadline);
        // A permit per request until its whole response is read: `max_in_flight` of a call at
        // once, the others queue (bounded by the deadline like the rest).
        let _permit = timeout_at(deadline, self.in_flight.clone().acquire_owned())
            .await
            .map_err(|_| Error::HttpResponseTimeout)?
            .map_err(|_| Error::ConnectionLimitReached)?;
        let stream = timeout_at(deadline, self.connect())
            .await
            .map_err(|_| Error::ConnectionTimeout)??;
        let (mut sender, conn) = timeout_at(
            deadline,
            hyper::client::conn::http1::handshake::<_, WasiBody>(TokioIo::new(stream)),
        )
        .await
        .map_err(|_| Error::ConnectionTimeout)?
        .map_err(Error::from)?;
        // The connection lives until the response's body is read or dropped, never long past
        // the request's deadline: the request itself ends at the deadline with a timeout, and
        // the connection a moment later (ended first, it would be that error instead).
        tokio::spawn(async move {
            let _ = timeout_at(deadline + CONNECTION_GRACE, conn).await;
        });
        // On the wire the request names its path only (the host header names the origin).
        let path = request
            .uri()
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .parse()
            .map_err(|_| Error::HttpRequestUriInvalid)?;
        *request.uri_mut() = path;
        let response = timeout_at(deadline, sender.send_request(request))
            .await
            .map_err(|_| Error::HttpResponseTimeout)?
            .map_err(|e| past(deadline, Error::from(e), Error::HttpResponseTimeout))?;
        let max = self.gate.grant.max_body;
        if let Some(length) = response.body().size_hint().exact()
            && length > max
        {
            return Err(Error::HttpResponseBodySize(Some(length)).into());
        }
        // The whole body is read here, before the guest sees the response: a body cut at
        // `max_body` or at the deadline is the request's error, with its error code, in every
        // SDK (an error in the middle of a wasi:http body stream carries none). Each frame
        // takes its bytes from the instance's memory budget as it arrives.
        let (head, incoming) = response.into_parts();
        let mut bounded = Bounded {
            incoming,
            left: max,
            max,
            deadline: Box::pin(tokio::time::sleep_until(deadline)),
        };
        let mut body = self.bodies.reading();
        while let Some(frame) = bounded.frame().await {
            if let Ok(data) = frame?.into_data() {
                body.push(data).map_err(|over| self.over_budget(over))?;
            }
        }
        let body = body.hold(self.call).boxed_unsync();
        Ok(http::Response::from_parts(head, body))
    }

    /// The error of a body that does not fit in the instance's memory.
    fn over_budget(&self, over: OverBudget) -> Failed {
        let message = format!(
            "the response body of {} does not fit in the instance's memory limit of {}: in use \
             are {} of the handler's memory and {} of response bodies it has not read; read or \
             drop responses before asking for more",
            self.origin,
            human_bytes(over.limit as u64),
            human_bytes(over.guest as u64),
            human_bytes(over.host as u64),
        );
        tracing::debug!(subscription = &*self.subscription, "{message}");
        Failed {
            error: Error::InternalError(Some(message)),
            kind: "memory",
        }
    }

    /// A TCP connection to the origin, with TLS for https: to an address its name resolved to
    /// that the grant lets it reach, never resolving it again.
    async fn connect(&self) -> Result<Box<dyn Io>, Error> {
        let Origin { scheme, host, port } = &self.origin;
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        let resolved: Vec<_> = tokio::net::lookup_host((bare, *port))
            .await
            .map_err(|e| Error::DnsError {
                rcode: Some(e.to_string()),
                info_code: None,
            })?
            .collect();
        let (addrs, refused) = address::admit(&self.gate.grant, &self.origin, resolved);
        if addrs.is_empty() && !refused.is_empty() {
            self.gate
                .log_refused(&self.subscription, &self.origin, &refused);
            return Err(Error::HttpRequestDenied);
        }
        if !refused.is_empty() {
            tracing::debug!(
                subscription = &*self.subscription,
                origin = %self.origin,
                refused = ?refused,
                "some addresses of an allowed name are not reached: they are inside the host's networks"
            );
        }
        let tcp = TcpStream::connect(&addrs[..]).await.map_err(|e| {
            if e.kind() == std::io::ErrorKind::ConnectionRefused {
                Error::ConnectionRefused
            } else {
                Error::Connect(e)
            }
        })?;
        let _ = tcp.set_nodelay(true);
        if scheme != "https" {
            return Ok(Box::new(tcp));
        }
        let name =
            ServerName::try_from(bare.to_owned()).map_err(|_| Error::HttpRequestUriInvalid)?;
        let tls = self.gate.tls.connect(name, tcp).await.map_err(|e| {
            let certificate = e
                .get_ref()
                .and_then(|inner| inner.downcast_ref::<tokio_rustls::rustls::Error>())
                .is_some_and(|r| {
                    matches!(
                        r,
                        tokio_rustls::rustls::Error::InvalidCertificate(_)
                            | tokio_rustls::rustls::Error::NoCertificatesPresented
                    )
                });
            if certificate {
                tracing::debug!("TLS certificate refused: {e}");
                Error::TlsCertificateError
            } else {
                Error::Tls(e)
            }
        })?;
        Ok(Box::new(tls))
    }
}

/// How long a connection outlives its request's deadline.
const CONNECTION_GRACE: std::time::Duration = std::time::Duration::from_secs(1);

/// `error`, or `timeout` when it came at or after the deadline (a connection cut by it).
fn past(deadline: tokio::time::Instant, error: Error, timeout: Error) -> Error {
    if tokio::time::Instant::now() >= deadline {
        timeout
    } else {
        error
    }
}

/// What the metrics call an error.
fn kind_of(error: &Error) -> &'static str {
    match error {
        Error::HttpRequestDenied => "denied",
        Error::ConnectionTimeout
        | Error::ConnectionReadTimeout
        | Error::HttpResponseTimeout
        | Error::DnsTimeout => "timeout",
        Error::HttpResponseBodySize(_) => "body_too_large",
        Error::Tls(_)
        | Error::TlsCertificateError
        | Error::TlsProtocolError
        | Error::TlsAlertReceived { .. } => "tls",
        Error::Connect(_)
        | Error::ConnectionRefused
        | Error::DnsError { .. }
        | Error::ConnectionTerminated
        | Error::ConnectionLimitReached => "connect",
        _ => "protocol",
    }
}

/// Counts one request's answer.
struct Count {
    metrics: Option<Arc<Metrics>>,
    subscription: Arc<str>,
    origin: String,
}

impl Count {
    fn response(&self, status: u16, seconds: f64) {
        if let Some(m) = &self.metrics {
            m.http_response(&self.subscription, &self.origin, status, seconds);
        }
    }

    fn error(&self, kind: &'static str) {
        if let Some(m) = &self.metrics {
            m.http_error(&self.subscription, &self.origin, kind);
        }
    }
}

/// A response body cut at `max` bytes and at the request's deadline.
struct Bounded {
    incoming: Incoming,
    left: u64,
    max: u64,
    deadline: Pin<Box<Sleep>>,
}

impl Body for Bounded {
    type Data = bytes::Bytes;
    type Error = Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let this = &mut *self;
        match Pin::new(&mut this.incoming).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                let len = frame.data_ref().map_or(0, |d| d.len() as u64);
                if len > this.left {
                    this.left = 0;
                    return Poll::Ready(Some(Err(Error::HttpResponseBodySize(Some(this.max)))));
                }
                this.left -= len;
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => {
                let deadline = this.deadline.deadline();
                let e = past(deadline, Error::from(e), Error::ConnectionReadTimeout);
                Poll::Ready(Some(Err(e)))
            }
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => match this.deadline.as_mut().poll(cx) {
                Poll::Ready(()) => Poll::Ready(Some(Err(Error::ConnectionReadTimeout))),
                Poll::Pending => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.incoming.is_end_stream()
    }
}
