"""Logging: the threshold, the functions, Python's logging routed to the host, print()."""

import io
import logging
import sys
import unittest

import shardhost
from shardhost import log, testing


class Functions(unittest.TestCase):
    def test_levels_and_threshold(self):
        with testing.FakeHost(max_level="info") as host:
            log.trace("t")
            log.debug("d %s", 1)
            log.info("i %s", 2)
            log.warn("w")
            log.warning("w2")
            log.error("e %d%%", 5)
            log.log("warn", "named")
            log.log(log.CRITICAL, "critical")
            self.assertFalse(log.enabled("debug"))
            self.assertTrue(log.enabled("info") and log.enabled(log.ERROR))
        self.assertEqual(host.lines, [("info", "i 2"), ("warn", "w"), ("warn", "w2"), ("error", "e 5%"),
                                      ("warn", "named"), ("error", "critical")])

    def test_a_disabled_level_formats_nothing(self):
        class Loud:
            def __str__(self):
                raise AssertionError("formatted")

        with testing.FakeHost(max_level="warn") as host:
            log.info("%s", Loud())
            log.debug("%s", Loud())
            log.log("trace", "%s", Loud())
        self.assertEqual(host.lines, [])

    def test_host_records_nothing(self):
        with testing.FakeHost(max_level=None) as host:
            log.error("x")
            self.assertFalse(log.enabled("error"))
        self.assertEqual(host.lines, [])

    def test_level_mapping(self):
        self.assertEqual([log.host_level(n) for n in (1, 5, 9, 10, 19, 20, 29, 30, 39, 40, 50, 60)],
                         [0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 4])
        self.assertEqual(logging.getLevelName(log.TRACE), "TRACE")
        with self.assertRaises(ValueError):
            log.enabled("loud")

    def test_native_lines_go_to_stderr(self):
        err = io.StringIO()
        old, sys.stderr = sys.stderr, err
        try:
            log.warn("no host here")
        finally:
            sys.stderr = old
        self.assertEqual(err.getvalue(), "[ warn] no host here\n")


class PythonLogging(unittest.TestCase):
    def setUp(self):
        self.host = testing.FakeHost(max_level="info").__enter__()
        log.install_logging(streams=False)

    def tearDown(self):
        log.uninstall_logging()
        self.host.__exit__(None, None, None)

    def refresh(self, level):
        self.host.max_level = level
        log._refresh()

    def test_records_go_to_the_host(self):
        self.refresh("info")
        logging.getLogger("shipping").info("booked %s", 7)
        logging.warning("root line")
        logging.getLogger("shipping").debug("not recorded")
        try:
            1 / 0
        except ZeroDivisionError:
            logging.getLogger("x").exception("failed")
        self.assertEqual(self.host.lines[:2], [("info", "shipping: booked 7"), ("warn", "root line")])
        level, line = self.host.lines[2]
        self.assertEqual(level, "error")
        self.assertTrue(line.startswith("x: failed\nTraceback (most recent call last):"), line)
        self.assertIn("ZeroDivisionError", line)

    def test_the_host_threshold_drives_logging_disable(self):
        logger = logging.getLogger("shipping")
        self.refresh("warn")
        self.assertFalse(logger.isEnabledFor(logging.INFO))
        self.assertTrue(logger.isEnabledFor(logging.WARNING))
        self.refresh("trace")
        self.assertTrue(logger.isEnabledFor(log.TRACE))
        logger.log(log.TRACE, "fine detail")
        self.assertEqual(self.host.lines[-1], ("trace", "shipping: fine detail"))
        self.refresh(None)
        self.assertFalse(logger.isEnabledFor(logging.CRITICAL))

    def test_a_disabled_level_builds_no_record(self):
        self.refresh("warn")
        made = []
        old = logging.getLogRecordFactory()
        logging.setLogRecordFactory(lambda *a, **k: made.append(1) or old(*a, **k))
        try:
            logging.getLogger("shipping").info("nothing")
            logging.getLogger("shipping").debug("nothing")
        finally:
            logging.setLogRecordFactory(old)
        self.assertEqual(made, [])

    def test_uninstall_restores(self):
        log.uninstall_logging()
        self.assertEqual(logging.root.manager.disable, logging.NOTSET)
        self.assertFalse(any(isinstance(h, log.HostHandler) for h in logging.getLogger().handlers))
        log.install_logging(streams=False)


class Streams(unittest.TestCase):
    def setUp(self):
        self.host = testing.FakeHost(max_level="info").__enter__()
        self.out, self.err = sys.stdout, sys.stderr
        log.install_logging(streams=True)

    def tearDown(self):
        log.uninstall_logging()
        self.host.__exit__(None, None, None)
        self.assertIs(sys.stdout, self.out)
        self.assertIs(sys.stderr, self.err)

    def test_print_goes_to_the_host_line_by_line(self):
        print("one")
        print("two\nthree", end="")
        print(" and more")
        print("partial", end="")
        sys.stderr.write("warning line\n")
        log._flush_streams()
        self.assertEqual(self.host.lines, [("info", "one"), ("info", "two"), ("info", "three and more"),
                                           ("warn", "warning line"), ("info", "partial")])

    def test_threshold(self):
        self.host.max_level = "warn"
        log._refresh()
        print("dropped")
        sys.stderr.write("kept\n")
        self.assertEqual(self.host.lines, [("warn", "kept")])

    def test_before_the_first_call_writes_pass_through(self):
        # while the component is built (an unarmed backend), output goes to the old streams
        self.host.armed = False
        captured = io.StringIO()
        sys.stdout._original = captured
        try:
            print("at build time")
        finally:
            sys.stdout._original = self.out
            self.host.armed = True
        self.assertEqual(captured.getvalue(), "at build time\n")
        self.assertEqual(self.host.lines, [])


if __name__ == "__main__":
    unittest.main()
