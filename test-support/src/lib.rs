//! What shardhost's behaviour tests (`tests/all`) and benches (`host/benches`) share: the guest
//! builder ([`guest`]), one way to wait for a condition ([`wait_until`]) and the config builder
//! ([`HostToml`], [`Subscription`]).

mod config;
mod guests;
mod http_server;
mod wait;

pub use config::{HostToml, Subscription};
pub use guests::{guest, guest_target, root};
pub use http_server::{HttpServer, closed_origin};
pub use wait::{wait_until, wait_until_async, wait_until_else};

/// The median of some samples (the upper one of an even count).
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}
