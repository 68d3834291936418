"""The Python shipping handler gives the Rust example's outcome, record for record.
Run: python3 -m unittest (in this directory)."""

import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "guest-sdk", "python"))

import shardhost  # noqa: E402
from shardhost import Record, testing  # noqa: E402

import app  # noqa: E402

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


if __name__ == "__main__":
    unittest.main()
