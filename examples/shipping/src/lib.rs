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
//! `Idempotency-Key: <id>`, so a replayed record books the same shipment once. The carrier's
//! 2xx acks it, a 4xx retires it (it can never be booked), and a 5xx, a timeout or a
//! connection error tries again later (`retry-after`, doubling with the attempt).

use shardhost_guest::serde::Deserialize;
use shardhost_guest::{Outcome, Record, config, http};

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
    match config::get("carrier_url").filter(|url| !url.is_empty()) {
        Some(url) => book(&url, &shipment, record),
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

/// POSTs the shipment to the carrier, keyed by its id.
fn book(url: &str, shipment: &Shipment, record: &Record) -> Outcome {
    let sent = http::post(url)
        .header("Content-Type", "application/json")
        .header("Idempotency-Key", shipment.id.to_string())
        .body(record.data())
        .send();
    let id = shipment.id;
    match sent {
        Ok(r) if r.is_success() => {
            shardhost_guest::info!("shipment booked: id={id} carrier={} status={}", shipment.carrier, r.status());
            Outcome::Ack
        }
        Ok(r) if (400..500).contains(&r.status()) => {
            shardhost_guest::warn!("the carrier refused shipment {id}, retired: status={}", r.status());
            Outcome::Drop
        }
        Ok(r) => later(record, &format!("status {}", r.status()), id),
        Err(e @ http::Error::Denied { .. }) => {
            shardhost_guest::error!("shipment {id} held: {e}");
            Outcome::Retry
        }
        Err(e) => later(record, &e.to_string(), id),
    }
}

/// Tries again after 1 s, doubling with each attempt, up to a minute.
fn later(record: &Record, why: &str, id: u64) -> Outcome {
    let delay = 1000u64 << (record.attempt().clamp(1, 7) - 1);
    let delay = delay.min(60_000);
    shardhost_guest::warn!("the carrier did not book shipment {id} ({why}): again in {delay} ms");
    Outcome::RetryAfter(delay)
}

shardhost_guest::handler!(ship);

#[cfg(test)]
mod tests {
    use super::*;

    fn record(data: &str) -> Record {
        Record::new("order-1", "1", data)
    }

    #[test]
    fn outcomes() {
        let ok = r#"{"id":1,"address":"Main St 1","carrier":"dhl"}"#;
        let no_address = r#"{"id":2,"address":"","carrier":"ups"}"#;
        let fedex = r#"{"id":3,"address":"Elm St 2","carrier":"fedex"}"#;
        assert_eq!(ship(&record(ok)), Outcome::Ack);
        assert_eq!(ship(&record(no_address)), Outcome::Drop);
        assert_eq!(ship(&record(fedex)), Outcome::Retry);
        assert_eq!(ship(&record("not json")), Outcome::Drop);
    }
}
