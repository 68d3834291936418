//! A small HTTP server on 127.0.0.1 for the tests and benches of outbound HTTP: the paths
//! `tests/conformance/README.md` lists (status, echo, slow, big, stream, stall, redirect,
//! loop, carrier). It runs on a thread of its own and stops when dropped.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path, Query};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::any;

/// A running server; stops when dropped.
pub struct HttpServer {
    addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
    requests: Arc<AtomicU64>,
    booked: Booked,
    outage: Outage,
}

/// A carrier outage: `/carrier` answers 503 for this long from its first request (`None`: no
/// outage), and counts what it refused.
#[derive(Clone, Default)]
struct Outage(Arc<std::sync::Mutex<OutageState>>);

#[derive(Default)]
struct OutageState {
    lasts: Option<Duration>,
    /// When the first request came, once one did.
    since: Option<std::time::Instant>,
    refused: u64,
}

impl Outage {
    /// Whether a request now is refused (counted when it is).
    fn refuses(&self) -> bool {
        let mut o = self.0.lock().unwrap();
        let Some(lasts) = o.lasts else {
            return false;
        };
        let since = *o.since.get_or_insert_with(std::time::Instant::now);
        let down = since.elapsed() < lasts;
        o.refused += u64::from(down);
        down
    }
}

/// The carrier's bookings (answered 201), by `Idempotency-Key`, each with how often it came.
type Booked = Arc<std::sync::Mutex<std::collections::BTreeMap<String, u64>>>;

impl HttpServer {
    /// Starts the server on a free port of 127.0.0.1.
    pub fn start() -> HttpServer {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        listener.set_nonblocking(true).expect("nonblocking");
        let addr = listener.local_addr().expect("local addr");
        let requests = Arc::new(AtomicU64::new(0));
        let counted = requests.clone();
        let booked = Booked::default();
        let bookings = booked.clone();
        let outage = Outage::default();
        let down = outage.clone();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
                let app = routes(counted, bookings, down);
                axum::serve(listener, app)
                    .with_graceful_shutdown(async {
                        let _ = stopped.await;
                    })
                    .await
                    .expect("serve");
            });
        });
        HttpServer {
            addr,
            stop: Some(stop),
            thread: Some(thread),
            requests,
            booked,
            outage,
        }
    }

    /// Makes `/carrier` unreachable in effect for `lasts` from its first request: it answers
    /// 503 (as a carrier that is down behind its load balancer) and books nothing meanwhile.
    pub fn carrier_down_at_first(&self, lasts: Duration) {
        self.outage.0.lock().unwrap().lasts = Some(lasts);
    }

    /// The bookings `/carrier` refused during its outage.
    pub fn refused(&self) -> u64 {
        self.outage.0.lock().unwrap().refused
    }

    /// What `/carrier` booked (answered 201), by `Idempotency-Key`: how many times each.
    pub fn bookings(&self) -> std::collections::BTreeMap<String, u64> {
        self.booked.lock().unwrap().clone()
    }

    /// `http://127.0.0.1:PORT`
    pub fn origin(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Requests answered (or being answered) so far.
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::SeqCst)
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        // A stalled response holds its connection open: do not wait for graceful shutdown.
        drop(self.thread.take());
    }
}

/// An origin on 127.0.0.1 where nothing listens (a port bound, then let go).
pub fn closed_origin() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    let addr = listener.local_addr().expect("local addr");
    drop(listener);
    format!("http://{addr}")
}

fn routes(requests: Arc<AtomicU64>, booked: Booked, outage: Outage) -> Router {
    Router::new()
        .route("/status/{n}", any(status))
        .route("/echo", any(echo))
        .route("/slow/{ms}", any(slow))
        .route("/big/{n}", any(big))
        .route("/stream/{n}", any(stream))
        .route("/stall", any(stall))
        .route("/redirect/{n}", any(redirect))
        .route("/loop", any(|| async { redirect_to(302, "/loop") }))
        .route(
            "/carrier",
            any(move |headers: HeaderMap, body: Bytes| {
                let down = outage.refuses();
                carrier(headers, body, booked.clone(), down)
            }),
        )
        .layer(axum::middleware::from_fn(
            move |req: axum::extract::Request, next: axum::middleware::Next| {
                requests.fetch_add(1, Ordering::SeqCst);
                next.run(req)
            },
        ))
}

// Every handler reads the request's body before it answers, as servers do: one that answers
// and closes while the client still sends the body makes the client's write fail, a race the
// tests would otherwise lose now and then under load.

async fn status(Path(n): Path<u16>, _body: Bytes) -> Response {
    let code = StatusCode::from_u16(n).unwrap_or(StatusCode::BAD_REQUEST);
    (code, format!("status {n}")).into_response()
}

async fn echo(method: Method, headers: HeaderMap, body: Bytes) -> Response {
    let key = headers.get("idempotency-key").and_then(|v| v.to_str().ok());
    // In this order: the conformance cases compare the text.
    let json = |v: serde_json::Value| v.to_string();
    let answer = format!(
        "{{\"method\":{},\"key\":{},\"body\":{}}}",
        json(method.as_str().into()),
        json(key.into()),
        json(String::from_utf8_lossy(&body).into()),
    );
    (StatusCode::OK, answer).into_response()
}

async fn slow(Path(ms): Path<u64>) -> &'static str {
    tokio::time::sleep(Duration::from_millis(ms)).await;
    "slow"
}

async fn big(Path(n): Path<usize>) -> Vec<u8> {
    vec![b'x'; n]
}

async fn stream(Path(n): Path<usize>) -> Response {
    let chunks = (0..n)
        .step_by(8192)
        .map(move |at| Ok::<_, std::io::Error>(Bytes::from(vec![b'x'; 8192.min(n - at)])));
    Body::from_stream(futures_util::stream::iter(chunks)).into_response()
}

async fn stall() -> Response {
    let first = futures_util::stream::once(async { Ok::<_, std::io::Error>(Bytes::from("x")) });
    let never = futures_util::stream::pending::<Result<Bytes, std::io::Error>>();
    let body = futures_util::StreamExt::chain(first, never);
    Body::from_stream(body).into_response()
}

async fn redirect(
    Path(n): Path<u16>,
    Query(q): Query<std::collections::HashMap<String, String>>,
    _body: Bytes,
) -> Response {
    redirect_to(n, q.get("to").map_or("/", String::as_str))
}

fn redirect_to(n: u16, to: &str) -> Response {
    let code = StatusCode::from_u16(n).unwrap_or(StatusCode::FOUND);
    (code, [(header::LOCATION, to.to_owned())], "").into_response()
}

async fn carrier(headers: HeaderMap, body: Bytes, booked: Booked, down: bool) -> Response {
    if down {
        return (StatusCode::SERVICE_UNAVAILABLE, "the carrier is down").into_response();
    }
    // As the example's stub (and many real APIs): no chunked bodies.
    if !headers.contains_key(header::CONTENT_LENGTH) {
        return (StatusCode::LENGTH_REQUIRED, "no Content-Length").into_response();
    }
    if !headers.contains_key("idempotency-key") {
        return (StatusCode::BAD_REQUEST, "no Idempotency-Key").into_response();
    }
    let shipment: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
    let address = shipment["address"].as_str().unwrap_or_default();
    if address.contains("nowhere") {
        (StatusCode::UNPROCESSABLE_ENTITY, "no such address").into_response()
    } else if address.contains("busy") {
        (StatusCode::SERVICE_UNAVAILABLE, "try later").into_response()
    } else {
        let key = headers["idempotency-key"]
            .to_str()
            .unwrap_or("?")
            .to_owned();
        *booked.lock().unwrap().entry(key).or_default() += 1;
        (StatusCode::CREATED, "booked").into_response()
    }
}
