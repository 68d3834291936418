//! How the config shows itself in `Debug` (a test's failure, a log line): never a secret.
//! `[host] retry_key`, `retry_keys_previous` and `[admin] token` are always hidden (a
//! subscription's grants show themselves: each capability's `Debug` hides its own secrets).
//! Each impl destructures its struct, so a new field must be decided on here.

use std::fmt;

use super::{AdminConfig, HostConfig};

/// Stands for a value that is never shown.
struct Hidden;

impl fmt::Debug for Hidden {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<hidden>")
    }
}

impl fmt::Debug for HostConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let HostConfig {
            name,
            owner_id,
            cache_dir,
            cache_max,
            retry_key,
            retry_keys_previous,
        } = self;
        f.debug_struct("HostConfig")
            .field("name", name)
            .field("owner_id", owner_id)
            .field("cache_dir", cache_dir)
            .field("cache_max", cache_max)
            .field("retry_key", &retry_key.as_ref().map(|_| Hidden))
            .field(
                "retry_keys_previous",
                &retry_keys_previous
                    .iter()
                    .map(|_| Hidden)
                    .collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl fmt::Debug for AdminConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let AdminConfig {
            listen,
            token,
            max_upload,
        } = self;
        f.debug_struct("AdminConfig")
            .field("listen", listen)
            .field("token", &token.as_ref().map(|_| Hidden))
            .field("max_upload", max_upload)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_secrets_or_values_from_the_environment() {
        let host = HostConfig {
            retry_key: Some("retry-key-0123456789".into()),
            retry_keys_previous: vec!["previous-key-0123456789".into()],
            ..HostConfig::default()
        };
        let admin = AdminConfig {
            listen: "127.0.0.1:9750".parse().unwrap(),
            token: Some("admin-token-secret".into()),
            max_upload: 1,
        };
        let shown = format!("{host:?} {admin:?}");
        for secret in [
            "retry-key-0123456789",
            "previous-key-0123456789",
            "admin-token-secret",
        ] {
            assert!(!shown.contains(secret), "{secret} shown: {shown}");
        }
        for seen in [
            "retry_key: Some(<hidden>)",
            "retry_keys_previous: [<hidden>]",
            "token: Some(<hidden>)",
        ] {
            assert!(shown.contains(seen), "{seen} missing: {shown}");
        }
    }
}
