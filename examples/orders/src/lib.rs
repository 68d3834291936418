//! Picks warehouse orders (seed 000, "Several instances"): every order is logged and acked.
//! Run several hosts on one lease table and each shard is read by the one holding its lease.

use shardhost_guest::serde::Deserialize;
use shardhost_guest::{Outcome, Record};

#[derive(Debug, PartialEq, Deserialize)]
#[serde(crate = "shardhost_guest::serde")]
struct Order {
    id: u64,
    sku: String,
}

fn pick(record: &Record) -> Outcome {
    match record.json::<Order>() {
        Ok(order) => {
            shardhost_guest::info!("order picked: id={} sku={}", order.id, order.sku);
            Outcome::Ack
        }
        Err(e) => {
            shardhost_guest::warn!(
                "not an order, retired: sequence_number={} error={e}",
                record.sequence_number()
            );
            Outcome::Drop
        }
    }
}

shardhost_guest::handler!(pick);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_orders() {
        let order = Record::new("customer-7", "1", r#"{"id":7,"sku":"SKU-1"}"#);
        assert_eq!(pick(&order), Outcome::Ack);
        assert_eq!(pick(&Record::new("customer-7", "2", "[]")), Outcome::Drop);
    }
}
