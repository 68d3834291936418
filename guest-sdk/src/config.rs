//! The subscription's configuration values (`[subscription.config]` in `shardhost.toml`),
//! through the host's `wasi:config/store`.
//!
//! ```no_run
//! let carrier_url = shardhost_guest::config::get("carrier_url");
//! ```

/// The value of `name`, or `None` when the subscription's config has no such key.
pub fn get(name: &str) -> Option<String> {
    imp::get(name)
}

/// Every value, by name.
pub fn all() -> Vec<(String, String)> {
    imp::all()
}

#[cfg(target_arch = "wasm32")]
mod imp {
    use crate::__private::bindings::wasi::config::store;

    pub(super) fn get(name: &str) -> Option<String> {
        store::get(name).ok().flatten()
    }

    pub(super) fn all() -> Vec<(String, String)> {
        store::get_all().unwrap_or_default()
    }
}

/// Natively (unit tests) the values come from the environment: `SHARDHOST_CONFIG_<NAME>`
/// (the name upper-cased, `-` and `.` as `_`).
#[cfg(not(target_arch = "wasm32"))]
mod imp {
    fn var(name: &str) -> String {
        let name: String = name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_uppercase()
                } else {
                    '_'
                }
            })
            .collect();
        format!("SHARDHOST_CONFIG_{name}")
    }

    pub(super) fn get(name: &str) -> Option<String> {
        std::env::var(var(name)).ok()
    }

    pub(super) fn all() -> Vec<(String, String)> {
        Vec::new()
    }
}
