"""{{name}}: a shardhost handler. Each record is an order: one with a quantity is acked, one
without is dropped (a warning says why), and anything else is not an order (dropped too).
Return shardhost.retry to hold a record: its shard's checkpoint waits in front of it."""

import shardhost


@shardhost.handler
def handle(record: shardhost.Record) -> shardhost.Outcome:
    try:
        order = record.json()
    except shardhost.DecodeError as e:
        shardhost.log.warn("not an order: %s", e)
        return shardhost.drop
    if not isinstance(order, dict):
        shardhost.log.warn("not an order: %s", type(order).__name__)
        return shardhost.drop
    quantity = order.get("quantity")
    if type(quantity) is not int or quantity <= 0:
        shardhost.log.warn("order %s has no quantity", order.get("id"))
        return shardhost.drop
    shardhost.log.info("order %s: %d", order.get("id"), quantity)
    return shardhost.ack
