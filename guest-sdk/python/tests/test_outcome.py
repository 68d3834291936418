import datetime
import pickle
import unittest

import shardhost
from shardhost import Outcome


class Outcomes(unittest.TestCase):
    def test_values(self):
        self.assertEqual(shardhost.ack.kind, "ack")
        self.assertEqual(shardhost.drop.kind, "drop")
        self.assertEqual(shardhost.retry.kind, "retry")
        later = shardhost.retry_after(1500)
        self.assertEqual((later.kind, later.delay_ms), ("retry-after", 1500))
        self.assertIsNone(shardhost.ack.delay_ms)
        self.assertTrue(shardhost.ack.settles and shardhost.drop.settles)
        self.assertFalse(shardhost.retry.settles or later.settles)

    def test_equality_hash_repr(self):
        self.assertEqual(shardhost.retry_after(5), shardhost.retry_after(5))
        self.assertNotEqual(shardhost.retry_after(5), shardhost.retry_after(6))
        self.assertNotEqual(shardhost.retry, shardhost.retry_after(0))
        self.assertEqual(Outcome("ack"), shardhost.ack)
        self.assertEqual(len({shardhost.ack, Outcome("ack"), shardhost.drop}), 2)
        self.assertEqual(repr(shardhost.ack), "shardhost.ack")
        self.assertEqual(repr(shardhost.retry_after(250)), "shardhost.retry_after(250)")
        self.assertEqual(pickle.loads(pickle.dumps(shardhost.retry_after(3))), shardhost.retry_after(3))

    def test_immutable(self):
        with self.assertRaises(AttributeError):
            shardhost.ack.kind = "drop"
        with self.assertRaises(AttributeError):
            shardhost.ack._kind = "drop"

    def test_retry_after_arguments(self):
        self.assertEqual(shardhost.retry_after(datetime.timedelta(seconds=1.5)).delay_ms, 1500)
        self.assertEqual(shardhost.retry_after(datetime.timedelta(microseconds=999)).delay_ms, 0)
        self.assertEqual(shardhost.retry_after(2**70).delay_ms, 2**64 - 1)
        self.assertEqual(shardhost.retry_after(datetime.timedelta.max).delay_ms,
                         datetime.timedelta.max // datetime.timedelta(milliseconds=1))
        for bad in (1.5, "10", True, None):
            with self.subTest(bad=bad), self.assertRaises(TypeError):
                shardhost.retry_after(bad)
        with self.assertRaises(ValueError):
            shardhost.retry_after(-1)
        with self.assertRaises(ValueError):
            shardhost.retry_after(datetime.timedelta(seconds=-1))
        with self.assertRaises(ValueError):
            Outcome("later")
        with self.assertRaises(ValueError):
            Outcome("ack", 5)


if __name__ == "__main__":
    unittest.main()
