"""The Python shipping handler gives the Rust example's outcome, record for record.
Run, with the SDK installed (guest-sdk/python/README.md, "Tests"): python -m unittest (in this
directory). Not part of the component: the build copies only what app.py imports."""

import json
import os
import unittest

import shardhost
from shardhost import BatchInfo, Record, http, testing

import app

ACK, DROP, RETRY = shardhost.ack, shardhost.drop, shardhost.retry


def ship(data):
    return app.ship(Record("order-1", "1", data))


def shipment(id="1", address='"Main St 1"', carrier='"dhl"', extra=""):
    return '{"id":%s,"address":%s,"carrier":%s%s}' % (id, address, carrier, extra)


# (data, outcome): the Rust example (examples/shipping, serde_json) answers the same for each.
SAME_AS_RUST = [
    (shipment(), ACK), (shipment(carrier='"ups"'), ACK), (shipment(address='""'), DROP),
    (shipment(carrier='"fedex"'), RETRY), (shipment(carrier='"DHL"'), RETRY), ("not json", DROP),
    (b"", DROP), (b"\xff\xfe", DROP), ("\ufeff" + shipment(), DROP), (shipment() + " x", DROP),
    (shipment() + "\n", ACK), (shipment(id="NaN"), DROP), (shipment(extra=',"x":NaN'), DROP),
    (shipment(id="-0"), DROP), (shipment(id="0"), ACK), (shipment(id="-1"), DROP),
    (shipment(id="1.0"), DROP), (shipment(id="1e2"), DROP), (shipment(id="true"), DROP),
    (shipment(id='"1"'), DROP), (shipment(id="18446744073709551615"), ACK),
    (shipment(id="18446744073709551616"), DROP), (shipment(id="9" * 400), DROP),
    (shipment(address="null"), DROP), (shipment(address='["a"]'), DROP), (shipment(carrier="1"), DROP),
    (shipment(address='"\\ud800"'), DROP), (shipment(address='"\\ud83d\\ude00"'), ACK),
    (shipment(extra=',"id":2'), DROP), (shipment(extra=',"note":{"a":[1,2.5,null]}'), ACK),
    ('{"id":1,"address":"a"}', DROP), ('{"\\u0069d":1,"address":"a","carrier":"dhl"}', ACK),
    ('[1,"a","dhl"]', ACK), ('[1,"","dhl"]', DROP), ('[1,"a","fedex"]', RETRY), ('[1,"a"]', DROP),
    ('[1,"a","dhl",null]', DROP), ("null", DROP), ('"text"', DROP), ("{}", DROP),
]

# The JSON rule (guest-sdk/JSON.md) holds for the whole document, fields the handler does not
# read included, in every SDK: the Rust example drops these too.
SAME_AS_RUST += [
    (shipment(extra=',"x":"\\ud800"'), DROP), (shipment(extra=',"x":1e400'), DROP),
    (shipment(extra=',"x":1,"x":2'), DROP), (shipment(extra=',"x":{"a":1,"\\u0061":2}'), DROP),
    (shipment(extra=',"x":' + "[" * 128 + "]" * 128), DROP),
    (shipment(extra=',"x":' + "[" * 127 + "]" * 127), ACK),
    (shipment(extra=',"x":1.7976931348623158e308'), ACK), (shipment(extra=',"x":' + "1" * 79), ACK),
    (shipment(id="9007199254740993"), ACK), (shipment(extra=',"x":18446744073709551616'), ACK),
]


class Shipping(unittest.TestCase):
    def test_same_outcomes_as_rust(self):
        for data, expected in SAME_AS_RUST:
            with self.subTest(data=data[:60]):
                self.assertEqual(ship(data), expected)

    def test_shipments_file(self):
        import json

        here = os.path.dirname(os.path.abspath(__file__))
        with open(os.path.join(here, "..", "shipments.ndjson")) as f:
            records = [Record(d["partition_key"], str(i), json.dumps(d["data"])) for i, d in
                       enumerate(map(json.loads, f), 1)]
        with testing.FakeHost(max_level="info") as host:
            outcomes = testing.call(records)
        self.assertEqual(outcomes, [ACK, ACK, ACK, DROP, ACK, RETRY, ACK, ACK, ACK, ACK])
        self.assertEqual(host.lines[3], ("warn", "shipment without an address retired: id=1004"))
        self.assertEqual(host.lines[5], ("warn", "unknown carrier, shipment held: id=1006 carrier=fedex"))
        self.assertEqual(host.lines[0], ("info", "shipment booked: id=1001 carrier=dhl"))


CARRIER = "https://carrier.example/shipments"


def carrier(request):
    """The carrier stub of tests/conformance (README "Booking")."""
    if not dict((n.lower(), v) for n, v in request.headers).get("idempotency-key"):
        return 400
    address = json.loads(request.body).get("address", "")
    return 422 if "nowhere" in address else 503 if "busy" in address else 201


def book(data, answer=carrier, attempt=1, store=None):
    """The outcome of one record with carrier_url set, the requests sent and the log lines
    (`store`: the state, shared by several calls; by default a new one)."""
    with testing.FakeHost(config={"carrier_url": CARRIER}, http={CARRIER: answer}, state=store) as host:
        info = BatchInfo("shipments", "shardId-000000000000", attempt=attempt)
        [outcome] = testing.call([Record("order-1", "1", data)], info)
    return outcome, host.requests, host.lines


class Booking(unittest.TestCase):
    def test_the_conformance_cases(self):
        here = os.path.dirname(os.path.abspath(__file__))
        with open(os.path.join(here, "..", "..", "..", "tests", "conformance", "shipping-booked.ndjson")) as f:
            cases = [json.loads(line) for line in f if line.strip()]
        # In file order on one store, as the host's conformance run does: a shipment booked by
        # an earlier case is skipped by a later one.
        store = testing.MemoryStore()
        for case in cases:
            with self.subTest(why=case["why"]):
                outcome, _, _ = book(json.dumps(case["data"]), store=store)
                expect = case["expect"]
                if expect.startswith("retry-after:"):
                    self.assertEqual(outcome, shardhost.retry_after(int(expect.split(":")[1])))
                else:
                    self.assertEqual(outcome, getattr(shardhost, expect))

    def test_what_the_carrier_gets(self):
        data = shipment(id="42")
        outcome, requests, lines = book(data)
        self.assertEqual(outcome, ACK)
        [r] = requests
        self.assertEqual((r.method, r.url, r.body), ("POST", CARRIER, data.encode()))
        self.assertEqual(r.headers, [("Content-Type", b"application/json"), ("Idempotency-Key", b"42")])
        self.assertEqual(lines, [("info", "shipment booked: id=42 carrier=dhl status=201")])

    def test_nothing_is_sent_for_a_record_that_cannot_ship(self):
        for data in (shipment(address='""'), shipment(carrier='"fedex"'), "not json"):
            _, requests, _ = book(data)
            self.assertEqual(requests, [])

    def test_backoff_doubles_with_the_attempt_up_to_a_minute(self):
        for attempt, delay in [(1, 1000), (2, 2000), (3, 4000), (6, 32000), (7, 60000), (30, 60000)]:
            outcome, _, lines = book(shipment(), answer=503, attempt=attempt)
            self.assertEqual(outcome, shardhost.retry_after(delay))
        self.assertEqual(lines, [("warn", "the carrier did not book shipment 1 (status 503): again in 60000 ms")])

    def test_failed_requests(self):
        for error in (http.Timeout(), http.ConnectError(reason="ConnectionRefused"), http.BodyTooLarge()):
            outcome, _, _ = book(shipment(), answer=error)
            self.assertEqual(outcome, shardhost.retry_after(1000), error)
        self.assertEqual(book(shipment(), answer=302)[0], shardhost.retry_after(1000))
        self.assertEqual(book(shipment(), answer=409)[0], DROP)

    def test_a_denied_origin_holds_the_record(self):
        outcome, _, lines = book(shipment(), answer=http.Denied("https://carrier.example"))
        self.assertEqual(outcome, RETRY)
        self.assertEqual(lines[0][0], "error")
        self.assertIn("[subscription.http] allow", lines[0][1])

    def test_an_empty_carrier_url_books_nothing_and_touches_no_state(self):
        with testing.FakeHost(config={"carrier_url": ""}, http=lambda r: 500) as host:
            self.assertEqual(testing.call([Record("order-1", "1", shipment())]), [ACK])
        self.assertEqual(host.requests, [])
        self.assertEqual(host.state.calls, [])


class Once(unittest.TestCase):
    """A booking goes through state.once("booked:<id>", ...)."""

    def test_a_second_booking_of_the_same_shipment_is_skipped(self):
        store = testing.MemoryStore()
        outcome, requests, lines = book(shipment(id="42"), store=store)
        self.assertEqual((outcome, len(requests)), (ACK, 1))
        self.assertEqual(store.value("booked:42"), b"done")
        # the same shipment again: a replay, or another record of it (another instance: the
        # same store)
        outcome, requests, lines = book(shipment(id="42", address='"Elm St 2"'), store=store)
        self.assertEqual((outcome, requests), (ACK, []))
        self.assertEqual(lines, [("info", "shipment already booked, skipped: id=42")])
        # another shipment is booked
        outcome, requests, _ = book(shipment(id="43"), store=store)
        self.assertEqual((outcome, len(requests)), (ACK, 1))
        self.assertEqual(store.items(), {"booked:42": b"done", "booked:43": b"done"})

    def test_only_a_booking_marks_the_shipment(self):
        store = testing.MemoryStore()
        for answer, expected in [(503, shardhost.retry_after(1000)), (http.Timeout(), shardhost.retry_after(1000)),
                                 (http.Denied("https://carrier.example"), RETRY), (422, DROP)]:
            outcome, requests, _ = book(shipment(), answer=answer, store=store)
            self.assertEqual((outcome, len(requests)), (expected, 1), answer)
            self.assertEqual(store.items(), {}, answer)
        outcome, requests, _ = book(shipment(), store=store)  # booked at last
        self.assertEqual((outcome, len(requests)), (ACK, 1))
        self.assertEqual(store.items(), {"booked:1": b"done"})

    def test_a_store_out_of_reach_tries_again_later(self):
        store = testing.MemoryStore(error="throttled")
        for attempt, delay in [(1, 1000), (3, 4000), (9, 60000)]:
            outcome, requests, lines = book(shipment(id="7"), store=store, attempt=attempt)
            self.assertEqual(outcome, shardhost.retry_after(delay))
            self.assertEqual(requests, [], "nothing is sent before the state is read")
        self.assertEqual(lines, [("warn", "the state of shipment 7 is out of reach (other: throttled): again in 60000 ms")])

    def test_booked_but_the_mark_fails(self):
        # The carrier booked, then the store failed: the record tries again, and the carrier
        # sees the same Idempotency-Key again.
        store = testing.MemoryStore()

        def booked_then_the_store_fails(request):
            store.error = "throttled"
            return carrier(request)

        outcome, requests, _ = book(shipment(id="8"), answer=booked_then_the_store_fails, store=store)
        self.assertEqual((outcome, len(requests)), (shardhost.retry_after(1000), 1))
        store.error = None
        outcome, requests, _ = book(shipment(id="8"), store=store)
        self.assertEqual((outcome, dict(requests[0].headers)["Idempotency-Key"]), (ACK, b"8"))


if __name__ == "__main__":
    unittest.main()
