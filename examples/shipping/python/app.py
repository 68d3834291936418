"""Books shipments with a carrier (seed 004): the Python twin of examples/shipping/src/lib.rs,
with the same outcome for every record.

- a shipment without an address can never ship: retired (drop);
- a shipment for a carrier this release does not know waits for a release that knows it:
  held (retry), so the shard's checkpoint stops in front of it;
- every other shipment is booked (ack);
- a record that is not a shipment at all is retired too.

With `carrier_url` in the subscription's `[subscription.config]` (and its origin in
`[subscription.http] allow`), booking is real: the shipment is POSTed there with the header
`Idempotency-Key: <id>`, so a replayed record books the same shipment once. The carrier's 2xx
acks it, a 4xx retires it (it can never be booked), a denied origin holds it (the config is
wrong, not the record), and a 5xx, a timeout or a connection error tries again later
(`retry_after`, doubling with the attempt).

A booking goes through `state.once("booked:<id>", ...)`: a shipment booked before (a replay, the
same shipment in another record) is not sent again (`shipment already booked, skipped`, ack).
The key is marked only when the carrier booked it (2xx); when the store fails, the record tries
again later like any other temporary failure. Without `carrier_url` nothing touches the state.

Build: ./build (next to this file) writes ship.wasm (for the world handler+http+state: the app
imports shardhost.http and shardhost.state; the subscription grants both).
"""

import shardhost
from shardhost import config, http, state

# The carriers this release of the service books with.
CARRIERS = ("dhl", "ups")

FIELDS = ("id", "address", "carrier")


def shipment(value):
    """The (id, address, carrier) of a decoded record, checked as the Rust struct
    `Shipment { id: u64, address: String, carrier: String }` is by serde: an object with
    those keys (others are ignored) or an array of exactly three values; `id` a
    non-negative integer below 2**64 (`Record.json()` gives ints only for integer literals,
    so `1.0`, `1e3` and `-0` are floats here as they are for serde), the others strings.
    Raises ValueError saying what is wrong."""
    if isinstance(value, dict):
        missing = [f for f in FIELDS if f not in value]
        if missing:
            raise ValueError("missing field `%s`" % missing[0])
        fields = [value[f] for f in FIELDS]
    elif isinstance(value, list):
        if len(value) != 3:
            raise ValueError("expected 3 elements, found %d" % len(value))
        fields = value
    else:
        raise ValueError("expected an object, found %s" % type(value).__name__)
    id_, address, carrier = fields
    if type(id_) is not int or not 0 <= id_ < 2**64:
        raise ValueError("`id` is not an unsigned 64-bit integer: %r" % (id_,))
    if type(address) is not str:
        raise ValueError("`address` is not a string: %r" % (address,))
    if type(carrier) is not str:
        raise ValueError("`carrier` is not a string: %r" % (carrier,))
    return id_, address, carrier


@shardhost.handler
def ship(record):
    try:
        id_, address, carrier = shipment(record.json())
    except ValueError as e:  # shardhost.DecodeError is a ValueError too
        shardhost.log.warn(
            "not a shipment, retired: sequence_number=%s error=%s", record.sequence_number, e
        )
        return shardhost.drop
    if not address:
        shardhost.log.warn("shipment without an address retired: id=%d", id_)
        return shardhost.drop
    if carrier not in CARRIERS:
        shardhost.log.warn("unknown carrier, shipment held: id=%d carrier=%s", id_, carrier)
        return shardhost.retry
    url = config.get("carrier_url")
    if not url:  # none, or empty: nothing to book with
        shardhost.log.info("shipment booked: id=%d carrier=%s", id_, carrier)
        return shardhost.ack
    return book_once(url, id_, carrier, record)


class NotBooked(Exception):
    """How the booking leaves `state.once` when the carrier did not book: with the record's
    outcome, and the shipment's key unmarked."""

    def __init__(self, outcome):
        super().__init__(outcome)
        self.outcome = outcome


def book_once(url, id_, carrier, record):
    """Books the shipment unless a booking of it is marked done in the state."""

    def effect():
        outcome = book(url, id_, carrier, record)
        if outcome != shardhost.ack:
            raise NotBooked(outcome)

    try:
        booked_now = state.once("booked:%d" % id_, effect)
    except NotBooked as e:
        return e.outcome
    except state.StateError as e:
        return later(record, "the state of shipment %d is out of reach (%s)" % (id_, e))
    if not booked_now:
        shardhost.log.info("shipment already booked, skipped: id=%d", id_)
    return shardhost.ack


def book(url, id_, carrier, record):
    """POSTs the shipment to the carrier, keyed by its id."""
    request = http.post(
        url,
        headers={"Content-Type": "application/json", "Idempotency-Key": str(id_)},
        body=record.data,
    )
    try:
        response = request.send()
    except http.Denied as e:
        shardhost.log.error("shipment %d held: %s", id_, e)
        return shardhost.retry
    except http.HttpError as e:
        return later(record, "the carrier did not book shipment %d (%s)" % (id_, e))
    if response.ok:
        shardhost.log.info("shipment booked: id=%d carrier=%s status=%d", id_, carrier, response.status)
        return shardhost.ack
    if 400 <= response.status < 500:
        shardhost.log.warn("the carrier refused shipment %d, retired: status=%d", id_, response.status)
        return shardhost.drop
    return later(record, "the carrier did not book shipment %d (status %d)" % (id_, response.status))


def later(record, why):
    """Tries again after 1 s, doubling with each attempt, up to a minute."""
    delay = min(1000 << (min(max(record.attempt, 1), 7) - 1), 60000)
    shardhost.log.warn("%s: again in %d ms", why, delay)
    return shardhost.retry_after(delay)
