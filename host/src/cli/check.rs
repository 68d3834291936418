//! `shardhost check CONFIG`: validate the config and load every handler in it.

use std::path::Path;

use shardhost::config::Config;
use shardhost::feed;
use shardhost::wasm::{Runtime, short_version};

use super::EXIT_CONFIG;

pub fn check(path: &Path) -> u8 {
    super::block_on(check_async(path))
}

async fn check_async(path: &Path) -> u8 {
    let config = match Config::load(path) {
        Ok(c) => c,
        Err(e) => {
            for p in &e.problems {
                eprintln!("{p}");
            }
            eprintln!("{}: {} problem(s)", path.display(), e.problems.len());
            return EXIT_CONFIG;
        }
    };
    let mut problems: Vec<String> = Vec::new();
    let cache = config
        .host
        .cache_dir
        .clone()
        .or_else(Runtime::default_cache_dir);
    let runtime = match Runtime::new(cache, config.meters_fuel()) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{e}");
            return super::EXIT_RUNTIME;
        }
    };
    let mut loaded = Vec::new();
    for s in &config.subscriptions {
        match runtime.load_file(&s.handler, s.limits, &s.wasi).await {
            Ok(c) => loaded.push(format!(
                "subscription `{}`: handler {} (version {})",
                s.name,
                s.handler.display(),
                short_version(c.version())
            )),
            Err(e) => problems.push(format!("{}: {e}", s.handler_at)),
        }
        if let Some(feed_path) = &s.feed
            && let Err(e) = feed::load(feed_path)
        {
            problems.push(format!("subscription `{}`: feed {e}", s.name));
        }
    }
    if problems.is_empty() {
        for line in loaded {
            println!("{line}");
        }
        println!("{}: ok", path.display());
        0
    } else {
        for p in &problems {
            eprintln!("{p}");
        }
        eprintln!("{}: {} problem(s)", path.display(), problems.len());
        EXIT_CONFIG
    }
}
