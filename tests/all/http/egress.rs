//! Egress by address, not only by name: an allowed name that resolves to an address inside the
//! host's networks (here `localhost`, 127.0.0.1) is refused unless the grant names that address
//! or says `allow_private = true` (issue 41, item 5).

use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use shardhost::Metrics;
use shardhost::capability::http::HttpGrant;
use shardhost::config::{Limits, WasiGrants};
use shardhost::record::{BatchOutcome, Outcome};
use shardhost::testing::Runtime;

use super::{call, ctx, grant, request};
use crate::support::{HttpServer, Scratch, guest};

/// `http://localhost:PORT`: the server's origin under a name that resolves to loopback.
fn by_name(server: &HttpServer) -> String {
    server.origin().replace("127.0.0.1", "localhost")
}

async fn get_status(
    runtime: &Runtime,
    granted: &WasiGrants,
    url: &str,
    metrics: Option<Arc<Metrics>>,
) -> BatchOutcome {
    let handler = runtime
        .load_file(&guest("conformance"), Limits::default(), granted)
        .await
        .unwrap();
    call(handler.as_ref(), &ctx(metrics), &[request(0, url)])
        .await
        .unwrap()
}

#[tokio::test]
async fn a_name_resolving_to_loopback_is_refused_unless_the_grant_names_the_address_or_allows_private()
 {
    let server = HttpServer::start();
    let name = by_name(&server);
    let url = format!("{name}/status/200");
    let runtime = Runtime::new(None, false).unwrap();
    let denied = BatchOutcome::Each(vec![Outcome::RetryAfter(1)]);
    let ok = BatchOutcome::Each(vec![Outcome::RetryAfter(200)]);

    // Allowed by name only: the guest's request is denied, nothing reaches the server.
    let metrics = Arc::new(Metrics::new());
    let only_the_name = grant(&[&name], Duration::from_secs(5));
    let answer = get_status(&runtime, &only_the_name, &url, Some(metrics.clone())).await;
    assert_eq!(answer, denied, "a name resolving to 127.0.0.1 is refused");
    assert_eq!(server.requests(), 0, "nothing was sent");
    let text = metrics.encode();
    let line = format!(
        "shardhost_http_errors_total{{subscription=\"book\",origin=\"{name}\",kind=\"denied\"}} 1"
    );
    assert!(text.contains(&line), "{line}: {text}");

    // The address named literally, with its port: reached.
    let named = grant(&[&name, &server.origin()], Duration::from_secs(5));
    assert_eq!(get_status(&runtime, &named, &url, None).await, ok);

    // A literal address on another port does not name this one.
    let other_port = grant(&[&name, "http://127.0.0.1:9"], Duration::from_secs(5));
    assert_eq!(get_status(&runtime, &other_port, &url, None).await, denied);

    // allow_private = true: reached.
    let mut private = grant(&[&name], Duration::from_secs(5));
    private.update(|http: &mut HttpGrant| http.allow_private = true);
    assert_eq!(get_status(&runtime, &private, &url, None).await, ok);
    assert_eq!(server.requests(), 2);
}

#[test]
fn a_refused_address_is_named_in_the_host_log() {
    let server = HttpServer::start();
    let name = by_name(&server);
    let dir = Scratch::new("egress");
    let records = dir.write(
        "r.ndjson",
        format!(
            "{}\n",
            serde_json::json!({"partition_key": "http", "data": {"url": format!("{name}/status/200")}})
        ),
    );
    let out = Command::new(env!("CARGO_BIN_EXE_shardhost"))
        .arg("invoke")
        .arg(guest("conformance"))
        .arg("--records")
        .arg(&records)
        .args(["--json", "--state", "--allow-http", &name])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stdout.contains("\"retry_after_ms\":1"),
        "denied: {stdout}\n{stderr}"
    );
    for needle in ["denied", &name, "127.0.0.1", "loopback", "allow_private"] {
        assert!(stderr.contains(needle), "{needle}: {stderr}");
    }
    assert_eq!(server.requests(), 0);
}
