"""{{name}}'s tests: python -m unittest (with the SDK installed: see README.md). Not part of the
component: the build copies only what {{name}}.py imports."""

import unittest

import shardhost

import {{name}}


def order(data):
    return {{name}}.handle(shardhost.Record("order-1", "1", data))


class Orders(unittest.TestCase):
    def test_an_order_with_a_quantity_is_acked_and_one_without_is_dropped(self):
        self.assertEqual(order('{"id": 1, "sku": "mug", "quantity": 2}'), shardhost.ack)
        self.assertEqual(order('{"id": 2, "sku": "mug"}'), shardhost.drop)
        self.assertEqual(order("not an order"), shardhost.drop)


if __name__ == "__main__":
    unittest.main()
