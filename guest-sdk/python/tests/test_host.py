"""publish/seek, and the backend that calls the generated bindings (stand-ins here)."""

import sys
import unittest
from unittest import mock

from tests import support

import shardhost
from shardhost import _host, _export, log, testing


class Native(unittest.TestCase):
    def test_publish_and_seek_raise_outside_a_component(self):
        with self.assertRaises(shardhost.PublishError) as cm:
            shardhost.publish("s", "k", b"x")
        self.assertIn("not running inside shardhost", cm.exception.reason)
        self.assertIsInstance(cm.exception, shardhost.HostError)
        with self.assertRaises(shardhost.SeekError):
            shardhost.seek("1")

    def test_fake_host(self):
        with testing.FakeHost() as host:
            self.assertEqual(shardhost.publish("out", "k", "é"), "%056d" % 1)
            shardhost.publish("out", "k", bytearray(b"\x00"))
            shardhost.seek(49600)
        self.assertEqual(host.published, [("out", "k", "é".encode()), ("out", "k", b"\x00")])
        self.assertEqual(host.seeks, ["49600"])
        with testing.FakeHost(publish_error="throttled", seek_error="refused"):
            with self.assertRaises(shardhost.PublishError) as cm:
                shardhost.publish("out", "k", b"")
            self.assertEqual(cm.exception.reason, "throttled")
            with self.assertRaises(shardhost.SeekError):
                shardhost.seek("1")


class Wit(unittest.TestCase):
    """WitBackend against stand-ins of the generated modules."""

    def setUp(self):
        self.modules = support.fake_bindings()
        self.patch = mock.patch.dict(sys.modules, self.modules)
        self.patch.start()
        self.backend = _host.WitBackend()
        self.previous = _host.set_backend(self.backend)
        self.calls = self.modules["wit_world.imports.host"].calls
        testing.reset()

    def tearDown(self):
        _host.set_backend(self.previous)
        log._refresh()
        self.patch.stop()
        testing.reset()

    def test_nothing_reaches_the_host_before_the_first_call(self):
        with mock.patch.object(self.backend, "_stderr", new=__import__("io").StringIO()) as err:
            log._refresh()
            log.info("at build time")
            with self.assertRaises(shardhost.PublishError):
                shardhost.publish("s", "k", b"")
            with self.assertRaises(shardhost.SeekError):
                shardhost.seek("1")
        self.assertEqual(self.calls, [])
        self.assertEqual(err.getvalue(), "[ info] at build time\n")

    def test_a_call(self):
        host = self.modules["wit_world.imports.host"]
        host.max_level = support.Level.INFO

        @shardhost.handler
        def handle(record):
            log.debug("hidden")
            log.info("seen %s", record.partition_key)
            seq = shardhost.publish("copies", record.partition_key, record.data)
            shardhost.seek("7")
            return shardhost.retry_after(3) if seq else shardhost.drop

        t = self.backend.types
        info = t.BatchInfo("s", "shardId-000000000000", None, 1)
        rec = t.KinesisRecord("pk", "5", 0, 0, b"data")
        out = _export.WitWorld().handle(info, [rec])
        self.assertEqual(out, t.BatchOutcome_Each([t.Outcome_RetryAfter(3)]))
        self.assertEqual(self.calls, [
            ("max_log_level",),
            ("log", "info", "seen pk"),
            ("publish", "copies", "pk", b"data"),
            ("seek", "7"),
        ])

    def test_host_errors_become_exceptions(self):
        host = self.modules["wit_world.imports.host"]
        host.publish_error = "publish to `x` refused: this handler may not publish"
        host.seek_error = "seek: 1 refused"
        self.backend.arm()
        with self.assertRaises(shardhost.PublishError) as cm:
            shardhost.publish("x", "k", b"")
        self.assertEqual(str(cm.exception), host.publish_error)
        with self.assertRaises(shardhost.SeekError) as cm:
            shardhost.seek("1")
        self.assertEqual(cm.exception.reason, "seek: 1 refused")

    def test_host_that_records_nothing(self):
        self.modules["wit_world.imports.host"].max_level = None
        self.backend.arm()
        log._refresh()
        log.error("nothing")
        self.assertEqual(self.calls, [("max_log_level",)])


if __name__ == "__main__":
    unittest.main()
