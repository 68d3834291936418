//! `${VAR}` in the strings of the file: resolved everywhere before anything is read, reported
//! once with file, line, key and variable, and never shown once resolved.

use std::collections::HashMap;
use std::env::VarError;

use super::*;
use crate::capability::config::ConfigValue;

impl Scratch {
    /// The config `text`, written as `shardhost.toml`, parsed with the environment `vars`.
    fn parse_with(&self, text: &str, vars: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let path = self.touch("shardhost.toml");
        fs::write(&path, text).unwrap();
        let vars: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        let env = |name: &str| vars.get(name).cloned().ok_or(VarError::NotPresent);
        Config::parse_with_env(&path, text, &env)
    }

    fn problems_with(&self, text: &str, vars: &[(&str, &str)]) -> Vec<Problem> {
        match self.parse_with(text, vars) {
            Ok(config) => panic!("expected problems, got {config:#?}"),
            Err(e) => e.problems,
        }
    }
}

#[test]
fn references_resolve_in_every_string_of_every_table_and_array() {
    let s = Scratch::new();
    let dir = s.0.display().to_string();
    let text = r#"[host]
name = "${SERVICE}-host"
[kinesis]
endpoint = "http://${STACK}:4567"
[admin]
listen = ":9750"
token = "${ADMIN_TOKEN}"
[[subscription]]
name = "ship"
stream = "${STREAM:-shipments}"
handler = "${DIR}/ship.wasm"
publish_to = ["${OUT}", "audit"]
[subscription.http]
allow = ["https://${CARRIER_HOST}", "http://127.0.0.1:${PORT:-8090}"]
timeout = "${HTTP_TIMEOUT}"
"#;
    let vars = [
        ("SERVICE", "shipping"),
        ("STACK", "localstack"),
        ("ADMIN_TOKEN", "s3cret"),
        ("DIR", dir.as_str()),
        ("OUT", "invoices"),
        ("CARRIER_HOST", "API.carrier.example"),
        ("HTTP_TIMEOUT", "2s"),
    ];
    let config = s.parse_with(text, &vars).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(config.host.name, "shipping-host");
    assert_eq!(
        config.kinesis.endpoint,
        KinesisEndpoint::Url("http://localstack:4567".into())
    );
    assert_eq!(config.admin.unwrap().token.as_deref(), Some("s3cret"));
    let sub = &config.subscriptions[0];
    assert_eq!(sub.stream, "shipments");
    assert_eq!(sub.handler, s.0.join("ship.wasm"));
    assert_eq!(sub.publish_to, ["invoices", "audit"]);
    let http = sub.wasi.http().unwrap();
    let origins: Vec<_> = http.allow.iter().map(ToString::to_string).collect();
    assert_eq!(
        origins,
        ["https://api.carrier.example", "http://127.0.0.1:8090"]
    );
    assert_eq!(http.timeout, Duration::from_secs(2));
}

#[test]
fn a_config_value_is_from_the_environment_when_it_used_any_reference() {
    let text = format!(
        "{MINIMAL}[subscription.config]\ntoken = \"${{CARRIER_TOKEN}}\"\n\
         auth = \"Bearer ${{CARRIER_TOKEN}}\"\nregion = \"${{REGION:-eu-1}}\"\n\
         url = \"https://api.carrier.example\"\ntemplate = \"$${{name}}\"\nprice = \"$5\"\n"
    );
    let config = Scratch::new()
        .parse_with(&text, &[("CARRIER_TOKEN", "tok-123")])
        .unwrap_or_else(|e| panic!("{e}"));
    let config = &config.subscriptions[0].wasi.config();
    let value = |value: &str, from_env| ConfigValue {
        value: value.into(),
        from_env,
    };
    assert_eq!(config["token"], value("tok-123", true));
    assert_eq!(config["auth"], value("Bearer tok-123", true));
    assert_eq!(config["region"], value("eu-1", true));
    assert_eq!(config["url"], value("https://api.carrier.example", false));
    assert_eq!(config["template"], value("${name}", false));
    assert_eq!(config["price"], value("$5", false));
    let shown = format!("{config:?}");
    assert!(!shown.contains("tok-123"), "{shown}");
}

#[test]
fn a_missing_variable_is_reported_with_file_line_key_and_name() {
    let s = Scratch::new();
    let text = format!("{MINIMAL}[subscription.config]\ncarrier_token = \"${{CARRIER_TOKEN}}\"\n");
    let problems = s.problems_with(&text, &[]);
    assert_eq!(problems.len(), 1, "{problems:#?}");
    let wanted = format!(
        "{}:6: subscription[0].config.carrier_token: the environment variable CARRIER_TOKEN \
         is not set (write \"${{CARRIER_TOKEN:-default}}\" for a default)",
        s.0.join("shardhost.toml").display()
    );
    assert_eq!(problems[0].to_string(), wanted);
}

#[test]
fn a_variable_set_but_empty_is_set_unless_a_default_is_given() {
    let text = format!(
        "{MINIMAL}[subscription.config]\nplain = \"${{EMPTY}}\"\nwith_default = \"${{EMPTY:-d}}\"\n"
    );
    let config = Scratch::new()
        .parse_with(&text, &[("EMPTY", "")])
        .unwrap_or_else(|e| panic!("{e}"));
    let config = &config.subscriptions[0].wasi.config();
    assert_eq!(config["plain"].value, "");
    assert_eq!(config["with_default"].value, "d");
}

#[test]
fn every_unresolvable_string_is_reported_once_where_it_stands() {
    let text = "[host]\nname = \"${HOST_NAME\"\n[[subscription]]\nname = \"ship\"\n\
                stream = \"${STREAM}\"\nhandler = \"${DIR}/ship.wasm\"\n\
                publish_to = [\"ok\", \"${1X}\"]\nbatch = 0\n\
                [subscription.config]\n\"dotted.name\" = \"${A:-${B}}\"\n";
    let problems = Scratch::new().problems_with(text, &[]);
    let wanted = [
        (2, "host.name"),
        (5, "subscription[0].stream"),
        (6, "subscription[0].handler"),
        (7, "subscription[0].publish_to[1]"),
        (8, "subscription[0].batch"),
        (10, "subscription[0].config.\"dotted.name\""),
    ];
    assert_eq!(places(&problems), wanted, "{problems:#?}");
    let messages: Vec<_> = problems.iter().map(|p| p.message.as_str()).collect();
    assert!(messages[0].starts_with("\"${HOST_NAME\" opens a \"${\" that is never closed"));
    assert!(messages[1].starts_with("the environment variable STREAM is not set"));
    assert!(messages[2].starts_with("the environment variable DIR is not set"));
    assert!(messages[3].starts_with("\"${1X}\" is not a reference to an environment variable"));
    assert!(messages[5].starts_with("the default of \"${A:-${B}\" holds another \"${\""));
}

#[test]
fn a_problem_with_a_value_from_the_environment_never_shows_the_value() {
    let text = format!(
        "{MINIMAL}poll_interval = \"${{POLL}}\"\nmax_attempts = 3\ndead_letter = \"${{DEAD}}\"\n\
         [subscription.wasi]\nenv = [\"1X=${{SECRET}}\"]\n"
    );
    let vars = [
        ("POLL", "soon-secret"),
        ("DEAD", "dead/secret"),
        ("SECRET", "pa55word"),
    ];
    let problems = Scratch::new().problems_with(&text, &vars);
    let shown: Vec<_> = problems.iter().map(ToString::to_string).collect();
    assert_eq!(shown.len(), 3, "{shown:#?}");
    for secret in ["soon-secret", "dead/secret", "pa55word"] {
        assert!(shown.iter().all(|p| !p.contains(secret)), "{shown:#?}");
    }
    assert!(
        shown[0].contains("\"${POLL}\" is not a duration"),
        "{shown:#?}"
    );
    assert!(
        shown[1].contains("\"${DEAD}\" is not a valid stream name"),
        "{shown:#?}"
    );
    assert!(
        shown[2].contains("\"1X=${SECRET}\" is not an environment variable"),
        "{shown:#?}"
    );
}

#[test]
fn keys_and_comments_are_not_interpolated() {
    let text = format!("{MINIMAL}# ${{NOT_READ}}\n[subscription.config]\nlit = '$${{x}}'\n");
    let config = Scratch::new()
        .parse_with(&text, &[])
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(config.subscriptions[0].wasi.config()["lit"].value, "${x}");
    let text = format!("{MINIMAL}[subscription.config]\n\"${{A}}\" = \"v\"\n");
    let problems = Scratch::new().problems_with(&text, &[]);
    assert_eq!(places(&problems), [(6, "subscription[0].config.\"${A}\"")]);
    assert!(problems[0].message.contains("is not a config name"));
}

/// What a Kubernetes pod gives the host: its name (downward API) and the admin token (a Secret)
/// as environment variables.
const POD: &str = "[host]\nowner_id = \"${POD_NAME}\"\n[admin]\nlisten = \"0.0.0.0:9750\"\n\
                   token = \"${SHARDHOST_ADMIN_TOKEN}\"\n";

#[test]
fn the_owner_id_and_the_admin_token_come_from_the_environment() {
    let text = format!("{POD}{MINIMAL}");
    let config = Scratch::new()
        .parse_with(
            &text,
            &[
                ("POD_NAME", "shipping-7d9f-x2k4p"),
                ("SHARDHOST_ADMIN_TOKEN", "tok-0123456789"),
            ],
        )
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(config.host.owner_id.as_deref(), Some("shipping-7d9f-x2k4p"));
    let admin = config.admin.unwrap();
    assert_eq!(admin.token.as_deref(), Some("tok-0123456789"));
    assert!(!format!("{admin:?}").contains("tok-0123456789"));
}

#[test]
fn a_missing_owner_id_or_token_variable_names_file_line_key_and_variable() {
    let s = Scratch::new();
    let problems = s.problems_with(&format!("{POD}{MINIMAL}"), &[]);
    let file = s.0.join("shardhost.toml").display().to_string();
    let shown: Vec<_> = problems.iter().map(ToString::to_string).collect();
    assert_eq!(
        shown,
        [
            format!(
                "{file}:2: host.owner_id: the environment variable POD_NAME is not set \
                 (write \"${{POD_NAME:-default}}\" for a default)"
            ),
            format!(
                "{file}:5: admin.token: the environment variable SHARDHOST_ADMIN_TOKEN is not \
                 set (write \"${{SHARDHOST_ADMIN_TOKEN:-default}}\" for a default)"
            ),
        ],
        "{problems:#?}"
    );
}
