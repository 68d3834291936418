//! What every capability promises about its grant: `Debug` never shows a secret.

use std::collections::BTreeMap;

use super::config::{ConfigGrant, ConfigValue};
use super::env::EnvGrant;
use crate::config::Grants;

#[test]
fn debug_never_shows_env_values_or_config_values_from_the_environment() {
    let value = |value: &str, from_env| ConfigValue {
        value: value.into(),
        from_env,
    };
    let grants = Grants::default()
        .with(EnvGrant(vec!["HOME".into(), "API_KEY=env-secret".into()]))
        .with(ConfigGrant(BTreeMap::from([
            ("carrier_token".into(), value("token-secret", true)),
            ("carrier_url".into(), value("https://api.example", false)),
        ])));
    let shown = format!("{grants:#?}");
    for secret in ["env-secret", "token-secret"] {
        assert!(!shown.contains(secret), "{secret} shown: {shown}");
    }
    for seen in [
        "\"API_KEY=…\"",
        "\"HOME\"",
        "carrier_token",
        "<from the environment>",
        "https://api.example",
    ] {
        assert!(shown.contains(seen), "{seen} missing: {shown}");
    }
}
