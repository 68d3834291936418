use super::*;

/// An environment of `(name, value)` pairs; `"\u{0}bad"` stands for a value not UTF-8.
fn env_of(
    vars: &'static [(&'static str, &'static str)],
) -> impl Fn(&str) -> Result<String, VarError> {
    move |name| match vars.iter().find(|(n, _)| *n == name) {
        Some((_, "\u{0}bad")) => Err(VarError::NotUnicode("bad".into())),
        Some((_, value)) => Ok((*value).to_owned()),
        None => Err(VarError::NotPresent),
    }
}

const ENV: &[(&str, &str)] = &[
    ("HOST", "api.example"),
    ("PORT", "8090"),
    ("EMPTY", ""),
    ("_under_1", "u"),
    ("BINARY", "\u{0}bad"),
];

fn ok(s: &str) -> (String, bool) {
    let r = interpolate(s, &env_of(ENV)).unwrap_or_else(|e| panic!("{s}: {e}"));
    (r.value, r.from_env)
}

fn err(s: &str) -> String {
    interpolate(s, &env_of(ENV)).expect_err(s).to_string()
}

#[test]
fn references_take_the_variables_value_anywhere_in_a_string() {
    assert_eq!(ok("${HOST}"), ("api.example".into(), true));
    assert_eq!(
        ok("https://${HOST}:${PORT}/x"),
        ("https://api.example:8090/x".into(), true)
    );
    assert_eq!(ok("${HOST}${PORT}"), ("api.example8090".into(), true));
    assert_eq!(ok("${_under_1}"), ("u".into(), true));
}

#[test]
fn a_string_without_references_is_unchanged_and_not_from_the_environment() {
    assert_eq!(ok("plain"), ("plain".into(), false));
    assert_eq!(ok(""), (String::new(), false));
    assert_eq!(
        ok("cost: $5, $HOST, $"),
        ("cost: $5, $HOST, $".into(), false)
    );
}

#[test]
fn a_default_stands_in_for_an_unset_or_empty_variable() {
    assert_eq!(ok("${NOPE:-fallback}"), ("fallback".into(), true));
    assert_eq!(ok("${EMPTY:-fallback}"), ("fallback".into(), true));
    assert_eq!(ok("${HOST:-fallback}"), ("api.example".into(), true));
    assert_eq!(ok("${NOPE:-}"), (String::new(), true));
    assert_eq!(ok("${NOPE:-a:-b $x}"), ("a:-b $x".into(), true));
    // Set but empty is set.
    assert_eq!(ok("[${EMPTY}]"), ("[]".into(), true));
}

#[test]
fn a_doubled_dollar_before_a_brace_is_a_literal_reference() {
    assert_eq!(ok("$${HOST}"), ("${HOST}".into(), false));
    assert_eq!(ok("$${HOST} ${HOST}"), ("${HOST} api.example".into(), true));
    assert_eq!(ok("$$${HOST}"), ("$${HOST}".into(), false));
    assert_eq!(ok("$$"), ("$$".into(), false));
}

#[test]
fn an_unset_variable_is_named_with_how_to_give_a_default() {
    assert_eq!(
        err("Bearer ${CARRIER_TOKEN}"),
        "the environment variable CARRIER_TOKEN is not set \
         (write \"${CARRIER_TOKEN:-default}\" for a default)"
    );
    assert_eq!(
        err("${BINARY}"),
        "the environment variable BINARY is not valid UTF-8"
    );
    assert!(err("${HOST} ${NOPE}").contains("NOPE is not set"));
}

#[test]
fn malformed_references_are_errors_naming_them() {
    for bad in [
        "${}",
        "${1X}",
        "${A-B}",
        "${A:B}",
        "${ A}",
        "${A-default}",
        "${A:?e}",
    ] {
        let message = err(bad);
        let wanted = format!("{bad:?} is not a reference to an environment variable");
        assert!(message.starts_with(&wanted), "{bad}: {message}");
    }
    assert!(err("${A:-${B}}").starts_with("the default of \"${A:-${B}\" holds another"));
    assert_eq!(
        err("x ${HOST"),
        "\"${HOST\" opens a \"${\" that is never closed with \"}\" (\"$${\" is a literal \"${\")"
    );
    assert!(err("${HOST} and ${").contains("\"${\" opens a"));
}
