//! Books shipments with a carrier (seed 004, "Checkpoints and delivery guarantees").
//!
//! - a shipment without an address can never ship: retired ([`Outcome::Drop`]);
//! - a shipment for a carrier this release does not know waits for a release that knows it:
//!   held ([`Outcome::Retry`]), so the shard's checkpoint stops in front of it;
//! - every other shipment is booked ([`Outcome::Ack`]);
//! - a record that is not a shipment at all is retired too.
//!
//! With `carrier_url` in the subscription's `[subscription.config]` (and its origin in
//! `[subscription.http] allow`), booking is real: the shipment is POSTed there with the header
//! `Idempotency-Key: <id>`. The carrier's 2xx acks it, a 4xx retires it (it can never be
//! booked), and a 5xx, a timeout or a connection error tries again later (`retry-after`,
//! doubling with the attempt).
//!
//! Each shipment is booked once: the booking runs through [`state::once`] with the key
//! `booked:<id>`, marked done after the carrier's 2xx, so a shipment booked before (a replayed
//! record, or the same shipment sent twice) is acked without asking the carrier again. This
//! needs the subscription's `[subscription.state]`. The `Idempotency-Key` covers what the mark
//! cannot: a crash between the booking and its mark, or two instances booking at once. When
//! the state store fails, the shipment is tried again later, like a carrier that is down.
//! Without `carrier_url` nothing is booked, and nothing touches state.

use shardhost_guest::serde::Deserialize;
use shardhost_guest::{Outcome, Record, config, http, state};

/// The carriers this release of the service books with.
const CARRIERS: [&str; 2] = ["dhl", "ups"];

#[derive(Debug, PartialEq, Deserialize)]
#[serde(crate = "shardhost_guest::serde")]
struct Shipment {
    id: u64,
    address: String,
    carrier: String,
}

fn ship(record: &Record) -> Outcome {
    let carrier_url = config::get("carrier_url").filter(|url| !url.is_empty());
    ship_to(record, carrier_url.as_deref())
}

/// What becomes of a record, booking with the carrier at `carrier_url` when there is one.
fn ship_to(record: &Record, carrier_url: Option<&str>) -> Outcome {
    let shipment = match record.json::<Shipment>() {
        Ok(shipment) => shipment,
        Err(e) => {
            shardhost_guest::warn!(
                "not a shipment, retired: sequence_number={} error={e}",
                record.sequence_number()
            );
            return Outcome::Drop;
        }
    };
    if shipment.address.is_empty() {
        shardhost_guest::warn!("shipment without an address retired: id={}", shipment.id);
        return Outcome::Drop;
    }
    if !CARRIERS.contains(&shipment.carrier.as_str()) {
        shardhost_guest::warn!(
            "unknown carrier, shipment held: id={} carrier={}",
            shipment.id,
            shipment.carrier
        );
        return Outcome::Retry;
    }
    match carrier_url {
        Some(url) => book_once(&shipment, record, || book(url, &shipment, record)),
        None => {
            shardhost_guest::info!(
                "shipment booked: id={} carrier={}",
                shipment.id,
                shipment.carrier
            );
            Outcome::Ack
        }
    }
}

/// Why a shipment was not booked now.
enum NotBooked {
    /// The carrier did not book it: the record's outcome.
    Carrier(Outcome),
    /// The state store failed.
    State(state::Error),
}

impl From<state::Error> for NotBooked {
    fn from(e: state::Error) -> NotBooked {
        NotBooked::State(e)
    }
}

/// Books the shipment with `booking` unless it was booked before (`booked:<id>` marked done).
fn book_once(
    shipment: &Shipment,
    record: &Record,
    booking: impl FnOnce() -> Result<(), Outcome>,
) -> Outcome {
    let id = shipment.id;
    let key = format!("booked:{id}");
    match state::once(&key, || booking().map_err(NotBooked::Carrier)) {
        Ok(true) => Outcome::Ack,
        Ok(false) => {
            shardhost_guest::info!("shipment already booked, skipped: id={id}");
            Outcome::Ack
        }
        Err(NotBooked::Carrier(outcome)) => outcome,
        Err(NotBooked::State(e)) => later(record, &format!("state: {e}"), id),
    }
}

/// POSTs the shipment to the carrier, keyed by its id: `Ok` when the carrier booked it (2xx),
/// else the record's outcome.
fn book(url: &str, shipment: &Shipment, record: &Record) -> Result<(), Outcome> {
    let sent = http::post(url)
        .header("Content-Type", "application/json")
        .header("Idempotency-Key", shipment.id.to_string())
        .body(record.data())
        .send();
    let id = shipment.id;
    match sent {
        Ok(r) if r.is_success() => {
            shardhost_guest::info!(
                "shipment booked: id={id} carrier={} status={}",
                shipment.carrier,
                r.status()
            );
            Ok(())
        }
        Ok(r) if (400..500).contains(&r.status()) => {
            shardhost_guest::warn!(
                "the carrier refused shipment {id}, retired: status={}",
                r.status()
            );
            Err(Outcome::Drop)
        }
        Ok(r) => Err(later(
            record,
            &format!("the carrier answered {}", r.status()),
            id,
        )),
        Err(e @ http::Error::Denied { .. }) => {
            shardhost_guest::error!("shipment {id} held: {e}");
            Err(Outcome::Retry)
        }
        Err(e) => Err(later(record, &e.to_string(), id)),
    }
}

/// Tries again after 1 s, doubling with each attempt, up to a minute.
fn later(record: &Record, why: &str, id: u64) -> Outcome {
    let delay = 1000u64 << (record.attempt().clamp(1, 7) - 1);
    let delay = delay.min(60_000);
    shardhost_guest::warn!("shipment {id} not booked ({why}): again in {delay} ms");
    Outcome::RetryAfter(delay)
}

shardhost_guest::handler!(ship);

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    const CARRIER: &str = "http://carrier.test/book";

    fn record(data: &str) -> Record {
        Record::new("order-1", "1", data)
    }

    fn shipment(record: &Record) -> Shipment {
        record.json().unwrap()
    }

    #[test]
    fn outcomes() {
        let ok = r#"{"id":1,"address":"Main St 1","carrier":"dhl"}"#;
        let no_address = r#"{"id":2,"address":"","carrier":"ups"}"#;
        let fedex = r#"{"id":3,"address":"Elm St 2","carrier":"fedex"}"#;
        assert_eq!(ship_to(&record(ok), None), Outcome::Ack);
        assert_eq!(ship_to(&record(no_address), None), Outcome::Drop);
        assert_eq!(ship_to(&record(fedex), None), Outcome::Retry);
        assert_eq!(ship_to(&record("not json"), None), Outcome::Drop);
        // Checked before any booking: nothing is sent, nothing touches state.
        assert_eq!(ship_to(&record(no_address), Some(CARRIER)), Outcome::Drop);
        assert_eq!(ship_to(&record(fedex), Some(CARRIER)), Outcome::Retry);
        assert_eq!(state::get("booked:2"), Ok(None));
    }

    #[test]
    fn without_a_carrier_nothing_touches_state() {
        state::testing::fail_with(Some(state::Error::Other("unreachable".into())));
        let ok = r#"{"id":1,"address":"Main St 1","carrier":"dhl"}"#;
        assert_eq!(ship_to(&record(ok), None), Outcome::Ack);
    }

    #[test]
    fn a_shipment_is_booked_once() {
        let r = record(r#"{"id":7,"address":"Main St 1","carrier":"dhl"}"#);
        let s = shipment(&r);
        let bookings = Cell::new(0);
        let booking = || {
            bookings.set(bookings.get() + 1);
            Ok(())
        };
        assert_eq!(book_once(&s, &r, booking), Outcome::Ack);
        assert_eq!(bookings.get(), 1);
        assert_eq!(book_once(&s, &r, booking), Outcome::Ack, "skipped");
        assert_eq!(bookings.get(), 1, "the carrier is not asked again");
        // The whole handler skips it too: natively a request would fail (no host), so an
        // Ack here means no request was made.
        assert_eq!(ship_to(&r, Some(CARRIER)), Outcome::Ack);
        let other = record(r#"{"id":8,"address":"Main St 1","carrier":"dhl"}"#);
        assert_eq!(book_once(&shipment(&other), &other, booking), Outcome::Ack);
        assert_eq!(bookings.get(), 2, "another id is booked");
    }

    #[test]
    fn a_shipment_the_carrier_did_not_book_is_tried_again() {
        let r = record(r#"{"id":9,"address":"Main St 1","carrier":"ups"}"#);
        let s = shipment(&r);
        assert_eq!(book_once(&s, &r, || Err(Outcome::Drop)), Outcome::Drop);
        assert_eq!(
            book_once(&s, &r, || Err(Outcome::RetryAfter(1000))),
            Outcome::RetryAfter(1000)
        );
        assert_eq!(state::get("booked:9"), Ok(None), "not marked");
        // Natively the request itself fails (no host): a connection-like error, tried later.
        assert_eq!(ship_to(&r, Some(CARRIER)), Outcome::RetryAfter(1000));
        assert_eq!(
            ship_to(&r.clone().with_attempt(3), Some(CARRIER)),
            Outcome::RetryAfter(4000)
        );
        assert_eq!(state::get("booked:9"), Ok(None));
        let booked = Cell::new(false);
        let booking = || {
            booked.set(true);
            Ok(())
        };
        assert_eq!(book_once(&s, &r, booking), Outcome::Ack);
        assert!(booked.get());
        assert_eq!(state::get("booked:9"), Ok(Some(state::DONE_MARK.to_vec())));
    }

    #[test]
    fn a_state_error_is_tried_again_later() {
        let r = record(r#"{"id":10,"address":"Main St 1","carrier":"dhl"}"#).with_attempt(2);
        let s = shipment(&r);
        state::testing::fail_with(Some(state::Error::Other("throttled".into())));
        let asked = Cell::new(false);
        let outcome = book_once(&s, &r, || {
            asked.set(true);
            Ok(())
        });
        assert_eq!(outcome, Outcome::RetryAfter(2000));
        assert!(
            !asked.get(),
            "the carrier is not asked when state cannot be read"
        );
        assert_eq!(ship_to(&r, Some(CARRIER)), Outcome::RetryAfter(2000));
    }
}
