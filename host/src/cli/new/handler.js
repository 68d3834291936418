// {{name}}: a shardhost handler. Each record is an order: one with a quantity is acked, one
// without is dropped (a warning says why), and anything else is not an order (dropped too).
// Return `retry` to hold a record: its shard's checkpoint waits in front of it.
import { handler, ack, drop, DecodeError } from "shardhost";

/** @param {import("shardhost").Record} record */
export function order(record) {
  let o;
  try {
    o = record.json();
  } catch (e) {
    if (!(e instanceof DecodeError)) throw e;
    console.warn("not an order: %s", e.message);
    return drop;
  }
  if (o === null || typeof o !== "object" || Array.isArray(o)) {
    console.warn("not an order");
    return drop;
  }
  if (!Number.isInteger(o.quantity) || o.quantity <= 0) {
    console.warn("order %s has no quantity", o.id);
    return drop;
  }
  console.info("order %s: %d", o.id, o.quantity);
  return ack;
}

export const handle = handler(order);
