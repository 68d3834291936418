//! The native store keeps the host's rules, and `once` keeps its promise.

use super::*;

fn other(e: Error) -> String {
    match e {
        Error::Other(message) => message,
        e => panic!("expected Error::Other, got {e:?}"),
    }
}

#[test]
fn get_set_exists_delete() {
    assert_eq!(get("a"), Ok(None));
    assert_eq!(exists("a"), Ok(false));
    set("a", "one").unwrap();
    assert_eq!(get("a"), Ok(Some(b"one".to_vec())));
    assert_eq!(exists("a"), Ok(true));
    set("a", b"two").unwrap();
    assert_eq!(get("a"), Ok(Some(b"two".to_vec())));
    delete("a").unwrap();
    assert_eq!(get("a"), Ok(None));
    delete("a").unwrap();
    set("empty", "").unwrap();
    assert_eq!(exists("empty"), Ok(true), "an empty value is a value");
}

#[test]
fn counters_start_at_zero_and_read_as_decimal_text() {
    assert_eq!(increment("n", 1), Ok(1));
    assert_eq!(increment("n", 5), Ok(6));
    assert_eq!(increment("n", 0), Ok(6));
    assert_eq!(get("n"), Ok(Some(b"6".to_vec())));
    assert_eq!(increment("zero", 0), Ok(0));
    assert_eq!(get("zero"), Ok(Some(b"0".to_vec())));
    set("n", "6").unwrap();
    let e = other(increment("n", 1).unwrap_err());
    assert!(e.contains("not a counter"), "{e}");
    assert_eq!(increment("big", u64::MAX), Ok(u64::MAX));
    assert!(increment("big", 1).is_err());
    assert_eq!(get("big"), Ok(Some(u64::MAX.to_string().into_bytes())));
}

#[test]
fn conditional_writes() {
    assert_eq!(set_if_absent("k", "first"), Ok(true));
    assert_eq!(set_if_absent("k", "second"), Ok(false));
    assert_eq!(get("k"), Ok(Some(b"first".to_vec())));
    assert_eq!(compare_and_set("k", "nope", "x"), Ok(false));
    assert_eq!(get("k"), Ok(Some(b"first".to_vec())));
    assert_eq!(compare_and_set("k", "first", "third"), Ok(true));
    assert_eq!(get("k"), Ok(Some(b"third".to_vec())));
    assert_eq!(compare_and_set("absent", "", "x"), Ok(false));
    assert_eq!(get("absent"), Ok(None));
    increment("c", 3).unwrap();
    assert_eq!(set_if_absent("c", "x"), Ok(false));
    assert_eq!(
        compare_and_set("c", "3", "three"),
        Ok(true),
        "a counter compares as its text"
    );
    assert_eq!(get("c"), Ok(Some(b"three".to_vec())));
}

#[test]
fn batches_keep_the_order_of_their_keys() {
    set_many([("a", "1"), ("b", "2")]).unwrap();
    assert_eq!(
        get_many(&["b", "missing", "a"]),
        Ok(vec![Some(b"2".to_vec()), None, Some(b"1".to_vec())])
    );
    let empty: [&str; 0] = [];
    assert_eq!(get_many(&empty), Ok(vec![]));
    set_many(vec![("c".to_owned(), vec![3u8])]).unwrap();
    delete_many(["a", "c"]).unwrap();
    assert_eq!(
        get_many(&["a".to_owned(), "b".to_owned(), "c".to_owned()]),
        Ok(vec![None, Some(b"2".to_vec()), None])
    );
}

#[test]
fn buckets_are_apart_and_need_a_grant() {
    let orders = bucket("orders");
    assert_eq!(orders.name(), "orders");
    set("k", "default").unwrap();
    orders.set("k", "orders").unwrap();
    assert_eq!(get("k"), Ok(Some(b"default".to_vec())));
    assert_eq!(orders.get("k"), Ok(Some(b"orders".to_vec())));
    assert_eq!(
        bucket(DEFAULT_BUCKET).get("k"),
        Ok(Some(b"default".to_vec()))
    );

    testing::grant_only(&["orders"]);
    assert_eq!(orders.get("k"), Ok(Some(b"orders".to_vec())));
    assert_eq!(
        get("k"),
        Ok(Some(b"default".to_vec())),
        "default is always granted"
    );
    let nope = bucket("nope");
    assert_eq!(nope.get("k"), Err(Error::AccessDenied));
    assert_eq!(nope.increment("k", 1), Err(Error::AccessDenied));
    assert_eq!(
        nope.once("k", || Ok::<(), Error>(())),
        Err(Error::AccessDenied)
    );

    testing::clear();
    assert_eq!(nope.get("k"), Ok(None));
    assert_eq!(orders.get("k"), Ok(None), "clear empties every bucket");
}

#[test]
fn keys_and_values_have_the_hosts_limits() {
    let key = "k".repeat(MAX_KEY_BYTES);
    set(&key, "v").unwrap();
    assert_eq!(get(&key), Ok(Some(b"v".to_vec())));
    let long = "k".repeat(MAX_KEY_BYTES + 1);
    assert!(other(set(&long, "v").unwrap_err()).contains("1025 bytes"));
    assert!(get(&long).is_err());
    assert!(increment(&long, 1).is_err());
    assert!(get_many(&["a", &long]).is_err());
    assert!(delete_many([long.as_str()]).is_err());
    let multibyte = "é".repeat(MAX_KEY_BYTES / 2 + 1);
    assert!(get(&multibyte).is_err(), "the limit counts bytes");

    let value = vec![b'x'; MAX_VALUE_BYTES];
    set("v", &value).unwrap();
    assert_eq!(get("v").unwrap().map(|v| v.len()), Some(MAX_VALUE_BYTES));
    let big = vec![b'x'; MAX_VALUE_BYTES + 1];
    assert!(other(set("w", &big).unwrap_err()).contains("358401 bytes"));
    assert!(set_if_absent("w", &big).is_err());
    assert!(compare_and_set("v", &value, &big).is_err());
    assert!(set_many([("a", &b"1"[..]), ("w", &big[..])]).is_err());
    assert_eq!(get("a"), Ok(None), "a refused batch writes nothing here");
    assert_eq!(get("w"), Ok(None));
}

#[test]
fn a_failing_store_answers_errors() {
    set("k", "v").unwrap();
    testing::fail_with(Some(Error::Other("throttled".into())));
    assert_eq!(get("k"), Err(Error::Other("throttled".into())));
    assert_eq!(set("k", "w"), Err(Error::Other("throttled".into())));
    assert!(get_many(&["k"]).is_err());
    let mut ran = false;
    let once = once("job", || {
        ran = true;
        Ok::<(), Error>(())
    });
    assert_eq!(once, Err(Error::Other("throttled".into())));
    assert!(!ran, "the effect does not run when the key cannot be read");
    testing::fail_with(None);
    assert_eq!(get("k"), Ok(Some(b"v".to_vec())));
}

#[derive(Debug, PartialEq)]
enum Failed {
    State(Error),
    Effect,
}

impl From<Error> for Failed {
    fn from(e: Error) -> Failed {
        Failed::State(e)
    }
}

#[test]
fn once_runs_an_effect_until_it_succeeds_then_never_again() {
    let runs = std::cell::Cell::new(0);
    let failing = || {
        runs.set(runs.get() + 1);
        Err(Failed::Effect)
    };
    assert_eq!(once("booked:1", failing), Err(Failed::Effect));
    assert_eq!(
        get("booked:1"),
        Ok(None),
        "a failed effect leaves the key unmarked"
    );
    let ok = || -> Result<(), Failed> {
        runs.set(runs.get() + 1);
        Ok(())
    };
    assert_eq!(once("booked:1", ok), Ok(true));
    assert_eq!(get("booked:1"), Ok(Some(DONE_MARK.to_vec())));
    assert_eq!(once("booked:1", ok), Ok(false));
    assert_eq!(runs.get(), 2);

    assert_eq!(bucket("orders").once("booked:1", ok), Ok(true));
    assert_eq!(runs.get(), 3, "each bucket has its own marks");
    set("booked:2", "anything").unwrap();
    assert_eq!(once("booked:2", ok), Ok(false), "any value marks a key");
    assert_eq!(runs.get(), 3);
}

#[test]
fn once_answers_true_when_another_marked_the_key_meanwhile() {
    let effect = || {
        // Another instance runs the same effect and marks the key first.
        set_if_absent("job", "theirs").map(|_| ())
    };
    assert_eq!(once("job", effect), Ok(true));
    assert_eq!(get("job"), Ok(Some(b"theirs".to_vec())));
}

#[test]
fn once_answers_the_error_of_a_mark_it_could_not_write() {
    let mut ran = false;
    let got = once("job", || {
        ran = true;
        testing::fail_with(Some(Error::Other("unreachable".into())));
        Ok::<(), Failed>(())
    });
    assert!(ran);
    assert_eq!(got, Err(Failed::State(Error::Other("unreachable".into()))));
    testing::fail_with(None);
    assert_eq!(
        get("job"),
        Ok(None),
        "unmarked: the effect runs again next time"
    );
}

#[test]
fn each_thread_has_its_own_store() {
    set("mine", "1").unwrap();
    std::thread::spawn(|| assert_eq!(get("mine"), Ok(None)))
        .join()
        .unwrap();
    assert_eq!(get("mine"), Ok(Some(b"1".to_vec())));
}

#[test]
fn errors_name_their_kind() {
    assert_eq!(Error::NoSuchStore.kind(), "no-such-store");
    assert_eq!(Error::AccessDenied.kind(), "access-denied");
    assert_eq!(Error::Other("x".into()).kind(), "other");
    assert!(
        Error::AccessDenied
            .to_string()
            .starts_with("access denied by the host")
    );
    assert_eq!(
        Error::Other("the store is throttling".into()).to_string(),
        "the store is throttling"
    );
    let boxed: Box<dyn std::error::Error> = Box::new(Error::NoSuchStore);
    assert!(boxed.to_string().contains("no such store"));
}
