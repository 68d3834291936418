//! The fleet's rows beside the leases, on the lease store's client: a component in parts, and
//! a desired version conditional on the row its writer read.

use super::{store, table};
use shardhost::fleet_table::{CHUNK_BYTES, Desired, FleetTable, SetDesired, StoredComponent};
use shardhost::lease::now_ms;

pub async fn a_component_larger_than_an_item_is_stored_in_parts_beside_the_leases_and_read_back_whole(
    ep: String,
) {
    let (raw, table) = table(&ep, "parts").await;
    let store = FleetTable::beside(&store(&ep, &table, None).await);
    let bytes: Vec<u8> = (0..CHUNK_BYTES * 2 + 1234)
        .map(|i| (i * 31 % 251) as u8)
        .collect();
    let stored = store
        .put_component("svc", "sub", "v1", &bytes)
        .await
        .unwrap();
    assert_eq!(stored.chunks, 3);
    assert_eq!(
        store.component("svc", "sub", &stored).await.unwrap(),
        Some(bytes)
    );
    // Beside the leases: keys no `stream:shard` or bare shard id can be.
    for i in 0..3 {
        let upload = stored.upload.as_deref().expect("an upload id");
        let key = format!("#shardhost#component#svc#sub#v1#{upload}#{i}");
        assert!(raw.row(&table, &key).await.is_some(), "{key}");
    }
    store.delete_component("svc", "sub", &stored).await.unwrap();
    assert_eq!(store.component("svc", "sub", &stored).await.unwrap(), None);
}

pub async fn a_desired_version_written_over_a_row_read_earlier_is_refused(ep: String) {
    let (_raw, table) = table(&ep, "desired").await;
    let store = FleetTable::beside(&store(&ep, &table, None).await);
    let max = 64 << 20;
    let desired = |v: &str, generation: u64| Desired {
        component: StoredComponent {
            version: v.repeat(64),
            size: 1,
            chunks: 1,
            upload: Some("u1".into()),
        },
        generation,
        deploy_id: "lineage".into(),
        deployed_by: "test".into(),
        deployed_at_ms: now_ms(),
        previous: None,
        previous_signed: None,
        signed: None,
    };
    let nothing = store.desired("svc", "sub", max).await.unwrap();
    assert_eq!(nothing.row, None);
    let written = store
        .set_desired("svc", "sub", &desired("a", 1), &nothing.seen)
        .await
        .unwrap();
    assert!(matches!(written, SetDesired::Done));
    // A second first deploy comes too late.
    let written = store
        .set_desired("svc", "sub", &desired("b", 2), &nothing.seen)
        .await
        .unwrap();
    assert!(matches!(written, SetDesired::Conflict));
    let first = store.desired("svc", "sub", max).await.unwrap();
    let written = store
        .set_desired("svc", "sub", &desired("b", 2), &first.seen)
        .await
        .unwrap();
    assert!(matches!(written, SetDesired::Done));
    // One that read generation 1 comes too late now.
    let written = store
        .set_desired("svc", "sub", &desired("c", 3), &first.seen)
        .await
        .unwrap();
    assert!(matches!(written, SetDesired::Conflict));
    let Some(Ok(now)) = store.desired("svc", "sub", max).await.unwrap().row else {
        panic!("a usable row");
    };
    assert_eq!((now.component.version, now.generation), ("b".repeat(64), 2));
    // Another service's rows are its own.
    assert_eq!(store.desired("other", "sub", max).await.unwrap().row, None);
}
