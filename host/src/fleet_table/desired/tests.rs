use super::*;

const V: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
const MAX: u64 = 64 << 20;

fn good() -> Item {
    [
        (VERSION, s(V)),
        (SIZE, n(700_001)),
        (CHUNKS, n(3)),
        (UPLOAD, s("u1")),
        (GENERATION, n(7)),
        (DEPLOY_ID, s("lineage-1")),
        (DEPLOYED_BY, s("me")),
        (DEPLOYED_AT, n(5)),
        (PREVIOUS_VERSION, s(V)),
        (PREVIOUS_SIZE, n(10)),
        (PREVIOUS_CHUNKS, n(1)),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect()
}

/// Attributes set (or removed) over a good row.
type Changes = Vec<(&'static str, Option<AttributeValue>)>;

fn with(changes: &[(&str, Option<AttributeValue>)]) -> Item {
    let mut item = good();
    for (k, v) in changes {
        match v {
            Some(v) => item.insert((*k).to_owned(), v.clone()),
            None => item.remove(*k),
        };
    }
    item
}

fn num(v: &str) -> Option<AttributeValue> {
    Some(AttributeValue::N(v.to_owned()))
}

#[test]
fn a_good_row_reads_back_whole() {
    let d = parse(&good(), MAX).unwrap();
    assert_eq!(d.generation, 7);
    assert_eq!(d.component.chunks, 3);
    assert_eq!(d.component.upload.as_deref(), Some("u1"));
    assert_eq!(d.deploy_id, "lineage-1");
    assert_eq!(d.previous.unwrap().upload, None);
    assert_eq!(d.signed, None);
}

#[test]
fn every_bad_attribute_is_named_and_nothing_panics() {
    let cases: Vec<(&str, Changes)> = vec![
        (SIZE, vec![(SIZE, num("99999999999999"))]),
        (SIZE, vec![(SIZE, num("18446744073709551615"))]),
        (SIZE, vec![(SIZE, num("18446744073709551616"))]),
        (SIZE, vec![(SIZE, num("-5"))]),
        (SIZE, vec![(SIZE, num("0"))]),
        (SIZE, vec![(SIZE, Some(s("100")))]),
        (SIZE, vec![(SIZE, None)]),
        (CHUNKS, vec![(CHUNKS, num("4294967297"))]),
        (CHUNKS, vec![(CHUNKS, num("2"))]),
        (GENERATION, vec![(GENERATION, num("-1"))]),
        (GENERATION, vec![(GENERATION, num("0"))]),
        (GENERATION, vec![(GENERATION, num("18446744073709551616"))]),
        (GENERATION, vec![(GENERATION, num("9007199254740993"))]),
        (GENERATION, vec![(GENERATION, num("1e3"))]),
        (GENERATION, vec![(GENERATION, Some(s("7")))]),
        (
            GENERATION,
            vec![(GENERATION, Some(AttributeValue::Bool(true)))],
        ),
        (VERSION, vec![(VERSION, Some(s("../../etc/passwd")))]),
        (VERSION, vec![(VERSION, Some(s(V.to_uppercase())))]),
        (VERSION, vec![(VERSION, None)]),
        (UPLOAD, vec![(UPLOAD, Some(s("a#b")))]),
        (DEPLOY_ID, vec![(DEPLOY_ID, Some(s("x".repeat(65))))]),
        (PREVIOUS_SIZE, vec![(PREVIOUS_SIZE, num("1000000000000"))]),
        (PREVIOUS_CHUNKS, vec![(PREVIOUS_CHUNKS, None)]),
        (SIGNATURE, vec![(SIGNATURE, Some(s("c2ln")))]),
        (DEPLOYED_AT, vec![(DEPLOYED_AT, Some(s("yesterday")))]),
    ];
    for (attribute, changes) in cases {
        let bad = parse(&with(&changes), MAX).expect_err(&format!("{changes:?}"));
        assert_eq!(bad.attribute, attribute, "{changes:?}: {bad}");
        assert!(bad.to_string().contains(attribute), "{bad}");
    }
}

#[test]
fn what_a_bad_row_says_it_deploys_is_kept_for_the_report() {
    let bad = parse(&with(&[(SIZE, num("99999999999999"))]), MAX).unwrap_err();
    assert_eq!((bad.version.as_deref(), bad.generation), (Some(V), Some(7)));
}

#[test]
fn names_with_the_separator_never_share_a_key() {
    assert_ne!(desired_key("a#b", "c"), desired_key("a", "b#c"));
    assert_ne!(desired_key("a%23", "c"), desired_key("a#", "c"));
    assert!(desired_key("shipping", "ship").starts_with('#'));
}

#[test]
fn a_write_is_conditional_on_the_generation_exactly_as_read() {
    let mut w = Write::default();
    w.condition(&Seen::nothing());
    assert!(w.condition.starts_with("attribute_not_exists("));
    let mut w = Write::default();
    w.condition(&Seen {
        exists: true,
        generation: Some(AttributeValue::S("6".into())),
    });
    assert!(w.condition.ends_with("= :seen"), "{}", w.condition);
    assert_eq!(w.values.last().unwrap().1, AttributeValue::S("6".into()));
    let mut w = Write::default();
    w.condition(&Seen {
        exists: true,
        generation: None,
    });
    assert!(
        w.condition.contains("attribute_not_exists"),
        "{}",
        w.condition
    );
}
