"""What ships with the SDK besides the package: its build tool (over the repository's wit/)."""

import os
import subprocess
import tempfile
import unittest

SDK = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Package(unittest.TestCase):
    def test_componentize_help(self):
        tool = os.path.join(SDK, "componentize")
        self.assertTrue(os.access(tool, os.X_OK), "componentize is executable")
        try:
            run = subprocess.run([tool, "--help"], capture_output=True, text=True, timeout=30)
        except OSError as e:  # no bash
            self.skipTest(str(e))
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertIn("usage: componentize [-v] [--http | --no-http] [--state | --no-state] [-p DIR]... APP.py OUT.wasm",
                      run.stdout)

    def world(self, source, *flags, lib=None):
        """What `componentize --world` answers for an app of one file (app.py: source)."""
        tool = os.path.join(SDK, "componentize")
        with tempfile.TemporaryDirectory() as app:
            with open(os.path.join(app, "app.py"), "w") as f:
                f.write(source)
            extra = ["-p", lib] if lib else []
            try:
                run = subprocess.run([tool, "--world", *flags, *extra, app, "app", os.path.join(app, "x.wasm")],
                                     capture_output=True, text=True, timeout=60)
            except OSError as e:  # no bash
                self.skipTest(str(e))
        self.assertEqual(run.returncode, 0, (source, flags, run.stderr))
        return run.stdout.strip()

    def test_the_world_follows_the_apps_imports_of_shardhost_state(self):
        apps = {
            "from shardhost import state\n": "handler+state",
            "import shardhost.state\n": "handler+state",
            "from shardhost.state import once, StateError\n": "handler+state",
            "import shardhost\ndef f():\n    return shardhost.state.get('k')\n": "handler+state",
            "from shardhost import http, state\n": "handler+http+state",
            "from shardhost import *\n": "handler+http+state",
            "from shardhost import config\nimport state\nstate.get('k')\n": "handler",
            "from shardhost import http\n": "handler+http",
        }
        for source, world in apps.items():
            self.assertEqual(self.world(source), world, source)
        both = "from shardhost import http, state\n"
        for flags, world in [(["--no-state"], "handler+http"), (["--no-http"], "handler+state"),
                             (["--no-http", "--no-state"], "handler"), (["--state"], "handler+http+state")]:
            self.assertEqual(self.world(both, *flags), world, flags)
        for flags, world in [(["--state"], "handler+state"), (["--http", "--state"], "handler+http+state"),
                             (["--http"], "handler+http"), (["--no-state"], "handler")]:
            self.assertEqual(self.world("import shardhost\n", *flags), world, flags)
        with tempfile.TemporaryDirectory() as lib:
            with open(os.path.join(lib, "counting.py"), "w") as f:
                f.write("from shardhost import state\n")
            self.assertEqual(self.world("from shardhost import http\nimport counting\n", lib=lib), "handler+http+state")

    def test_the_world_follows_the_apps_imports_of_shardhost_http(self):
        tool = os.path.join(SDK, "componentize")
        apps = {
            "import shardhost\n": "handler",
            "from shardhost import config, log\nimport http.client\n": "handler",
            "from shardhost import http\n": "handler+http",
            "from shardhost import (\n    config,\n    http as web,\n)\n": "handler+http",
            "import shardhost.http\n": "handler+http",
            "from shardhost.http import post\n": "handler+http",
            "import shardhost\ndef f():\n    return shardhost.http.get('x')\n": "handler+http",
            "def broken(:\n": "handler",
        }
        for source, world in apps.items():
            with tempfile.TemporaryDirectory() as app:
                with open(os.path.join(app, "app.py"), "w") as f:
                    f.write(source)
                for flags, expected in (([], world), (["--http"], "handler+http"), (["--no-http"], "handler")):
                    try:
                        run = subprocess.run([tool, "--world", *flags, app, "app", os.path.join(app, "x.wasm")],
                                             capture_output=True, text=True, timeout=60)
                    except OSError as e:  # no bash
                        self.skipTest(str(e))
                    self.assertEqual((run.returncode, run.stdout.strip()), (0, expected), (source, flags, run.stderr))
        with tempfile.TemporaryDirectory() as app, tempfile.TemporaryDirectory() as lib:
            with open(os.path.join(app, "app.py"), "w") as f:
                f.write("import shardhost\nimport booking\n")
            with open(os.path.join(lib, "booking.py"), "w") as f:
                f.write("from shardhost import http\n")
            run = subprocess.run([tool, "--world", "-p", lib, app, "app", os.path.join(app, "x.wasm")],
                                 capture_output=True, text=True, timeout=60)
            self.assertEqual(run.stdout.strip(), "handler+http", run.stderr)
