//! {{name}}: a shardhost handler. Each record is an order: one with a quantity is acked, one
//! without is dropped (a warning says why), and anything else is not an order (dropped too).
//! Answer `Outcome::Retry` to hold a record: its shard's checkpoint waits in front of it.

use shardhost_guest::serde::Deserialize;
use shardhost_guest::{Outcome, Record};

#[derive(Deserialize)]
#[serde(crate = "shardhost_guest::serde")]
struct Order {
    id: u64,
    quantity: Option<u32>,
}

fn handle(record: &Record) -> Outcome {
    let order = match record.json::<Order>() {
        Ok(order) => order,
        Err(e) => {
            shardhost_guest::warn!("not an order: {e}");
            return Outcome::Drop;
        }
    };
    match order.quantity {
        Some(quantity) if quantity > 0 => {
            shardhost_guest::info!("order {}: {quantity}", order.id);
            Outcome::Ack
        }
        _ => {
            shardhost_guest::warn!("order {} has no quantity", order.id);
            Outcome::Drop
        }
    }
}

shardhost_guest::handler!(handle);

#[cfg(test)]
mod tests {
    use super::*;

    fn order(data: &str) -> Outcome {
        handle(&Record::new("order-1", "1", data))
    }

    #[test]
    fn an_order_with_a_quantity_is_acked_and_one_without_is_dropped() {
        assert_eq!(order(r#"{"id": 1, "sku": "mug", "quantity": 2}"#), Outcome::Ack);
        assert_eq!(order(r#"{"id": 2, "sku": "mug"}"#), Outcome::Drop);
        assert_eq!(order("not an order"), Outcome::Drop);
    }
}
