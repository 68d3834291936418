"""What ships with the SDK besides the package: its WIT and its build tool."""

import os
import subprocess
import unittest

SDK = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO_WIT = os.path.join(SDK, "..", "..", "wit", "handler.wit")


class Package(unittest.TestCase):
    def test_wit_is_the_repositorys(self):
        # componentize builds with the SDK's copy, so that the SDK works outside the repository.
        if not os.path.isfile(REPO_WIT):
            self.skipTest("not inside the shardhost repository")
        with open(os.path.join(SDK, "wit", "handler.wit"), "rb") as f:
            packaged = f.read()
        with open(REPO_WIT, "rb") as f:
            self.assertEqual(packaged, f.read(), "copy wit/handler.wit into guest-sdk/python/wit/")

    def test_componentize_help(self):
        tool = os.path.join(SDK, "componentize")
        self.assertTrue(os.access(tool, os.X_OK), "componentize is executable")
        try:
            run = subprocess.run([tool, "--help"], capture_output=True, text=True, timeout=30)
        except OSError as e:  # no bash
            self.skipTest(str(e))
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertIn("usage: componentize [-p DIR]... APP_DIR MODULE OUT.wasm", run.stdout)
