"""shardhost.state: the API over the in-memory store of shardhost.testing (the host's rules),
and WitBackend's state over stand-ins of componentize-py's wasi:keyvalue bindings."""

import sys
import unittest
from unittest import mock

from tests import fake_wasi_http, fake_wasi_keyvalue, support

import shardhost
from shardhost import _host, config, http, log, state, testing
from shardhost.state import StateError


class WithStore(unittest.TestCase):
    """Each test in a FakeHost whose store grants `default` and `orders`."""

    def setUp(self):
        self.store = testing.MemoryStore(buckets=["orders"])
        self.host = testing.FakeHost(state=self.store)
        self.host.__enter__()
        self.addCleanup(self.host.__exit__, None, None, None)

    def error(self, kind, f, *args):
        with self.assertRaises(StateError) as raised:
            f(*args)
        self.assertEqual(raised.exception.kind, kind)
        return raised.exception


class Values(WithStore):
    def test_get_set_delete_exists(self):
        self.assertIsNone(state.get("a"))
        self.assertFalse(state.exists("a"))
        state.set("a", b"\x00\xff")
        self.assertEqual(state.get("a"), b"\x00\xff")
        self.assertTrue(state.exists("a"))
        state.set("a", "é")  # a str is stored as UTF-8
        self.assertEqual(state.get("a"), "é".encode())
        state.set("b", bytearray(b"xy"))
        state.set("c", memoryview(b"z"))
        self.assertEqual((state.get("b"), state.get("c")), (b"xy", b"z"))
        state.delete("a")
        state.delete("a")  # nothing there: nothing happens
        self.assertIsNone(state.get("a"))
        self.assertFalse(state.exists("a"))
        state.set("", b"")  # an empty key and an empty value are values
        self.assertEqual(state.get(""), b"")
        self.assertTrue(state.exists(""))

    def test_wrong_types_are_refused_before_the_host_is_asked(self):
        calls = len(self.store.calls)
        with self.assertRaisesRegex(TypeError, "a state key is a str, not bytes"):
            state.get(b"a")
        with self.assertRaisesRegex(TypeError, "bytes or str, not dict .*json.dumps"):
            state.set("a", {"x": 1})
        with self.assertRaisesRegex(TypeError, "not int"):
            state.set("a", 1)
        with self.assertRaisesRegex(TypeError, "keys is a list"):
            state.get_many("ab")
        with self.assertRaisesRegex(TypeError, "pairs or a mapping"):
            state.set_many(["ab", "cde"])
        with self.assertRaisesRegex(TypeError, "effect is a function"):
            state.once("k", None)
        with self.assertRaisesRegex(TypeError, "bucket name is a str"):
            state.bucket(1)
        self.assertEqual(len(self.store.calls), calls)

    def test_the_limits_of_keys_and_values(self):
        state.set("k" * 1024, b"x" * 358400)  # at the limits: fine
        self.assertEqual(len(state.get("k" * 1024)), 358400)
        e = self.error("other", state.set, "k" * 1025, b"x")
        self.assertIn("1025 bytes", e.message)
        self.assertEqual(e.bucket, "default")
        self.error("other", state.get, "é" * 513)  # 1026 bytes of UTF-8
        self.error("other", state.exists, "k" * 1025)
        e = self.error("other", state.set, "k", b"x" * 358401)
        self.assertIn("358401 bytes", e.message)
        self.assertEqual(str(e), "other: " + e.message)
        self.assertIsNone(state.get("k"))
        self.error("other", state.set_if_absent, "k", b"x" * 358401)
        self.error("other", state.set_many, [("a", b"1"), ("k", b"x" * 358401)])
        self.assertIsNone(state.get("a"), "a batch refused as a whole here")
        self.error("other", state.get_many, ["a", "k" * 1025])

    def test_an_unreachable_store(self):
        state.set("a", b"1")
        self.store.error = "the store is unreachable"
        for f, args in [(state.get, ("a",)), (state.set, ("a", b"2")), (state.delete, ("a",)),
                        (state.exists, ("a",)), (state.increment, ("n",)),
                        (state.set_if_absent, ("a", b"2")), (state.compare_and_set, ("a", b"1", b"2")),
                        (state.get_many, (["a"],)), (state.set_many, ([("a", b"2")],)),
                        (state.delete_many, (["a"],)), (state.once, ("o", lambda: None)),
                        (state.bucket("orders").get, ("a",))]:
            with self.subTest(f=f.__name__):
                e = self.error("other", f, *args)
                self.assertEqual(e.message, "the store is unreachable")
        self.store.error = None
        self.assertEqual(state.get("a"), b"1")
        self.assertIsNone(state.get("o"), "the effect's key is not marked")


class Counters(WithStore):
    def test_increment_makes_and_adds(self):
        self.assertEqual(state.increment("n"), 1)
        self.assertEqual(state.increment("n", 41), 42)
        self.assertEqual(state.increment("n", 0), 42)
        self.assertEqual(state.get("n"), b"42", "a counter reads as its decimal text")
        self.assertEqual(state.get_many(["n"]), [b"42"])
        self.assertTrue(state.exists("n"))
        self.assertEqual(state.increment("big", 2**64 - 1), 2**64 - 1)
        self.error("other", state.increment, "big")

    def test_a_value_set_wrote_is_not_a_counter(self):
        state.set("s", b"5")
        e = self.error("other", state.increment, "s")
        self.assertIn("not a counter", e.message)
        state.increment("n")
        state.set("n", b"x")  # set over a counter: a plain value now
        self.assertEqual(state.get("n"), b"x")
        state.delete("n")
        self.assertEqual(state.increment("n", 3), 3)

    def test_the_delta(self):
        with self.assertRaisesRegex(ValueError, "counts up"):
            state.increment("n", -1)
        with self.assertRaisesRegex(ValueError, "2\\*\\*64"):
            state.increment("n", 2**64)
        with self.assertRaisesRegex(TypeError, "int, not float"):
            state.increment("n", 1.0)
        with self.assertRaisesRegex(TypeError, "int, not bool"):
            state.increment("n", True)
        self.assertIsNone(state.get("n"))


class Conditional(WithStore):
    def test_set_if_absent(self):
        self.assertTrue(state.set_if_absent("k", b"first"))
        self.assertFalse(state.set_if_absent("k", "second"))
        self.assertEqual(state.get("k"), b"first")
        state.increment("n")
        self.assertFalse(state.set_if_absent("n", b"x"))

    def test_compare_and_set(self):
        self.assertFalse(state.compare_and_set("k", b"", b"x"), "nothing there: no write")
        self.assertIsNone(state.get("k"))
        state.set("k", b"a")
        self.assertFalse(state.compare_and_set("k", b"b", b"c"))
        self.assertEqual(state.get("k"), b"a")
        self.assertTrue(state.compare_and_set("k", "a", "c"))
        self.assertEqual(state.get("k"), b"c")
        state.increment("n", 7)
        self.assertTrue(state.compare_and_set("n", b"7", b"seven"), "a counter compares as its text")
        self.assertEqual(state.get("n"), b"seven")


class Batches(WithStore):
    def test_get_many_in_the_order_of_the_keys(self):
        state.set("a", b"1")
        state.increment("c", 3)
        self.assertEqual(state.get_many(["c", "b", "a", "a"]), [b"3", None, b"1", b"1"])
        self.assertEqual(state.get_many([]), [])
        self.assertEqual(state.get_many(iter(["a"])), [b"1"])

    def test_set_many_pairs_or_a_mapping_and_delete_many(self):
        state.set_many([("a", b"1"), ("b", "2")])
        state.set_many({"c": b"3", "d": "4"})
        state.set_many((k, v) for k, v in [("e", b"5")])
        self.assertEqual(self.store.items(), {"a": b"1", "b": b"2", "c": b"3", "d": b"4", "e": b"5"})
        state.delete_many(["a", "c", "zz"])
        self.assertEqual(state.get_many(["a", "b", "c"]), [None, b"2", None])
        self.assertEqual(self.store.calls[-2:], [("delete_many", "default", ["a", "c", "zz"]),
                                                 ("get_many", "default", ["a", "b", "c"])])


class Buckets(WithStore):
    def test_a_bucket_is_its_own_space(self):
        orders = state.bucket("orders")
        self.assertIs(state.bucket("orders"), orders)
        self.assertEqual(orders.name, "orders")
        orders.set("k", b"in orders")
        state.set("k", b"in default")
        self.assertEqual(orders.get("k"), b"in orders")
        self.assertEqual(state.bucket("default").get("k"), b"in default")
        self.assertEqual(orders.increment("n", 2), 2)
        self.assertTrue(orders.set_if_absent("x", b"1"))
        self.assertTrue(orders.compare_and_set("x", b"1", b"2"))
        orders.set_many({"y": b"3"})
        self.assertEqual(orders.get_many(["x", "y", "k"]), [b"2", b"3", b"in orders"])
        orders.delete_many(["x", "y"])
        orders.delete("k")
        self.assertFalse(orders.exists("k"))
        self.assertEqual(self.store.items("orders"), {"n": b"2"})
        self.assertTrue(orders.once("o", lambda: None))
        self.assertEqual(self.store.value("o", "orders"), b"done")
        self.assertIsNone(self.store.value("o"))

    def test_opened_once_on_first_use_and_kept(self):
        b = state.bucket("orders")
        self.assertNotIn(("open", "orders"), self.store.calls, "not before its first operation")
        b.get("a")
        b.get("b")
        state.bucket("orders").set("c", b"")
        self.assertEqual([c for c in self.store.calls if c[0] == "open" and c[1] == "orders"], [("open", "orders")])

    def test_a_bucket_the_grant_does_not_list(self):
        e = self.error("access-denied", state.bucket("audit").get, "k")
        self.assertEqual(e.bucket, "audit")
        self.assertIn("'audit'", str(e))
        self.assertIn("[subscription.state]", str(e))
        self.error("access-denied", state.bucket("audit").set, "k", b"v")
        self.assertEqual(self.store.calls.count(("open", "audit")), 2, "a refusal is not kept")

    def test_another_host_opens_again(self):
        orders = state.bucket("orders")
        orders.set("k", b"1")
        other = testing.MemoryStore()  # grants only `default`
        with testing.FakeHost(state=other):
            self.error("access-denied", orders.get, "k")
            state.set("k", b"2")
        self.assertEqual(orders.get("k"), b"1")
        self.assertEqual(state.get("k"), None)
        self.assertEqual(other.value("k"), b"2")


class Once(WithStore):
    def test_runs_once_and_marks_the_key_done(self):
        ran = []
        self.assertTrue(state.once("booked:1", lambda: ran.append(1)))
        self.assertEqual(state.get("booked:1"), b"done")
        self.assertFalse(state.once("booked:1", lambda: ran.append(2)))
        self.assertEqual(ran, [1])
        self.assertEqual(self.host.lines, [])

    def test_an_effect_that_raises_leaves_the_key_unmarked(self):
        def fail():
            raise RuntimeError("carrier down")

        with self.assertRaisesRegex(RuntimeError, "carrier down"):
            state.once("booked:2", fail)
        self.assertFalse(state.exists("booked:2"))
        ran = []
        self.assertTrue(state.once("booked:2", lambda: ran.append(1)))
        self.assertEqual(ran, [1])

    def test_a_key_marked_by_someone_else_while_the_effect_ran(self):
        def effect():
            self.store.put("booked:3", b"done")  # another instance, meanwhile

        self.assertTrue(state.once("booked:3", effect))
        [(level, line)] = self.host.lines
        self.assertEqual(level, "warn")
        self.assertIn("'booked:3'", line)
        self.assertIn("may have run twice", line)

    def test_an_async_effect_is_refused_before_anything_is_marked(self):
        async def book():
            raise AssertionError("never awaited, never run")

        with self.assertRaisesRegex(TypeError, "awaitable"):
            state.once("booked:4", book)
        self.assertFalse(state.exists("booked:4"))

    def test_any_value_counts_as_marked(self):
        state.set("k", b"something else")
        self.assertFalse(state.once("k", self.fail))
        state.increment("n")
        self.assertFalse(state.once("n", self.fail))

    def fail(self):
        raise AssertionError("the effect ran")

    def test_a_second_instance_sees_the_mark(self):
        self.assertTrue(state.once("k", lambda: None))
        with testing.FakeHost(state=self.store):
            self.assertFalse(state.once("k", self.fail))


class Outside(unittest.TestCase):
    def test_outside_shardhost_every_operation_fails(self):
        self.assertIsInstance(_host.backend(), _host.NativeBackend)
        with self.assertRaises(StateError) as raised:
            state.get("k")
        self.assertEqual(raised.exception.kind, "other")
        self.assertIn("not running inside shardhost", str(raised.exception))

    def test_the_module_is_shardhosts_attribute_and_in_all(self):
        self.assertIs(shardhost.state, state)
        self.assertIn("state", shardhost.__all__)

    def test_a_fake_host_has_a_store_of_its_own(self):
        with testing.FakeHost() as host:
            state.set("k", b"v")
            with self.assertRaises(StateError):
                state.bucket("orders").get("k")
        self.assertEqual(host.state.items(), {"k": b"v"})
        self.assertEqual(host.state.buckets, ["default"])

    def test_state_errors(self):
        e = StateError("access-denied", bucket="x")
        self.assertEqual((e.kind, e.bucket), ("access-denied", "x"))
        self.assertEqual(repr(StateError("other", "slow")), "StateError('other', 'slow')")
        self.assertIn("no store", str(StateError("no-such-store")))
        with self.assertRaises(ValueError):
            StateError("broken")


class Backend(unittest.TestCase):
    """WitBackend over stand-ins of the generated bindings."""

    def start(self, store=None, http_world=False, state_world=True):
        self.service = fake_wasi_keyvalue.Service(store or testing.MemoryStore(buckets=["orders"])) if state_world else None
        server = fake_wasi_http.Server(lambda r: ("response", 200, [], [b""], None)) if http_world else None
        self.modules = support.fake_bindings(config={"greeting": "hello"}, http=server, state=self.service)
        patch = mock.patch.dict(sys.modules, self.modules)
        patch.start()
        self.addCleanup(patch.stop)
        self.backend = _host.WitBackend()
        previous = _host.set_backend(self.backend)
        self.addCleanup(lambda: (_host.set_backend(previous), log._refresh()))
        return self.backend

    def test_operations_only_once_the_host_calls(self):
        self.start()
        orders = state.bucket("orders")  # fine at module top level: nothing is opened
        with self.assertRaisesRegex(RuntimeError, "not at module top level"):
            state.get("k")
        with self.assertRaisesRegex(RuntimeError, "not at module top level"):
            orders.set("k", b"v")
        self.assertEqual(self.service.opened, [])
        self.backend.arm()
        orders.set("k", b"v")
        self.assertEqual(orders.get("k"), b"v")

    def test_every_operation_through_the_bindings(self):
        store = testing.MemoryStore(buckets=["orders"])
        self.start(store)
        self.backend.arm()
        state.set("a", "1")
        self.assertEqual(state.get("a"), b"1")
        self.assertIsNone(state.get("nothing"))
        self.assertTrue(state.exists("a"))
        self.assertEqual(state.increment("n", 5), 5)
        self.assertEqual(state.increment("n"), 6)
        self.assertTrue(state.set_if_absent("b", b"2"))
        self.assertFalse(state.set_if_absent("b", b"3"))
        self.assertTrue(state.compare_and_set("b", b"2", b"4"))
        self.assertFalse(state.compare_and_set("b", b"2", b"5"))
        state.set_many({"c": b"x", "d": "y"})
        self.assertEqual(state.get_many(["d", "zz", "n", "b"]), [b"y", None, b"6", b"4"])
        state.delete_many(["c", "d"])
        state.delete("a")
        self.assertFalse(state.exists("a"))
        self.assertTrue(state.once("o", lambda: None))
        self.assertFalse(state.once("o", lambda: None))
        self.assertEqual(store.items(), {"n": b"6", "b": b"4", "o": b"done"})
        state.bucket("orders").set("k", b"v")
        self.assertEqual(store.items("orders"), {"k": b"v"})
        self.assertEqual(self.service.opened, ["default", "orders"], "each bucket opened once")
        self.assertEqual(len(self.service.live), 2, "and kept for the instance's life")

    def test_errors_by_their_case(self):
        store = testing.MemoryStore()
        self.start(store)
        self.backend.arm()
        with self.assertRaises(StateError) as raised:
            state.bucket("audit").get("k")
        self.assertEqual((raised.exception.kind, raised.exception.bucket), ("access-denied", "audit"))
        with self.assertRaises(StateError) as raised:
            state.set("k" * 1025, b"")
        self.assertEqual(raised.exception.kind, "other")
        self.assertIn("1025 bytes", raised.exception.message)
        state.set("s", b"x")
        with self.assertRaisesRegex(StateError, "^other: .*not a counter"):
            state.increment("s")
        store.error = "throttled"
        with self.assertRaisesRegex(StateError, "^other: throttled$"):
            state.get_many(["s"])
        with self.assertRaisesRegex(StateError, "^other: throttled$"):
            state.compare_and_set("s", b"x", b"y")
        store.error = None

        def no_such_store(name):
            raise StateError("no-such-store", None, name)

        store.open = no_such_store
        with self.assertRaises(StateError) as raised:
            state.bucket("fresh").get("k")
        self.assertEqual(raised.exception.kind, "no-such-store")

    def test_the_store_interfaces_are_named_by_their_packages(self):
        self.start()
        self.backend.arm()
        self.assertIs(self.backend.types, self.modules["wit_world.imports.types"])
        self.assertEqual(config.get("greeting"), "hello", "wasi:config/store as wasi_config_store")
        self.assertNotIn("wit_world.imports.store", self.modules)

    def test_http_and_state(self):
        self.start(http_world=True)
        self.backend.arm()
        self.assertIs(self.backend.types, self.modules["wit_world.imports.shardhost_handler_types"])
        self.assertEqual(config.get("greeting"), "hello")
        self.assertEqual(http.get("http://h/").send().status, 200)
        state.set("k", b"v")
        self.assertEqual(state.get("k"), b"v")

    def test_a_component_built_without_state_says_so(self):
        for http_world in (False, True):
            self.start(http_world=http_world, state_world=False)
            self.backend.arm()
            with self.assertRaisesRegex(StateError, r"^other: .*built without state .*--state"):
                state.get("k")


if __name__ == "__main__":
    unittest.main()
