//! Books shipments with a carrier (seed 004, "Checkpoints and delivery guarantees").
//!
//! - a shipment without an address can never ship: retired ([`Outcome::Drop`]);
//! - a shipment for a carrier this release does not know waits for a release that knows it:
//!   held ([`Outcome::Retry`]), so the shard's checkpoint stops in front of it;
//! - every other shipment is booked ([`Outcome::Ack`]);
//! - a record that is not a shipment at all is retired too.

use shardhost_guest::serde::Deserialize;
use shardhost_guest::{Outcome, Record};

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
    shardhost_guest::info!(
        "shipment booked: id={} carrier={}",
        shipment.id,
        shipment.carrier
    );
    Outcome::Ack
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
