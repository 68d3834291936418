//! `check` and the grants of `[subscription.http]` and `[subscription.config]`: a `${VAR}` the
//! environment does not set is refused where it stands; a value from the environment is never
//! printed, only the names it is granted under. And how each subscription reads.

use super::{assert_refused, config_in, good_config, shardhost, text};
use crate::support::{Scratch, guest};

#[test]
fn check_refuses_a_variable_the_environment_does_not_set_naming_its_file_line_and_name() {
    let dir = Scratch::new("env");
    let body = good_config(&guest("ship"))
        + "[subscription.config]\ncarrier_token = \"${SHARDHOST_TEST_NEVER_SET_TOKEN}\"\n";
    let path = config_in(&dir, &body);
    assert_refused(
        &path,
        &[
            "shardhost.toml:9",
            "subscription[0].config.carrier_token",
            "the environment variable SHARDHOST_TEST_NEVER_SET_TOKEN is not set",
        ],
    );
}

#[test]
fn check_lists_the_grants_by_origin_and_name_and_never_prints_a_value_from_the_environment() {
    let dir = Scratch::new("env");
    let secret = "tok-4f9a1c-never-shown";
    let body = good_config(&guest("ship"))
        + "[subscription.http]\n\
           allow = [\"https://api.carrier.example\", \"http://127.0.0.1:8090\"]\n\
           [subscription.config]\n\
           carrier_url = \"https://api.carrier.example/v2\"\n\
           carrier_token = \"${CARRIER_TOKEN}\"\n\
           [subscription.state]\n\
           buckets = [\"orders\"]\n\
           ttl = \"1h\"\n";
    let path = config_in(&dir, &body);
    let out = shardhost()
        .arg("check")
        .arg(&path)
        .env("CARRIER_TOKEN", secret)
        .output()
        .unwrap();
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stderr}");
    let http = "  http: https://api.carrier.example, http://127.0.0.1:8090 \
                (timeout 5s, max_body 10 MiB, 16 in flight)";
    let config = "  config: carrier_token (from the environment), carrier_url";
    let state = "  state: memory, buckets default, orders (keys under shardhost/ship/, expire 1h, \
                 timeout 2s, 64 in flight)";
    for line in [http, config, state] {
        assert!(
            stdout.lines().any(|l| l == line),
            "no {line:?} in:\n{stdout}"
        );
    }
    assert!(
        !stdout.contains(secret) && !stderr.contains(secret),
        "the secret was printed:\n{stdout}\n{stderr}"
    );
}

#[test]
fn check_shows_how_each_subscription_reads_and_refuses_fan_out_on_the_embedded_stream() {
    let dir = Scratch::new("readmode");
    let handler = guest("always_ack");
    let body = format!(
        "[host]\nname = \"shipping\"\n[kinesis]\nendpoint = \"http://127.0.0.1:1\"\n\
         test_credentials = true\n\
         [[subscription]]\nname = \"ship\"\nstream = \"s\"\nhandler = \"{0}\"\nread = \"fan-out\"\n\
         [[subscription]]\nname = \"audit\"\nstream = \"s\"\nhandler = \"{0}\"\n",
        handler.display()
    );
    let out = shardhost()
        .arg("check")
        .arg(config_in(&dir, &body))
        .output()
        .unwrap();
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    for line in [
        "  read: fan-out (consumer shipping-ship)",
        "  read: polling",
    ] {
        assert!(
            stdout.lines().any(|l| l == line),
            "no {line:?} in:\n{stdout}"
        );
    }
    let embedded = good_config(&handler) + "read = \"fan-out\"\n";
    assert_refused(
        &config_in(&dir, &embedded),
        &["subscription[0].read", "needs Kinesis (SubscribeToShard)"],
    );
}
