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
// A booking goes through state.once(`booked:<id>`, ...): a shipment booked before (a replay, the
// same shipment in another record) is not sent again (`shipment already booked, skipped`, ack).
// The key is marked only when the carrier booked it (2xx); when the store fails, the record
// tries again later like any other temporary failure. Without `carrier_url` nothing touches the
// state.
//
// Build: ./build (makes ship.wasm, for the world handler+http+state: the app calls fetch and
// uses state; the subscription grants both); try:
// shardhost invoke ship.wasm --records ../shipments.ndjson

import { handler, integer, ack, drop, retry, retryAfter, config, state, HttpError, StateError } from "shardhost";

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
    console.warn("shipment without an address retired: id=%s", String(shipment.id));
    return drop;
  }
  if (!CARRIERS.includes(shipment.carrier)) {
    console.warn("unknown carrier, shipment held: id=%s carrier=%s", String(shipment.id), shipment.carrier);
    return retry;
  }
  const url = config.get("carrier_url");
  if (!url) {
    // none, or empty: nothing to book with
    console.info("shipment booked: id=%s carrier=%s", String(shipment.id), shipment.carrier);
    return ack;
  }
  return bookOnce(url, shipment, record);
}

export const handle = handler(ship);

/** How the booking leaves state.once when the carrier did not book: with the record's outcome,
 * and the shipment's key unmarked. */
class NotBooked extends Error {
  constructor(outcome) {
    super(`not booked: ${outcome.kind}`);
    this.outcome = outcome;
  }
}

/** Books the shipment unless a booking of it is marked done in the state. */
async function bookOnce(url, shipment, record) {
  const id = String(shipment.id);
  let bookedNow;
  try {
    bookedNow = await state.once(`booked:${id}`, async () => {
      const outcome = await book(url, shipment, record);
      if (outcome !== ack) throw new NotBooked(outcome);
    });
  } catch (e) {
    if (e instanceof NotBooked) return e.outcome;
    if (e instanceof StateError) return later(record, `the state of shipment ${id} is out of reach (${e.kind}: ${e.message})`);
    throw e;
  }
  if (!bookedNow) console.info("shipment already booked, skipped: id=%s", id);
  return ack;
}

/** POSTs the shipment to the carrier, keyed by its id. */
async function book(url, shipment, record) {
  const id = String(shipment.id);
  let response;
  try {
    response = await fetch(url, {
      method: "POST",
      headers: { "Content-Type": "application/json", "Idempotency-Key": id },
      body: record.data,
    });
  } catch (e) {
    if (e instanceof HttpError && e.kind === "denied") {
      console.error("shipment %s held: %s", id, e.message);
      return retry;
    }
    return later(record, `the carrier did not book shipment ${id} (${e.message})`);
  }
  if (response.ok) {
    console.info("shipment booked: id=%s carrier=%s status=%d", id, shipment.carrier, response.status);
    return ack;
  }
  if (response.status >= 400 && response.status < 500) {
    console.warn("the carrier refused shipment %s, retired: status=%d", id, response.status);
    return drop;
  }
  return later(record, `the carrier did not book shipment ${id} (status ${response.status})`);
}

/** Tries again after 1 s, doubling with each attempt, up to a minute. */
function later(record, why) {
  const delay = Math.min(1000 * 2 ** (Math.min(Math.max(record.attempt, 1), 7) - 1), 60000);
  console.warn("%s: again in %d ms", why, delay);
  return retryAfter(delay);
}

/**
 * The checks the Rust example's `struct Shipment { id: u64, address: String, carrier: String }`
 * makes when serde decodes it. record.json() already refused what the JSON rule refuses
 * (guest-sdk/JSON.md: a key given twice, a lone surrogate, a number beyond a double, nesting
 * past 128, anywhere); the shape is ours to check:
 * - `id` an unsigned 64-bit integer: `integer()` takes only what was written as an integer
 *   (not `1.0`, `1e3` or `-0`, as serde), a number or, past 2^53 - 1, a BigInt; then >= 0.
 * - `address` and `carrier` strings; other fields are ignored.
 * - serde's derive also takes the three fields as an array, in this order: so do we.
 */
function toShipment(value) {
  let container, idKey;
  if (Array.isArray(value)) {
    if (value.length !== 3) throw new Error(`invalid length ${value.length}, expected struct Shipment with 3 elements`);
    [container, idKey] = [value, 0];
  } else if (value !== null && typeof value === "object") {
    [container, idKey] = [value, "id"];
  } else {
    throw new Error(`invalid type: ${JSON.stringify(value)}, expected struct Shipment`);
  }
  const id = integer(container, idKey); // throws: missing, not an integer
  if (id < 0) throw new Error(`invalid value: ${id}, expected u64`);
  const [address, carrier] = Array.isArray(value) ? value.slice(1) : [value.address, value.carrier];
  if (address === undefined) throw new Error("missing field `address`");
  if (typeof address !== "string") throw new Error(`invalid type: ${JSON.stringify(address)}, expected a string`);
  if (carrier === undefined) throw new Error("missing field `carrier`");
  if (typeof carrier !== "string") throw new Error(`invalid type: ${JSON.stringify(carrier)}, expected a string`);
  return { id, address, carrier };
}
