//! `shardhost run` processes on kinesis-mock and dynalite: the shipping example books once
//! across a restart and across a killed instance; a missing state table stops `run` before it
//! starts; `deploy --config` refuses a handler that keeps state where none is granted.

use std::collections::BTreeMap;
use std::time::Duration;

use super::{shipment, state_table};
use crate::support::fleet::{Instance, Stack, shardhost, stack};
use crate::support::{HostToml, HttpServer, Scratch, wait_until_else};

impl Stack {
    /// Instance `owner` running the shipping example, booking with `carrier`, state in `table`.
    pub(crate) fn shipping(&self, owner: &str, carrier: &HttpServer, table: &str) -> HostToml {
        let sub = self
            .subscription("ship")
            .trim_horizon()
            .batch(10)
            .nested("http", "allow", vec![carrier.origin()])
            .nested(
                "config",
                "carrier_url",
                format!("{}/carrier", carrier.origin()),
            )
            .nested("state", "table", table);
        self.host(owner)
            .leases("renew_every", "1s")
            .leases("list_every", "1s")
            .leases("checkpoint_every", "200ms")
            .subscription(sub)
    }
}

/// The seeds' story: shipments, one of them held (a carrier nobody knows). Run, stop, run
/// again: the second run reads again from the held shipment on, and books none of the
/// shipments behind it a second time; the carrier sees every bookable shipment exactly once
/// and the held one never.
#[test]
fn the_shipping_example_books_every_shipment_once_across_a_restart() {
    let Some(st) = stack(1) else { return };
    let table = state_table(&st.d, &st.rt);
    let carrier = HttpServer::start();
    let dir = Scratch::new("state-story");
    let held = 1005;
    for id in 1001..=1012 {
        let carrier_name = if id == held { "fedex" } else { "dhl" };
        st.k.put(
            &st.stream,
            &format!("order-{id}"),
            shipment(id, carrier_name),
        );
    }
    let bookable: Vec<String> = (1001..=1012)
        .filter(|id| *id != held)
        .map(|id| id.to_string())
        .collect();
    let mut first = Instance::start(&dir, "first", st.shipping("first", &carrier, &table));
    wait_until_else(
        "every bookable shipment booked",
        Duration::from_secs(60),
        || carrier.bookings().len() == bookable.len(),
        || format!("{:?}\n{}", carrier.bookings(), first.text()),
    );
    // The checkpoint stops in front of the held shipment.
    wait_until_else(
        "the checkpoint to stop in front of the held shipment",
        Duration::from_secs(20),
        || st.checkpoint("shardId-000000000000").is_some(),
        || first.text(),
    );
    assert_eq!(first.interrupt(), Some(0), "{}", first.text());
    let second = Instance::start(&dir, "second", st.shipping("second", &carrier, &table));
    // Read again from the held shipment: the seven behind it are skipped, not booked again.
    second.wait_for(
        "the second run to skip the shipments already booked",
        Duration::from_secs(60),
        |i| {
            i.handled()
                .iter()
                .filter(|(_, m)| m.contains("already booked, skipped"))
                .count()
                >= 7
        },
    );
    let bookings = carrier.bookings();
    let expected: BTreeMap<String, u64> = bookable.iter().map(|id| (id.clone(), 1)).collect();
    assert_eq!(bookings, expected, "{}", second.text());
    assert!(!bookings.contains_key(&held.to_string()));
}

/// Two instances share the lease table and the state table; one is killed (-9) while
/// shipments flow. Every shipment is booked; one is booked twice only where the killed
/// instance had booked it and not yet marked it: at most one per shard it held.
#[test]
fn a_killed_instance_books_again_only_what_was_in_flight() {
    const SHARDS: usize = 4;
    const SHIPMENTS: u64 = 400;
    let Some(st) = stack(SHARDS as i32) else {
        return;
    };
    let table = state_table(&st.d, &st.rt);
    let carrier = HttpServer::start();
    let dir = Scratch::new("state-kill");
    let mut a = Instance::start(&dir, "a", st.shipping("a", &carrier, &table));
    let b = Instance::start(&dir, "b", st.shipping("b", &carrier, &table));
    for id in 1..=SHIPMENTS {
        st.k.put(&st.stream, &format!("order-{id}"), shipment(id, "ups"));
        if id == SHIPMENTS / 2 {
            wait_until_else(
                "bookings under way",
                Duration::from_secs(60),
                || carrier.bookings().len() >= 50,
                || a.text(),
            );
            a.kill9();
        }
    }
    wait_until_else(
        "every shipment booked",
        Duration::from_secs(120),
        || carrier.bookings().len() as u64 == SHIPMENTS,
        || format!("{} booked\n{}", carrier.bookings().len(), b.text()),
    );
    let twice: Vec<_> = carrier
        .bookings()
        .into_iter()
        .filter(|(_, n)| *n > 1)
        .collect();
    eprintln!("booked twice after kill -9: {twice:?}");
    assert!(
        twice.len() <= SHARDS && twice.iter().all(|(_, n)| *n == 2),
        "more bookings repeated than were in flight: {twice:?}"
    );
}

/// A state table that does not exist stops `run` before anything reads, naming the table and
/// the command that creates it (as a missing lease table does).
#[test]
fn run_refuses_to_start_without_its_state_table_naming_it_and_how_to_create_it() {
    let Some(st) = stack(1) else { return };
    let carrier = HttpServer::start();
    let dir = Scratch::new("state-missing");
    let config = st
        .shipping("a", &carrier, "no-such-state-table")
        .to_string();
    let path = dir.write("host.toml", config);
    let out = shardhost(&["run", path.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    for needle in [
        "[subscription.state]",
        "`no-such-state-table` does not exist",
        "aws dynamodb create-table --table-name no-such-state-table",
    ] {
        assert!(stderr.contains(needle), "`{needle}` missing: {stderr}");
    }
    assert_eq!(st.owner("shardId-000000000000"), None, "a lease was taken");
}

/// `deploy --config` validates under the subscription's grants: a handler that keeps state is
/// refused for a subscription that grants none, before the lease table is touched.
#[test]
fn deploy_refuses_a_handler_that_keeps_state_where_no_state_is_granted() {
    let Some(f) = crate::fleet::Fleet::new(1, "state-deploy") else {
        return;
    };
    let out = f.cli(
        "deploy",
        &[crate::fleet::SUBSCRIPTION, &crate::fleet::path("ship")],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    for needle in [
        "grants no state",
        "[subscription.state]",
        "desired version is unchanged",
    ] {
        assert!(stderr.contains(needle), "`{needle}` missing: {stderr}");
    }
    assert_eq!(
        f.report()
            .desired_of(crate::fleet::SUBSCRIPTION)
            .unwrap()
            .version,
        None
    );
}
