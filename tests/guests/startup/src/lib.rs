//! A handler whose start-up code has effects: a constructor, run when the component is
//! instantiated (before any call), sends `POST {config url}` and writes the state key
//! `started`. Its calls ack every record and do nothing else. What a host does with a
//! candidate it only validates or tries (check, replay, a shadow, a refused deploy) must never
//! reach the world through such code.

use shardhost_guest::{Outcome, Record, config, http, state};

/// Runs at instantiation: a constructor, which the module's `_initialize` runs.
extern "C" fn at_start() {
    if let Some(url) = config::get("url") {
        let sent = http::post(url).body("started").send();
        shardhost_guest::info!("start-up request: {:?}", sent.map(|r| r.status()));
    }
    let wrote = state::set("started", b"by start-up code");
    shardhost_guest::info!("start-up state write: {wrote:?}");
}

#[used]
#[unsafe(link_section = ".init_array")]
static AT_START: extern "C" fn() = at_start;

unsafe extern "C" {
    /// The linker's function that runs every constructor.
    fn __wasm_call_ctors();
}

/// The reactor's initializer, which the component runs as its start function when it is
/// instantiated (a Rust cdylib for wasm32-wasip2 exports none of its own).
#[unsafe(no_mangle)]
pub extern "C" fn _initialize() {
    // SAFETY: called once, by the component's start function, before any export.
    unsafe { __wasm_call_ctors() }
}

fn handle(_record: &Record) -> Outcome {
    Outcome::Ack
}

shardhost_guest::handler!(handle);
