"""What ships with the SDK besides the package: its WIT and its build tool."""

import os
import subprocess
import tempfile
import unittest

SDK = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO_WIT = os.path.join(SDK, "..", "..", "wit")


def tree(root):
    """{relative path: bytes} of every file under root."""
    files = {}
    for d, _, names in os.walk(root):
        for n in names:
            path = os.path.join(d, n)
            with open(path, "rb") as f:
                files[os.path.relpath(path, root)] = f.read()
    return files


class Package(unittest.TestCase):
    def test_wit_is_the_repositorys(self):
        # componentize builds with the SDK's copy (handler.wit and deps/), so that the SDK works
        # outside the repository.
        if not os.path.isfile(os.path.join(REPO_WIT, "handler.wit")):
            self.skipTest("not inside the shardhost repository")
        packaged, repo = tree(os.path.join(SDK, "wit")), tree(REPO_WIT)
        self.assertEqual(sorted(packaged), sorted(repo), "copy the repository's wit/ into guest-sdk/python/wit/")
        for name in repo:
            self.assertEqual(packaged[name], repo[name], "wit/%s differs: copy the repository's wit/" % name)

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
            "from shardhost import state\n": "state-handler",
            "import shardhost.state\n": "state-handler",
            "from shardhost.state import once, StateError\n": "state-handler",
            "import shardhost\ndef f():\n    return shardhost.state.get('k')\n": "state-handler",
            "from shardhost import http, state\n": "http-state-handler",
            "from shardhost import *\n": "http-state-handler",
            "from shardhost import config\nimport state\nstate.get('k')\n": "handler",
            "from shardhost import http\n": "http-handler",
        }
        for source, world in apps.items():
            self.assertEqual(self.world(source), world, source)
        both = "from shardhost import http, state\n"
        for flags, world in [(["--no-state"], "http-handler"), (["--no-http"], "state-handler"),
                             (["--no-http", "--no-state"], "handler"), (["--state"], "http-state-handler")]:
            self.assertEqual(self.world(both, *flags), world, flags)
        for flags, world in [(["--state"], "state-handler"), (["--http", "--state"], "http-state-handler"),
                             (["--http"], "http-handler"), (["--no-state"], "handler")]:
            self.assertEqual(self.world("import shardhost\n", *flags), world, flags)
        with tempfile.TemporaryDirectory() as lib:
            with open(os.path.join(lib, "counting.py"), "w") as f:
                f.write("from shardhost import state\n")
            self.assertEqual(self.world("from shardhost import http\nimport counting\n", lib=lib), "http-state-handler")

    def test_the_world_follows_the_apps_imports_of_shardhost_http(self):
        tool = os.path.join(SDK, "componentize")
        apps = {
            "import shardhost\n": "handler",
            "from shardhost import config, log\nimport http.client\n": "handler",
            "from shardhost import http\n": "http-handler",
            "from shardhost import (\n    config,\n    http as web,\n)\n": "http-handler",
            "import shardhost.http\n": "http-handler",
            "from shardhost.http import post\n": "http-handler",
            "import shardhost\ndef f():\n    return shardhost.http.get('x')\n": "http-handler",
            "def broken(:\n": "handler",
        }
        for source, world in apps.items():
            with tempfile.TemporaryDirectory() as app:
                with open(os.path.join(app, "app.py"), "w") as f:
                    f.write(source)
                for flags, expected in (([], world), (["--http"], "http-handler"), (["--no-http"], "handler")):
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
            self.assertEqual(run.stdout.strip(), "http-handler", run.stderr)
