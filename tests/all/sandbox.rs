//! What a handler can reach: nothing unless the subscription's `[subscription.wasi]` grants it,
//! and compiled components are cached by content hash.

use std::process::Command;

use crate::support::{HostToml, Running, Scratch, Subscription, guest, key_on_shard, text_record};

fn run(
    dir: &Scratch,
    records: &[&str],
    wasi: impl FnOnce(Subscription) -> Subscription,
) -> shardhost::status::Counts {
    let k = key_on_shard(0, 1, "k");
    let lines: Vec<_> = records.iter().map(|t| text_record(&k, t)).collect();
    dir.write("feed.ndjson", lines.join("\n"));
    let config = HostToml::memory().subscription(wasi(
        Subscription::new("test", "s", guest("scripted"))
            .feed("feed.ndjson")
            .poll_interval("20ms"),
    ));
    let host = Running::start(dir, config);
    let n = records.len() as u64;
    host.wait_for("every delivery", |b| b.totals("test").delivered == n);
    host.stop().totals("test")
}

#[test]
fn a_handler_sees_no_environment_or_files_unless_granted() {
    let dir = Scratch::new("sandbox");
    let secret = dir.write("secret.txt", "s3cret");
    // A variable of the host's own environment (tests share one process: none is set here).
    let path = std::env::var("PATH").expect("PATH is set");
    let host_var = format!("env:PATH={path}");
    let denied = run(
        &dir,
        &[
            &host_var,
            "env:HOME=/root",
            &format!("file:{}", secret.display()),
        ],
        |s| s,
    );
    assert_eq!(
        denied.held, 3,
        "no variable and no file is visible: {denied:?}"
    );
    let granted = run(&dir, &[&host_var, "env:REGION=eu-west-1"], |s| {
        s.wasi("env", vec!["PATH", "REGION=eu-west-1"])
    });
    assert_eq!(
        granted.settled, 2,
        "granted variables are visible: {granted:?}"
    );
    assert_eq!(granted.held, 0);
}

#[test]
fn compiled_components_are_cached_by_content_hash() {
    let dir = Scratch::new("cache");
    let wasm = guest("scripted");
    invoke_with_cache(&dir, &dir.0);
    let version = shardhost::testing::version_of(&std::fs::read(&wasm).unwrap());
    let cached: Vec<_> = std::fs::read_dir(dir.0.join("components"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(cached.len(), 1, "{cached:?}");
    assert!(
        cached[0].starts_with(&version) && cached[0].ends_with(".cwasm"),
        "{cached:?}"
    );
}

#[test]
fn a_handler_cannot_open_a_socket() {
    let dir = Scratch::new("sandbox-net");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap();
    let denied = run(&dir, &[&format!("connect:{addr}")], |s| s);
    assert_eq!(denied.held, 1, "the connect failed: {denied:?}");
    let accepted = listener.accept();
    assert!(
        matches!(&accepted, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "no connection reached the listener: {accepted:?}"
    );
}

/// Runs `shardhost invoke` of the scripted guest with its cache in `cache`.
fn invoke_with_cache(dir: &Scratch, cache: &std::path::Path) {
    let records = dir.write("r.ndjson", text_record("k", "ack"));
    let out = Command::new(env!("CARGO_BIN_EXE_shardhost"))
        .arg("invoke")
        .arg(guest("scripted"))
        .arg("--records")
        .arg(&records)
        .env("SHARDHOST_CACHE_DIR", cache)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn mode(path: &std::path::Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn the_compile_cache_is_created_private() {
    let dir = Scratch::new("cache-private");
    let cache = dir.0.join("cache");
    invoke_with_cache(&dir, &cache);
    assert_eq!(mode(&cache), 0o700, "the cache directory");
    assert_eq!(mode(&cache.join("components")), 0o700, "its components");
    let entries: Vec<_> = std::fs::read_dir(cache.join("components"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(
        entries.len(),
        1,
        "one entry, no temporary file left: {entries:?}"
    );
    assert_eq!(
        mode(&entries[0]) & 0o022,
        0,
        "nobody else may write the entry"
    );
}

#[test]
fn a_cache_directory_others_can_write_is_not_used() {
    use std::os::unix::fs::PermissionsExt;
    let dir = Scratch::new("cache-shared");
    let cache = dir.0.join("cache");
    std::fs::create_dir_all(cache.join("components")).unwrap();
    std::fs::set_permissions(
        cache.join("components"),
        std::fs::Permissions::from_mode(0o777),
    )
    .unwrap();
    invoke_with_cache(&dir, &cache);
    let entries = std::fs::read_dir(cache.join("components")).unwrap().count();
    assert_eq!(
        entries, 0,
        "native code is neither written to nor loaded from a directory others can write"
    );
}
