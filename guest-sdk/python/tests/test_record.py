import unittest

from shardhost import BatchInfo, DecodeError, Record


class Records(unittest.TestCase):
    def test_accessors(self):
        r = Record("cust-1", "4960", b"hi", sub_sequence_number=3,
                   arrival_millis=1_700_000_000_000, attempt=2)
        self.assertEqual(r.partition_key, "cust-1")
        self.assertEqual(r.sequence_number, "4960")
        self.assertEqual(r.sub_sequence_number, 3)
        self.assertEqual(r.arrival_millis, 1_700_000_000_000)
        self.assertEqual(r.attempt, 2)
        self.assertEqual(r.data, b"hi")
        self.assertIsInstance(r.data, bytes)
        self.assertEqual(bytes(r), b"hi")
        self.assertEqual(r.text(), "hi")
        with self.assertRaises(AttributeError):
            r.data = b"x"

    def test_defaults_and_str_data(self):
        r = Record("pk", 17, "é")
        self.assertEqual(r.sequence_number, "17")
        self.assertEqual(r.data, "é".encode())
        self.assertEqual((r.sub_sequence_number, r.arrival_millis, r.attempt), (0, 0, 1))
        self.assertEqual(Record("pk", "1").data, b"")

    def test_text(self):
        self.assertEqual(Record("pk", "1", b"\xef\xbb\xbfx").text(), "\ufeffx")  # kept, as in Rust
        with self.assertRaises(DecodeError) as cm:
            Record("pk", "1", b"{\"\xff\xfe\"}").text()
        self.assertEqual((cm.exception.kind, cm.exception.offset), ("utf8", 2))
        with self.assertRaises(DecodeError):
            Record("pk", "1", b"\xed\xa0\x80").text()  # an encoded surrogate is not UTF-8

    def test_wraps_generated_records_without_copying(self):
        class Raw:
            partition_key = "k"
            sequence_number = "9"
            sub_sequence_number = 0
            approximate_arrival_timestamp = 5
            data = b"payload"

        raw = Raw()
        r = Record._wrap(raw, 3)
        self.assertIs(r.data, raw.data)
        self.assertEqual((r.arrival_millis, r.attempt), (5, 3))

    def test_equality_and_repr(self):
        self.assertEqual(Record("a", "1", b"x"), Record("a", "1", "x"))
        self.assertNotEqual(Record("a", "1", b"x"), Record("a", "1", b"x", attempt=2))
        self.assertEqual(repr(Record("a", "1", b"x")),
                         "Record(partition_key='a', sequence_number='1', arrival_millis=0, data='x')")
        self.assertIn("data=b'\\xff'", repr(Record("a", "1", b"\xff", sub_sequence_number=2)))
        self.assertIn("sub_sequence_number=2", repr(Record("a", "1", b"", sub_sequence_number=2)))


class BatchInfos(unittest.TestCase):
    def test_accessors(self):
        info = BatchInfo("orders", "shardId-000000000001", millis_behind_latest=0, attempt=2)
        self.assertEqual(info.stream, "orders")
        self.assertEqual(info.shard_id, "shardId-000000000001")
        self.assertEqual(info.millis_behind_latest, 0)
        self.assertEqual(info.attempt, 2)
        self.assertIsNone(BatchInfo("s", "x").millis_behind_latest)
        self.assertEqual(BatchInfo("s", "x").attempt, 1)
        self.assertEqual(BatchInfo("s", "x"), BatchInfo("s", "x"))
        self.assertIn("shard_id='x'", repr(BatchInfo("s", "x")))
        with self.assertRaises(AttributeError):
            info.stream = "other"


if __name__ == "__main__":
    unittest.main()
