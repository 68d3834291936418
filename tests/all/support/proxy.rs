//! Proxies on 127.0.0.1 in front of one emulator, for one process: a TCP proxy that holds every
//! chunk a client sends for a set delay before passing it on (a slow network path), HTTP ones that
//! deny one operation or every operation outside a policy (as IAM would), and one that holds
//! back one answer.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Forwards to `target`; stops when dropped.
pub struct DelayProxy {
    pub addr: SocketAddr,
    delay_ms: Arc<AtomicU64>,
    /// Bumped by [`DelayProxy::cut`]: every connection open then is closed.
    cuts: tokio::sync::watch::Sender<u64>,
    rt: tokio::runtime::Runtime,
}

impl DelayProxy {
    /// Listens on a free loopback port and forwards to `target` (`http://127.0.0.1:PORT`).
    pub fn start(target: &str) -> DelayProxy {
        let (target, rt) = endpoint_and_runtime(target);
        let listener = rt
            .block_on(TcpListener::bind("127.0.0.1:0"))
            .expect("a free loopback port");
        let addr = listener.local_addr().unwrap();
        let delay_ms = Arc::new(AtomicU64::new(0));
        let delay = delay_ms.clone();
        let (cuts, watch_cuts) = tokio::sync::watch::channel(0);
        rt.spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let delay = delay.clone();
                let mut cut = watch_cuts.clone();
                cut.mark_unchanged();
                tokio::spawn(async move {
                    if let Ok(server) = TcpStream::connect(target).await {
                        tokio::select! {
                            _ = pipe(client, server, delay) => {}
                            // Both sockets dropped: the client sees its connection reset.
                            _ = cut.changed() => {}
                        }
                    }
                });
            }
        });
        DelayProxy {
            addr,
            delay_ms,
            cuts,
            rt,
        }
    }

    /// The endpoint to give a process.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Closes every connection open now, as a network failure would (new ones pass).
    pub fn cut(&self) {
        self.cuts.send_modify(|n| *n += 1);
    }

    /// From now on every chunk a client sends waits this long.
    pub fn set_delay(&self, delay: Duration) {
        self.delay_ms
            .store(delay.as_millis() as u64, Ordering::Relaxed);
    }
}

impl Drop for DelayProxy {
    fn drop(&mut self) {
        let rt = std::mem::replace(
            &mut self.rt,
            tokio::runtime::Builder::new_current_thread()
                .build()
                .unwrap(),
        );
        rt.shutdown_background();
    }
}

async fn pipe(client: TcpStream, server: TcpStream, delay: Arc<AtomicU64>) {
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let upstream = async move {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match client_read.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            let ms = delay.load(Ordering::Relaxed);
            if ms > 0 {
                // The point of the proxy: each request waits `delay` before it goes on.
                tokio::time::sleep(Duration::from_millis(ms)).await;
            }
            if server_write.write_all(&buf[..n]).await.is_err() {
                break;
            }
        }
        let _ = server_write.shutdown().await;
    };
    let downstream = async move {
        let _ = tokio::io::copy(&mut server_read, &mut client_write).await;
        let _ = client_write.shutdown().await;
    };
    tokio::join!(upstream, downstream);
}

/// An HTTP proxy on 127.0.0.1 in front of an AWS-protocol emulator that answers one operation
/// (its `X-Amz-Target`) with `AccessDeniedException`, as an IAM policy without that permission
/// would, and forwards every other request. Stops when dropped.
pub struct DenyProxy {
    pub addr: SocketAddr,
    _rt: tokio::runtime::Runtime,
}

impl DenyProxy {
    /// Denies requests whose `X-Amz-Target` ends with `.{operation}`.
    pub fn start(target: &str, operation: &'static str) -> DenyProxy {
        let (addr, _, rt) = gate(target, move |op| op != operation);
        DenyProxy { addr, _rt: rt }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

/// An HTTP proxy on 127.0.0.1 in front of an AWS-protocol emulator that forwards only the
/// operations of a policy (by `X-Amz-Target`) and answers every other with
/// `AccessDeniedException`, as IAM would, noting each one it denied. Stops when dropped.
pub struct PolicyProxy {
    pub addr: SocketAddr,
    calls: Calls,
    _rt: tokio::runtime::Runtime,
}

impl PolicyProxy {
    /// Allows the operations named in `allowed` (`GetItem`, ...), denies every other.
    pub fn start(target: &str, allowed: &[String]) -> PolicyProxy {
        let allowed = allowed.to_vec();
        let (addr, calls, rt) = gate(target, move |op| allowed.iter().any(|a| a == op));
        PolicyProxy {
            addr,
            calls,
            _rt: rt,
        }
    }

    /// The operations denied so far, each once, in the order first denied.
    pub fn denied(&self) -> Vec<String> {
        self.distinct(false)
    }

    /// The operations passed on so far, each once, in the order first seen.
    pub fn allowed(&self) -> Vec<String> {
        self.distinct(true)
    }

    /// How many requests of operation `op` were passed on.
    pub fn count(&self, op: &str) -> usize {
        let calls = self.calls.lock().unwrap();
        calls.iter().filter(|(o, p)| *p && o == op).count()
    }

    fn distinct(&self, passed: bool) -> Vec<String> {
        let mut ops: Vec<String> = Vec::new();
        for (op, p) in self.calls.lock().unwrap().iter() {
            if *p == passed && !ops.contains(op) {
                ops.push(op.clone());
            }
        }
        ops
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

/// Every request's operation (what its `X-Amz-Target` names after the last `.`) and whether
/// it was passed on.
type Calls = Arc<std::sync::Mutex<Vec<(String, bool)>>>;

/// Serves a proxy to `target` on a free loopback port: a request whose operation `allow`
/// refuses is answered `AccessDeniedException` (HTTP 400, as DynamoDB and Kinesis answer it);
/// every other is forwarded. Answers its address, the calls seen, and its runtime.
fn gate(
    target: &str,
    allow: impl Fn(&str) -> bool + Send + Sync + 'static,
) -> (SocketAddr, Calls, tokio::runtime::Runtime) {
    use http_body_util::{BodyExt, Full};
    use hyper::body::Bytes;
    use hyper_util::rt::TokioIo;
    let (target, rt) = endpoint_and_runtime(target);
    let listener = rt.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
    let addr = listener.local_addr().unwrap();
    let calls: Calls = Arc::default();
    let (allow, seen) = (Arc::new(allow), calls.clone());
    rt.spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let (allow, seen) = (allow.clone(), seen.clone());
            let service = hyper::service::service_fn(
                move |request: hyper::Request<hyper::body::Incoming>| {
                    let (allow, seen) = (allow.clone(), seen.clone());
                    async move {
                        let operation = request
                            .headers()
                            .get("x-amz-target")
                            .and_then(|v| v.to_str().ok())
                            .and_then(|t| t.rsplit('.').next())
                            .unwrap_or_default()
                            .to_owned();
                        let passed = allow(&operation);
                        seen.lock().unwrap().push((operation.clone(), passed));
                        if !passed {
                            let body = format!(
                                r#"{{"__type":"com.amazonaws.dynamodb.v20120810#AccessDeniedException","message":"not authorized to perform: {operation}"}}"#
                            );
                            return hyper::Response::builder()
                                .status(400)
                                .header("content-type", "application/x-amz-json-1.0")
                                .body(Full::new(Bytes::from(body)));
                        }
                        let (parts, body) = request.into_parts();
                        let body = body.collect().await.map(|b| b.to_bytes()).unwrap_or_default();
                        let upstream = TcpStream::connect(target).await.unwrap();
                        let (mut sender, conn) =
                            hyper::client::conn::http1::handshake(TokioIo::new(upstream))
                                .await
                                .unwrap();
                        tokio::spawn(conn);
                        let forwarded = hyper::Request::from_parts(parts, Full::new(body));
                        let answer = sender.send_request(forwarded).await.unwrap();
                        let (parts, body) = answer.into_parts();
                        let body = body.collect().await.map(|b| b.to_bytes()).unwrap_or_default();
                        Ok::<_, hyper::http::Error>(hyper::Response::from_parts(
                            parts,
                            Full::new(body),
                        ))
                    }
                },
            );
            tokio::spawn(async move {
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(client), service)
                    .await;
            });
        }
    });
    (addr, calls, rt)
}

/// The address of an `http://IP:PORT` endpoint, and a one-thread runtime for a proxy to it.
fn endpoint_and_runtime(target: &str) -> (SocketAddr, tokio::runtime::Runtime) {
    let target = target
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .parse()
        .expect("an http://IP:PORT endpoint");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    (target, rt)
}

/// An HTTP proxy on 127.0.0.1 in front of an AWS-protocol emulator that, once armed, passes the
/// next request of one operation whose body holds `needle` on at once but holds back its answer
/// for `delay`: a write the service applied whose answer the client gave up on (an attempt
/// timeout), after which the SDK sends it again. Every other request passes untouched. Stops
/// when dropped.
pub struct LateAnswerProxy {
    pub addr: SocketAddr,
    armed: std::sync::Arc<std::sync::atomic::AtomicBool>,
    late: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    _rt: tokio::runtime::Runtime,
}

impl LateAnswerProxy {
    pub fn start(
        target: &str,
        operation: &'static str,
        needle: &'static str,
        delay: Duration,
    ) -> LateAnswerProxy {
        use http_body_util::{BodyExt, Full};
        use hyper_util::rt::TokioIo;
        use std::sync::atomic::Ordering;
        let (target, rt) = endpoint_and_runtime(target);
        let listener = rt.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
        let addr = listener.local_addr().unwrap();
        let armed = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let late = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (armed_in, late_in) = (armed.clone(), late.clone());
        rt.spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let (armed, late) = (armed_in.clone(), late_in.clone());
                let service = hyper::service::service_fn(
                    move |request: hyper::Request<hyper::body::Incoming>| {
                        let (armed, late) = (armed.clone(), late.clone());
                        async move {
                            let ours = request
                                .headers()
                                .get("x-amz-target")
                                .and_then(|v| v.to_str().ok())
                                .is_some_and(|t| t.ends_with(&format!(".{operation}")));
                            let (parts, body) = request.into_parts();
                            let body = body
                                .collect()
                                .await
                                .map(|b| b.to_bytes())
                                .unwrap_or_default();
                            let hold = ours
                                && String::from_utf8_lossy(&body).contains(needle)
                                && armed.swap(false, Ordering::SeqCst);
                            let upstream = TcpStream::connect(target).await.unwrap();
                            let (mut sender, conn) =
                                hyper::client::conn::http1::handshake(TokioIo::new(upstream))
                                    .await
                                    .unwrap();
                            tokio::spawn(conn);
                            let forwarded = hyper::Request::from_parts(parts, Full::new(body));
                            let answer = sender.send_request(forwarded).await.unwrap();
                            let (parts, body) = answer.into_parts();
                            let body = body
                                .collect()
                                .await
                                .map(|b| b.to_bytes())
                                .unwrap_or_default();
                            if hold {
                                late.fetch_add(1, Ordering::SeqCst);
                                tokio::time::sleep(delay).await;
                            }
                            Ok::<_, hyper::http::Error>(hyper::Response::from_parts(
                                parts,
                                Full::new(body),
                            ))
                        }
                    },
                );
                tokio::spawn(async move {
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(client), service)
                        .await;
                });
            }
        });
        LateAnswerProxy {
            addr,
            armed,
            late,
            _rt: rt,
        }
    }

    /// Holds back the answer of the next matching request.
    pub fn arm(&self) {
        self.armed.store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// How many answers were held back so far.
    pub fn late_answers(&self) -> usize {
        self.late.load(std::sync::atomic::Ordering::SeqCst)
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}
