//! The status page (`GET /`, issue 31) in a real browser, against a host with records flowing:
//! headless Chromium loads it with the token in the address's fragment and the test reads what
//! it rendered (a row per shard, the versions, the refused deploy and recent errors, charts
//! with points; on kinesis-mock and dynalite the fleet and a rollout). `routes`: the same
//! routes through plain HTTP (the token, the policy, the same-origin rules, the history).
//!
//! Chromium is Debian's `chromium` package (`.ci/run` installs it). Without it the browser
//! tests are skipped with a note, except under `CI`, where they fail.
//!
//! `SHARDHOST_STATUS_SCREENSHOT=docs/status-page.png` makes the browser test also save a
//! screenshot of the page it checked (the one docs/operations/admin-api.md shows).

mod routes;

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use hyper::{Method, StatusCode};
use tokio_util::sync::CancellationToken;

use crate::support::{HostToml, Running, Scratch, Subscription, guest, root};

const TOKEN: &str = "page-s3cret";
const SHARDS: [&str; 2] = ["shardId-000000000000", "shardId-000000000001"];

/// Subscription `orders` on 2 shards of the embedded stream `orders`, running `handler.wasm`.
fn config() -> HostToml {
    config_on(HostToml::memory(), "orders")
}

/// Subscription `orders` on 2 shards of `stream` of `base`'s stream service.
fn config_on(base: HostToml, stream: &str) -> HostToml {
    base.admin_with_token(TOKEN).subscription(
        Subscription::new("orders", stream, "handler.wasm")
            .create_if_missing(2)
            .trim_horizon()
            .batch(10)
            .poll_interval("10ms"),
    )
}

fn wasm(name: &str) -> Vec<u8> {
    std::fs::read(guest(name)).unwrap()
}

fn start(dir: &Scratch) -> Running {
    dir.write("handler.wasm", wasm("scripted"));
    Running::start(dir, config())
}

/// Deploys `name` through the admin API; answers the status.
fn deploy(host: &Running, name: &str) -> StatusCode {
    let answer = host
        .block_on(host.admin(Some(TOKEN)).send(
            Method::PUT,
            "/subscriptions/orders/handler",
            wasm(name),
        ))
        .unwrap();
    answer.status
}

/// Puts records into the host's stream until the answered token is cancelled, 25 to 100 a
/// second (the pace changing every few seconds): on both shards, mostly acked, some dropped,
/// and (with `held`) one retried record per shard that stays held.
fn keep_records_flowing(host: &Running, held: bool) -> CancellationToken {
    keep_records_flowing_into(host, "orders", held)
}

/// As [`keep_records_flowing`], into `stream`.
fn keep_records_flowing_into(host: &Running, stream: &str, held: bool) -> CancellationToken {
    let stop = CancellationToken::new();
    let stream = stream.to_owned();
    let (source, until) = (host.source.clone(), stop.clone());
    host.block_on(async move {
        tokio::spawn(async move {
            if held {
                for shard in 0..SHARDS.len() {
                    let key = crate::support::key_on_shard(shard, SHARDS.len(), "held");
                    source.put(&stream, &key, b"retry".to_vec()).await.unwrap();
                }
            }
            for i in 0u64.. {
                let data = if i % 4 == 3 { "drop" } else { "ack" };
                source
                    .put(&stream, &format!("order-{i}"), data.as_bytes().to_vec())
                    .await
                    .unwrap();
                let pace = [20, 10, 40, 20][(i / 200 % 4) as usize];
                tokio::select! {
                    _ = until.cancelled() => return,
                    _ = tokio::time::sleep(Duration::from_millis(pace)) => {}
                }
            }
        });
    });
    stop
}

/// The chromium on PATH; `None` (the test skipped with a note) when there is none, outside CI.
fn chromium() -> Option<&'static str> {
    for name in ["chromium", "chromium-browser"] {
        if Command::new(name)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
        {
            return Some(name);
        }
    }
    if std::env::var_os("CI").is_some() {
        panic!(
            "chromium is not installed (Debian: apt-get install chromium); CI must test the \
             status page in a browser (.ci/run installs it)"
        );
    }
    eprintln!("skipped: chromium is not installed (Debian: apt-get install chromium)");
    None
}

/// Runs headless chromium on `url` with `extra` arguments (`--dump-dom`, `--screenshot=…`),
/// giving the page's script up to 8 s of virtual time; answers what it printed.
fn browse(browser: &str, profile: &Scratch, url: &str, extra: &[&str]) -> String {
    let out = Command::new(browser)
        .args([
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--disable-extensions",
            "--hide-scrollbars",
            "--virtual-time-budget=8000",
        ])
        .arg(format!("--user-data-dir={}", profile.0.display()))
        .args(extra)
        .arg(url)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{browser} failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The page's DOM once `ready` holds for it (loaded again until then, up to 90 s).
fn rendered(browser: &str, url: &str, what: &str, ready: impl Fn(&str) -> bool) -> String {
    let profile = Scratch::new("status-page-profile");
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let dom = browse(browser, &profile, url, &["--dump-dom"]);
        if ready(&dom) {
            return dom;
        }
        assert!(
            Instant::now() < deadline,
            "the page never showed {what}; its last DOM:\n{dom}"
        );
    }
}

/// The value of attribute `name` of the first element whose opening tag contains `marker`.
fn attribute<'a>(dom: &'a str, marker: &str, name: &str) -> Option<&'a str> {
    let at = dom.find(marker)?;
    let start = dom[..at].rfind('<')?;
    let tag = &dom[start..start + dom[start..].find('>')?];
    let value = tag.split(&format!(" {name}=\"")).nth(1)?;
    value.split('"').next()
}

/// `text` as it appears in a serialized DOM's text.
fn html_text(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('\u{a0}', "&nbsp;")
}

/// The points (x, y) of the polyline of `series` in the chart of `kind`.
fn polyline(dom: &str, kind: &str, series: &str) -> Vec<(f64, f64)> {
    let Some(chart) = dom.find(&format!("class=\"chart {kind}\"")) else {
        return Vec::new();
    };
    let end = dom[chart..].find("</svg>").map_or(dom.len(), |e| chart + e);
    attribute(
        &dom[chart..end],
        &format!("data-series=\"{series}\""),
        "points",
    )
    .map(|points| {
        points
            .split(' ')
            .filter_map(|p| p.split_once(','))
            .map(|(x, y)| (x.parse().unwrap(), y.parse().unwrap()))
            .collect()
    })
    .unwrap_or_default()
}

/// Some point of the series is above the chart's baseline (its lowest y).
fn rises(points: &[(f64, f64)]) -> bool {
    let baseline = points.iter().map(|p| p.1).fold(f64::MIN, f64::max);
    points.iter().any(|p| p.1 < baseline - 1.0)
}

#[test]
fn the_status_page_in_a_browser_shows_the_shards_versions_errors_and_charts_of_flowing_records() {
    let Some(browser) = chromium() else { return };
    let dir = Scratch::new("status-page");
    dir.write("handler.wasm", wasm("always_ack"));
    let host = Running::start(&dir, config());
    // A version replaced (the previous one), and a deploy refused.
    assert_eq!(deploy(&host, "scripted"), StatusCode::OK);
    assert_eq!(
        deploy(&host, "wrongworld"),
        StatusCode::UNPROCESSABLE_ENTITY
    );
    let flowing = keep_records_flowing(&host, true);
    let version = |name| shardhost::testing::version_of(&wasm(name));
    let url = format!("http://{}/#token={TOKEN}", host.admin.unwrap());
    // The screenshot waits for a minute of samples; the test for two.
    let shot = std::env::var_os("SHARDHOST_STATUS_SCREENSHOT");
    let enough = if shot.is_some() { 12 } else { 2 };

    let dom = rendered(browser, &url, "charts with points", |dom| {
        let ack = polyline(dom, "outcomes", "ack");
        SHARDS
            .iter()
            .all(|s| dom.contains(&format!("data-shard=\"{s}\"")))
            && ack.len() >= enough
            && rises(&ack)
            // Drops are fewer: on a loaded machine a sample may hold none yet.
            && rises(&polyline(dom, "outcomes", "drop"))
            && dom.contains("class=\"recent-error\"")
    });
    for shard in SHARDS {
        let row = &dom[dom.find(&format!("data-shard=\"{shard}\"")).unwrap()..];
        let row = &row[..row.find("</tr>").unwrap()];
        assert!(row.contains(">reading<"), "shard {shard} is read: {row}");
        assert!(
            row.contains(&host.status.snapshot()[0].2.owner),
            "its owner is shown: {row}"
        );
        assert!(row.contains("49600000"), "its held record is shown: {row}");
    }
    assert_eq!(
        attribute(&dom, "class=\"version current\"", "data-version"),
        Some(version("scripted").as_str()),
        "the handler version is shown"
    );
    assert!(dom.contains(&format!(">{}</dd>", version("scripted"))));
    assert!(
        dom.contains(&format!(">{}</dd>", version("always_ack"))),
        "the previous version is shown"
    );
    let report = host.block_on(host.admin(Some(TOKEN)).status()).unwrap();
    let why = report.subscriptions[0].last_deploy_error.clone().unwrap();
    let why = html_text(&why);
    assert!(
        dom.contains(&format!("<dd class=\"refused\">{why}</dd>")),
        "the last refused deploy is shown: {why}"
    );
    let error = &dom[dom.find("class=\"recent-error\"").unwrap()..];
    assert!(error.contains("deploy refused"), "{error}");
    let points: usize = attribute(&dom, "class=\"chart outcomes\"", "data-points")
        .unwrap()
        .parse()
        .unwrap();
    assert!(points >= enough, "the outcomes chart has {points} points");
    assert!(
        rises(&polyline(&dom, "outcomes", "drop")),
        "dropped records are charted too"
    );
    assert!(
        !polyline(&dom, "lag", "lag").is_empty(),
        "the lag chart has points"
    );
    assert!(
        attribute(&dom, "id=\"login\"", "hidden").is_some(),
        "the token from the address was used: no login form"
    );

    if let Some(path) = shot {
        let path = root().join(PathBuf::from(path));
        let profile = Scratch::new("status-page-shot");
        browse(
            browser,
            &profile,
            &url,
            &[
                &format!("--screenshot={}", path.display()),
                "--window-size=1100,760",
            ],
        );
        assert!(path.exists(), "{} was written", path.display());
    }
    flowing.cancel();
    host.stop();
}

#[test]
fn the_status_page_without_the_token_asks_for_it_and_shows_no_data() {
    let Some(browser) = chromium() else { return };
    let dir = Scratch::new("status-page-no-token");
    let host = start(&dir);
    let flowing = keep_records_flowing(&host, false);
    host.wait_for("records handled", |s| {
        s.totals("orders").settled > 0 && s.snapshot().len() == SHARDS.len()
    });
    for url in [
        format!("http://{}/", host.admin.unwrap()),
        format!("http://{}/#token=wrong", host.admin.unwrap()),
    ] {
        let dom = rendered(browser, &url, "the token form", |dom| {
            attribute(dom, "id=\"login\"", "hidden").is_none()
        });
        assert!(
            !dom.contains("data-shard="),
            "no shard is shown without the token ({url}):\n{dom}"
        );
        assert!(dom.contains("id=\"token\" type=\"password\""));
    }
    flowing.cancel();
    host.stop();
}

#[test]
fn the_status_page_shows_the_fleet_its_desired_version_each_instance_heartbeat_and_a_rollout() {
    let (Some(kinesis), Some(endpoint)) = (
        crate::support::kinesis_endpoint(),
        crate::support::dynamodb_endpoint(),
    ) else {
        return;
    };
    let Some(browser) = chromium() else { return };
    let table = crate::support::unique("status-page");
    let stream = crate::support::unique("status-page");
    tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(crate::support::dynamo::Dynamo::new(&endpoint).create_lease_table(&table));
    let dir = Scratch::new("status-page-fleet");
    dir.write("handler.wasm", wasm("always_ack"));
    let config = config_on(HostToml::kinesis(&kinesis), &stream)
        .dynamodb_leases(&table, &endpoint)
        .set("fleet", "poll", "500ms")
        .set("fleet", "heartbeat", "1s");
    let host = Running::start(&dir, config);
    // A fleet deploy: the table's desired version, which the instance then runs.
    assert_eq!(deploy(&host, "scripted"), StatusCode::OK);
    let flowing = keep_records_flowing_into(&host, &stream, false);
    let scripted = shardhost::testing::version_of(&wasm("scripted"));
    let owner = host
        .block_on(host.admin(Some(TOKEN)).status())
        .unwrap()
        .owner;
    let url = format!("http://{}/#token={TOKEN}", host.admin.unwrap());

    let instance = |dom: &str| -> Option<String> {
        let row = &dom[dom.find(&format!("data-owner=\"{owner}\""))?..];
        Some(row[..row.find("</tr>")?].to_owned())
    };
    let dom = rendered(browser, &url, "the fleet", |dom| {
        instance(dom).is_some_and(|row| row.contains(&scripted[..12]))
    });
    let row = instance(&dom).unwrap();
    assert!(row.contains(">live<"), "the instance is live: {row}");
    assert!(row.contains("ago<"), "its last heartbeat is shown: {row}");
    assert!(
        row.contains(&format!("http://{}", host.admin.unwrap())),
        "its admin address is shown: {row}"
    );
    let desired = &dom[dom
        .find("class=\"desired\" data-subscription=\"orders\"")
        .expect("the desired version is shown")..];
    let desired = &desired[..desired.find("</tr>").unwrap()];
    assert!(desired.contains(&scripted), "{desired}");
    assert!(
        attribute(&dom, "id=\"fleet\"", "hidden").is_none(),
        "the fleet section is shown"
    );

    // A rollout in progress: half the shards on another version for ten minutes.
    let config = dir.0.join("shardhost.toml");
    let canary = guest("always_ack");
    let out = crate::support::fleet::shardhost(&[
        "deploy",
        "--config",
        config.to_str().unwrap(),
        "orders",
        canary.to_str().unwrap(),
        "--canary",
        "50%",
        "--canary-for",
        "10m",
    ]);
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let running = format!(
        "running {} on 50.0%",
        &shardhost::testing::version_of(&wasm("always_ack"))[..12]
    );
    rendered(browser, &url, "the rollout", |dom| dom.contains(&running));
    flowing.cancel();
    host.stop();
}
