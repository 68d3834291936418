"""The decorators and the adapter componentize-py calls (with stand-in generated types)."""

import importlib
import os
import sys
import tempfile
import textwrap
import types
import unittest

from tests import support

import shardhost
from shardhost import _export, testing


def raw_batch(texts, attempt=1):
    t = support.fake_types()
    info = t.BatchInfo("shipments", "shardId-000000000000", 0, attempt)
    records = [t.KinesisRecord("pk-%d" % i, str(100 + i), 0, 0, x.encode()) for i, x in enumerate(texts)]
    return info, records


def decide(record):
    return {
        "drop": shardhost.drop,
        "retry": shardhost.retry,
        "later": shardhost.retry_after(250),
    }.get(record.text(), shardhost.ack)


class Adapter(unittest.TestCase):
    def setUp(self):
        testing.reset()
        self.types = support.fake_types()
        self.host = testing.FakeHost()
        self.host.__enter__()

    def tearDown(self):
        self.host.__exit__(None, None, None)
        testing.reset()

    def call(self, texts, attempt=1):
        info, records = raw_batch(texts, attempt)
        return _export.call(info, records, self.types)

    def test_records_lifted_as_sdk_records_get_the_batch_attempt(self):
        from shardhost import _record

        seen = []

        @shardhost.handler
        def handle(record):
            seen.append((record.partition_key, record.sequence_number, record.arrival_millis,
                         record.data, record.attempt))
            return decide(record)

        t = self.types
        info = t.BatchInfo("shipments", "shardId-000000000000", 0, 3)
        lifted = [_record._lift("pk", str(i), 0, 7, b"drop" if i else b"x") for i in range(3)]
        self.assertIs(type(lifted[0]), shardhost.Record)
        out = _export.call(info, lifted, t)
        self.assertEqual(out, t.BatchOutcome_Each([t.Outcome_Ack(), t.Outcome_Drop(), t.Outcome_Drop()]))
        self.assertEqual(seen, [("pk", "0", 7, b"x", 3), ("pk", "1", 7, b"drop", 3), ("pk", "2", 7, b"drop", 3)])

    def test_per_record_outcomes_in_order(self):
        seen = []

        @shardhost.handler
        def handle(record):
            seen.append((record.sequence_number, record.attempt))
            return decide(record)

        out = self.call(["ack", "drop", "retry", "later", "ack", "drop"], attempt=2)
        t = self.types
        self.assertEqual(out, t.BatchOutcome_Each([t.Outcome_Ack(), t.Outcome_Drop(), t.Outcome_Retry(),
                                                   t.Outcome_RetryAfter(250), t.Outcome_Ack(), t.Outcome_Drop()]))
        self.assertEqual(seen, [(str(100 + i), 2) for i in range(6)])
        self.assertEqual(self.call([]), t.BatchOutcome_Each([]))

    def test_decorator_returns_the_function(self):
        def handle(record):
            return shardhost.ack

        self.assertIs(shardhost.handler(handle), handle)
        self.assertIs(handle(shardhost.Record("pk", "1", b"")), shardhost.ack)

    def test_per_batch_all_and_each(self):
        calls = []

        @shardhost.batch_handler
        def handle(info, records):
            calls.append((info, [r.partition_key for r in records]))
            if len(records) == 1:
                return shardhost.retry_after(9)
            return (decide(r) for r in records)  # any iterable

        t = self.types
        self.assertEqual(self.call(["x"]), t.BatchOutcome_All(t.Outcome_RetryAfter(9)))
        self.assertEqual(self.call(["drop", "ack"]), t.BatchOutcome_Each([t.Outcome_Drop(), t.Outcome_Ack()]))
        info = calls[0][0]
        self.assertEqual((info.stream, info.shard_id, info.millis_behind_latest, info.attempt),
                         ("shipments", "shardId-000000000000", 0, 1))
        self.assertEqual(calls[1][1], ["pk-0", "pk-1"])

    def test_wrong_answers_fail_the_call_with_a_clear_error(self):
        @shardhost.handler
        def forgot(record):
            pass

        with self.assertRaises(TypeError) as cm:
            self.call(["a", "b"])
        self.assertIn("returned None, not an outcome", str(cm.exception))
        level, line = self.host.lines[-1]
        self.assertEqual(level, "error")
        self.assertTrue(line.startswith("handler raised TypeError: handler "), line)
        self.assertIn("(record sequence_number=100 partition_key=pk-0)", line)
        self.assertNotIn(" at ", line.split(":")[0])

        testing.reset()

        @shardhost.batch_handler
        def short(info, records):
            return [shardhost.ack]

        with self.assertRaises(ValueError) as cm:
            self.call(["a", "b"])
        self.assertIn("returned 1 outcomes for 2 records", str(cm.exception))

        for answer, words in ((None, "returned None"), ("ack", "returned 'ack'"),
                              ([shardhost.ack, "drop"], "outcome 1 of the list is 'drop'"), (5, "returned 5")):
            testing.reset()
            shardhost.batch_handler(lambda info, records, a=answer: a)
            with self.subTest(answer=answer), self.assertRaises(TypeError) as cm:
                self.call(["a", "b"])
            self.assertIn(words, str(cm.exception))

    def test_an_exception_is_logged_then_raised(self):
        @shardhost.handler
        def poison(record):
            if record.text() == "bad":
                raise KeyError("carrier")
            return shardhost.ack

        with self.assertRaises(KeyError):
            self.call(["ok", "bad", "ok"])
        level, line = self.host.lines[-1]
        self.assertEqual(level, "error")
        self.assertRegex(line, r"^handler raised KeyError: 'carrier' at tests/test_export\.py:\d+ in poison "
                               r"\(record sequence_number=101 partition_key=pk-1\)$")

    def test_the_log_threshold_is_asked_once_per_call(self):
        asked = []
        self.host.max_log_level = lambda: asked.append(1) or 3  # warn

        @shardhost.handler
        def chatty(record):
            shardhost.log.info("dropped by the threshold")
            shardhost.log.warn("kept %s", record.sequence_number)
            return shardhost.ack

        self.call(["a", "b", "c"])
        self.assertEqual(len(asked), 1)
        self.assertEqual(self.host.lines, [("warn", "kept 100"), ("warn", "kept 101"), ("warn", "kept 102")])

    def test_ack_drop_retry_are_made_once(self):
        shardhost.handler(lambda r: shardhost.ack)
        out = self.call(["a", "b"])
        self.assertIs(out.value[0], out.value[1])

    def test_no_handler(self):
        with self.assertRaises(RuntimeError) as cm:
            self.call(["a"])
        self.assertIn("no handler", str(cm.exception))
        with self.assertRaises(RuntimeError) as cm:
            _export.WitWorld()
        self.assertIn("@shardhost.handler", str(cm.exception))


class Registration(unittest.TestCase):
    def setUp(self):
        testing.reset()
        self.dir = tempfile.TemporaryDirectory()
        sys.path.insert(0, self.dir.name)

    def tearDown(self):
        sys.path.remove(self.dir.name)
        for name in ("sh_app", "sh_handlers", "sh_own"):
            sys.modules.pop(name, None)
        self.dir.cleanup()
        testing.reset()

    def write(self, name, code):
        with open(os.path.join(self.dir.name, name + ".py"), "w") as f:
            f.write(textwrap.dedent(code))
        importlib.invalidate_caches()

    def test_the_app_module_gets_the_export_class(self):
        # the handler lives in another module that the app imports
        self.write("sh_handlers", """
            import shardhost

            @shardhost.handler
            def ship(record):
                return shardhost.ack
        """)
        self.write("sh_app", "from sh_handlers import ship\n")
        app = importlib.import_module("sh_app")
        self.assertIs(app.WitWorld, _export.WitWorld)
        self.assertIs(sys.modules["sh_handlers"].WitWorld, _export.WitWorld)
        self.assertFalse(hasattr(shardhost, "WitWorld"))
        world = app.WitWorld()  # what componentize-py does after importing the app
        with testing.FakeHost() as host:
            t = host.types = support.fake_types()
            info, records = raw_batch(["x"])
            self.assertEqual(world.handle(info, records), t.BatchOutcome_Each([t.Outcome_Ack()]))

    def test_a_class_of_the_apps_own_is_kept(self):
        self.write("sh_own", """
            import shardhost

            class WitWorld:
                pass

            @shardhost.handler
            def ship(record):
                return shardhost.ack
        """)
        own = importlib.import_module("sh_own")
        self.assertIsNot(own.WitWorld, _export.WitWorld)

    def test_one_handler_per_component(self):
        shardhost.handler(decide)
        shardhost.handler(decide)  # the same function again (a module imported twice) is fine

        def other(record):
            return shardhost.ack

        with self.assertRaises(RuntimeError) as cm:
            shardhost.batch_handler(other)
        self.assertIn("a component has one handler", str(cm.exception))

    def test_what_cannot_be_a_handler(self):
        with self.assertRaises(TypeError):
            shardhost.handler(5)

        async def coroutine(record):
            return shardhost.ack

        with self.assertRaises(TypeError) as cm:
            shardhost.handler(coroutine)
        self.assertIn("async", str(cm.exception))


class TestingCall(unittest.TestCase):
    def tearDown(self):
        testing.reset()

    def test_call_runs_the_registered_handler(self):
        shardhost.handler(decide)
        recs = [shardhost.Record("pk", str(i), t) for i, t in enumerate(["ack", "retry", "later"])]
        self.assertEqual(testing.call(recs), [shardhost.ack, shardhost.retry, shardhost.retry_after(250)])
        testing.reset()
        shardhost.batch_handler(lambda info, records: shardhost.drop)
        self.assertEqual(testing.call(recs), [shardhost.drop] * 3)


if __name__ == "__main__":
    unittest.main()
