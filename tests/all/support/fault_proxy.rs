//! An HTTP proxy on 127.0.0.1 in front of an AWS-protocol emulator that answers one operation
//! with a service error for as long as a test says (`AccessDeniedException` while a policy is
//! being fixed, `ExpiredIteratorException` while iterators expire), and passes everything else
//! on, answers streamed (a SubscribeToShard's events pass as they come). It can also hold one
//! request back for a while (a call that hangs).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::{BodyExt, Either, Full};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};

/// Stops when dropped.
pub struct FaultProxy {
    pub addr: SocketAddr,
    shared: Arc<Shared>,
    _rt: tokio::runtime::Runtime,
}

#[derive(Default)]
struct Shared {
    /// Operation (its `X-Amz-Target` after the last `.`) → the error it is answered with.
    faults: Mutex<HashMap<String, &'static str>>,
    /// Operation → (requests answered with its fault, requests passed on).
    counts: Mutex<HashMap<String, (usize, usize)>>,
    /// The next request of this operation whose body holds this text waits this long before
    /// it is passed on.
    hold: Mutex<Option<(String, String, Duration)>>,
    /// Requests held back so far.
    held: std::sync::atomic::AtomicUsize,
}

impl FaultProxy {
    /// Listens on a free loopback port and forwards to `target` (`http://127.0.0.1:PORT`).
    pub fn start(target: &str) -> FaultProxy {
        let target: SocketAddr = target
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .parse()
            .expect("an http://IP:PORT endpoint");
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let listener = rt.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
        let addr = listener.local_addr().unwrap();
        let shared = Arc::new(Shared::default());
        let serving = shared.clone();
        rt.spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let shared = serving.clone();
                let service = hyper::service::service_fn(move |request| {
                    let shared = shared.clone();
                    async move { shared.answer(request, target).await }
                });
                tokio::spawn(async move {
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(client), service)
                        .await;
                });
            }
        });
        FaultProxy {
            addr,
            shared,
            _rt: rt,
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// From now on every request of `operation` is answered with the service error `error`
    /// (`AccessDeniedException`, ...), HTTP 400.
    pub fn fail(&self, operation: &str, error: &'static str) {
        let mut faults = self.shared.faults.lock().unwrap();
        faults.insert(operation.to_owned(), error);
    }

    /// From now on `operation` passes again.
    pub fn pass(&self, operation: &str) {
        self.shared.faults.lock().unwrap().remove(operation);
    }

    /// Holds the next request of `operation` whose body contains `needle` back for `delay`
    /// before passing it on.
    pub fn hold_next(&self, operation: &str, needle: &str, delay: Duration) {
        let hold = (operation.to_owned(), needle.to_owned(), delay);
        *self.shared.hold.lock().unwrap() = Some(hold);
    }

    /// How many requests were held back so far (counted when the hold starts).
    pub fn held(&self) -> usize {
        self.shared.held.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// How many requests of `operation` were answered with its fault so far.
    pub fn failed(&self, operation: &str) -> usize {
        self.count(operation).0
    }

    /// How many requests of `operation` were passed on so far.
    pub fn passed(&self, operation: &str) -> usize {
        self.count(operation).1
    }

    fn count(&self, operation: &str) -> (usize, usize) {
        let counts = self.shared.counts.lock().unwrap();
        counts.get(operation).copied().unwrap_or_default()
    }
}

type Answer = hyper::Response<Either<Full<Bytes>, hyper::body::Incoming>>;

impl Shared {
    async fn answer(
        &self,
        request: hyper::Request<hyper::body::Incoming>,
        target: SocketAddr,
    ) -> Result<Answer, hyper::http::Error> {
        let operation = request
            .headers()
            .get("x-amz-target")
            .and_then(|v| v.to_str().ok())
            .and_then(|t| t.rsplit('.').next())
            .unwrap_or_default()
            .to_owned();
        let fault = self.faults.lock().unwrap().get(&operation).copied();
        {
            let mut counts = self.counts.lock().unwrap();
            let count = counts.entry(operation.clone()).or_default();
            match fault {
                Some(_) => count.0 += 1,
                None => count.1 += 1,
            }
        }
        if let Some(error) = fault {
            let body = format!(r#"{{"__type":"{error}","message":"{operation}: {error}"}}"#);
            return hyper::Response::builder()
                .status(400)
                .header("content-type", "application/x-amz-json-1.1")
                .body(Either::Left(Full::new(Bytes::from(body))));
        }
        let (parts, body) = request.into_parts();
        let body = body
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        let delay = {
            let mut hold = self.hold.lock().unwrap();
            let ours = hold.as_ref().is_some_and(|(op, needle, _)| {
                *op == operation && String::from_utf8_lossy(&body).contains(needle.as_str())
            });
            if ours {
                hold.take().map(|(_, _, delay)| delay)
            } else {
                None
            }
        };
        if let Some(delay) = delay {
            self.held.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            tokio::time::sleep(delay).await;
        }
        let upstream = TcpStream::connect(target).await.unwrap();
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(upstream))
            .await
            .unwrap();
        tokio::spawn(conn);
        let forwarded = hyper::Request::from_parts(parts, Full::new(body));
        let (parts, body) = sender.send_request(forwarded).await.unwrap().into_parts();
        Ok(hyper::Response::from_parts(parts, Either::Right(body)))
    }
}
