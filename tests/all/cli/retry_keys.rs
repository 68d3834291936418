//! `check` and the retry keys: it names the keys copies are made and opened under by their ids,
//! never a secret, and refuses a previous key too short to be one.

use super::{config_in, good_config, shardhost, text};
use crate::support::{Scratch, guest};
use shardhost::testing::envelope::EnvelopeKey;

const CURRENT: &str = "current-secret-never-shown";
const PREVIOUS: &str = "previous-secret-never-shown";

#[test]
fn check_names_the_retry_keys_by_id_and_never_prints_a_secret() {
    let dir = Scratch::new("check-keys");
    let body = format!(
        "[host]\nretry_key = \"{CURRENT}\"\nretry_keys_previous = [\"{PREVIOUS}\"]\n\n{}",
        good_config(&guest("scripted"))
    );
    let out = shardhost()
        .arg("check")
        .arg(config_in(&dir, &body))
        .output()
        .unwrap();
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stderr}");
    let line = format!(
        "retry copies: made under key {} ([host] retry_key or SHARDHOST_RETRY_KEY); copies made \
         under key {} are still opened",
        EnvelopeKey::from_secret(CURRENT).id(),
        EnvelopeKey::from_secret(PREVIOUS).id()
    );
    assert!(
        stdout.lines().any(|l| l == line),
        "no {line:?} in:\n{stdout}"
    );
    for secret in [CURRENT, PREVIOUS] {
        assert!(
            !stdout.contains(secret) && !stderr.contains(secret),
            "a secret was printed:\n{stdout}\n{stderr}"
        );
    }
}

#[test]
fn check_refuses_a_previous_key_from_the_environment_that_is_too_short() {
    let dir = Scratch::new("check-keys-short");
    let path = config_in(&dir, &good_config(&guest("scripted")));
    let out = shardhost()
        .arg("check")
        .arg(&path)
        .env("SHARDHOST_RETRY_KEY_PREVIOUS", "short")
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("SHARDHOST_RETRY_KEY_PREVIOUS must be at least 16 characters"),
        "{stderr}"
    );
}
