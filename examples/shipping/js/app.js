// Books shipments with a carrier: the Rust shipping example (../src/lib.rs) in JavaScript,
// answering the same outcome for every record.
//
// - a shipment without an address can never ship: retired (drop);
// - a shipment for a carrier this release does not know waits for a release that knows it:
//   held (retry), so the shard's checkpoint stops in front of it;
// - every other shipment is booked (ack);
// - a record that is not a shipment at all is retired too.
//
// With `carrier_url` in the subscription's [subscription.config] (and its origin in
// [subscription.http] allow), booking is real: the shipment is POSTed there with the header
// `Idempotency-Key: <id>`, so a replayed record books the same shipment once. The carrier's 2xx
// acks it, a 4xx retires it (it can never be booked), a denied origin holds it (the config is
// wrong, not the record), and a 5xx, a timeout or a connection error tries again later
// (retryAfter, doubling with the attempt).
//
// Build: ./build (makes ship.wasm, for the world http-handler: the app calls fetch); try:
// shardhost invoke ship.wasm --records ../shipments.ndjson

import { handler, ack, drop, retry, retryAfter, config, HttpError } from "shardhost";

/** The carriers this release of the service books with. */
const CARRIERS = ["dhl", "ups"];

/**
 * The outcome of one record: at once, or (when it books) a Promise of it.
 * @param {import("shardhost").Record} record
 */
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
  const url = config.get("carrier_url");
  if (!url) {
    // none, or empty: nothing to book with
    console.info("shipment booked: id=%d carrier=%s", shipment.id, shipment.carrier);
    return ack;
  }
  return book(url, shipment, record);
}

export const handle = handler(ship);

/** POSTs the shipment to the carrier, keyed by its id. */
async function book(url, shipment, record) {
  const { id } = shipment;
  let response;
  try {
    response = await fetch(url, {
      method: "POST",
      headers: { "Content-Type": "application/json", "Idempotency-Key": String(id) },
      body: record.data,
    });
  } catch (e) {
    if (e instanceof HttpError && e.kind === "denied") {
      console.error("shipment %d held: %s", id, e.message);
      return retry;
    }
    return later(record, e.message, id);
  }
  if (response.ok) {
    console.info("shipment booked: id=%d carrier=%s status=%d", id, shipment.carrier, response.status);
    return ack;
  }
  if (response.status >= 400 && response.status < 500) {
    console.warn("the carrier refused shipment %d, retired: status=%d", id, response.status);
    return drop;
  }
  return later(record, `status ${response.status}`, id);
}

/** Tries again after 1 s, doubling with each attempt, up to a minute. */
function later(record, why, id) {
  const delay = Math.min(1000 * 2 ** (Math.min(Math.max(record.attempt, 1), 7) - 1), 60000);
  console.warn("the carrier did not book shipment %d (%s): again in %d ms", id, why, delay);
  return retryAfter(delay);
}

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
