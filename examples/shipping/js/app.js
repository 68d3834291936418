// Books shipments with a carrier: the Rust shipping example (../src/lib.rs) in JavaScript,
// answering the same outcome for every record.
//
// - a shipment without an address can never ship: retired (drop);
// - a shipment for a carrier this release does not know waits for a release that knows it:
//   held (retry), so the shard's checkpoint stops in front of it;
// - every other shipment is booked (ack);
// - a record that is not a shipment at all is retired too.
//
// Build: ./build (makes ship.wasm); try: shardhost invoke ship.wasm --records ../shipments.ndjson

import { handler, ack, drop, retry } from "shardhost";

/** The carriers this release of the service books with. */
const CARRIERS = ["dhl", "ups"];

/** @param {import("shardhost").Record} record */
export function ship(record) {
  let shipment;
  try {
    shipment = toShipment(record.json());
  } catch (e) {
    console.warn("not a shipment, retired: sequence_number=%s error=%s", record.sequenceNumber, e.message);
    return drop;
  }
  if (shipment.address === "") {
    console.warn("shipment without an address retired: id=%d", shipment.id);
    return drop;
  }
  if (!CARRIERS.includes(shipment.carrier)) {
    console.warn("unknown carrier, shipment held: id=%d carrier=%s", shipment.id, shipment.carrier);
    return retry;
  }
  console.info("shipment booked: id=%d carrier=%s", shipment.id, shipment.carrier);
  return ack;
}

export const handle = handler(ship);

/**
 * The checks the Rust example's `struct Shipment { id: u64, address: String, carrier: String }`
 * makes when serde decodes it. record.json() already refused what is not JSON, a key given
 * twice and integers past 2^53 - 1; the shape is ours to check:
 * - `id` a non-negative integer. JavaScript numbers are exact only up to 2^53 - 1, so ids from
 *   2^53 to 2^64 - 1, which serde would take, are refused here (by json()). serde also refuses
 *   -0 and ids written with a fraction or exponent (1.0, 1e3); we can see -0, not the spelling.
 * - `address` and `carrier` strings; other fields are ignored.
 * - serde's derive also takes the three fields as an array, in this order: so do we.
 */
function toShipment(value) {
  let id, address, carrier;
  if (Array.isArray(value)) {
    if (value.length !== 3) throw new Error(`invalid length ${value.length}, expected struct Shipment with 3 elements`);
    [id, address, carrier] = value;
  } else if (value !== null && typeof value === "object") {
    ({ id, address, carrier } = value);
  } else {
    throw new Error(`invalid type: ${JSON.stringify(value)}, expected struct Shipment`);
  }
  if (id === undefined) throw new Error("missing field `id`");
  if (!Number.isSafeInteger(id) || id < 0 || Object.is(id, -0)) {
    throw new Error(`invalid value: ${Object.is(id, -0) ? "-0" : JSON.stringify(id)}, expected u64`);
  }
  if (address === undefined) throw new Error("missing field `address`");
  if (typeof address !== "string") throw new Error(`invalid type: ${JSON.stringify(address)}, expected a string`);
  if (carrier === undefined) throw new Error("missing field `carrier`");
  if (typeof carrier !== "string") throw new Error(`invalid type: ${JSON.stringify(carrier)}, expected a string`);
  return { id, address, carrier };
}
