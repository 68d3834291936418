"""The build tool, componentize: what it copies into the component (only the modules the
handler imports), its arguments (`componentize APP.py OUT.wasm`, or APP_DIR MODULE OUT.wasm),
its messages and exit codes. Most of these ask `--files` or `--world` and build nothing; one
test builds (componentize-py runs four times: about a minute)."""

import hashlib
import os
import re
import subprocess
import tempfile
import textwrap
import time
import unittest

SDK = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOL = os.path.join(SDK, "componentize")


def write(root, files):
    for name, text in files.items():
        path = os.path.join(root, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(textwrap.dedent(text))


def run(args, cwd):
    try:
        return subprocess.run([TOOL, *args], capture_output=True, text=True, timeout=600, cwd=cwd)
    except OSError as e:  # no bash
        raise unittest.SkipTest(str(e))


def sha12(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()[:12]


# An app whose handler imports some of its directory's modules (in every way an import can be
# written) and not others: tests, an unused helper, a conftest.
APP = {
    "orders.py": """\
        import json
        import shardhost
        from lib import pricing
        import util.text as text
        try:
            import speedups          # not there: the standard library's, or nothing
        except ImportError:
            speedups = None
        import extra                 # from a -p DIR

        @shardhost.handler
        def handle(record):
            import lazy              # imported inside a function
            return shardhost.ack
        """,
    "lib/__init__.py": "",
    "lib/pricing.py": "from . import rates\nfrom .tax import vat\nfrom .. import nothing_above  # not found\n",
    "lib/rates.py": "RATE = 1\n",
    "lib/tax.py": "def vat(x):\n    return x\n",
    "lib/unused.py": "from shardhost import http\n",
    "util/text.py": "import importlib\nimportlib.import_module('dyn')\n",   # util: a namespace package
    "dyn.py": "X = 1\n",
    "lazy.py": "",
    "unused.py": "from shardhost import state\n",
    "test_orders.py": "import unittest\nimport orders\nfrom shardhost import http, testing\n",
    "tests/test_more.py": "import orders\n",
    "conftest.py": "",
}
LIB = {"extra.py": "import helper_lib\n", "helper_lib.py": "", "other_lib.py": "from shardhost import http\n"}


class Files(unittest.TestCase):
    """`--files`: what the build copies into the component."""

    def test_only_the_modules_the_handler_imports_are_copied(self):
        with tempfile.TemporaryDirectory() as app, tempfile.TemporaryDirectory() as lib:
            write(app, APP)
            write(lib, LIB)
            got = run(["--files", "-p", lib, "orders.py", "out.wasm"], cwd=app)
            self.assertEqual(got.returncode, 0, got.stderr)
            files = got.stdout.split()
            expected = [os.path.join(app, f) for f in
                        ["dyn.py", "lazy.py", "lib/__init__.py", "lib/pricing.py", "lib/rates.py", "lib/tax.py",
                         "orders.py", "util/text.py"]] + [os.path.join(lib, f) for f in ["extra.py", "helper_lib.py"]]
            self.assertEqual(sorted(files), sorted(expected))
            # The world is that of those files: the tests and unused modules import shardhost.http
            # and shardhost.state, the handler neither.
            world = run(["--world", "-p", lib, "orders.py", "out.wasm"], cwd=app)
            self.assertEqual((world.returncode, world.stdout.strip()), (0, "handler"), world.stderr)

    def test_a_package_as_the_handler(self):
        with tempfile.TemporaryDirectory() as app:
            write(app, {"svc/__init__.py": "from .handler import ship\n", "svc/handler.py": "from ..shared import x\n",
                        "shared.py": "from shardhost import http\n", "svc/test_handler.py": ""})
            got = run(["--files", app, "svc", os.path.join(app, "x.wasm")], cwd=app)
            self.assertEqual(got.returncode, 0, got.stderr)
            self.assertEqual(sorted(got.stdout.split()),
                             [os.path.join(app, f) for f in ["svc/__init__.py", "svc/handler.py"]])
            # `from ..shared import x` goes above the top-level package: not found, as in Python.
            world = run(["--world", app, "svc", os.path.join(app, "x.wasm")], cwd=app)
            self.assertEqual(world.stdout.strip(), "handler", world.stderr)


class Arguments(unittest.TestCase):
    """`componentize APP.py OUT.wasm` and `componentize APP_DIR MODULE OUT.wasm`, and what a
    mistake says."""

    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)
        self.app = os.path.join(self.dir.name, "app")
        write(self.app, {"orders.py": "import shardhost\nfrom shardhost import http\n"})

    def world(self, *args):
        return run(["--world", *args], cwd=self.dir.name)

    def test_the_forms_that_work(self):
        for args in (["app/orders.py", "out.wasm"], ["app", "orders", "out.wasm"], ["app", "orders.py", "out.wasm"],
                     [os.path.join(self.app, "orders.py"), "x/out.wasm"], ["-v", "app/orders.py", "out.wasm"]):
            got = self.world(*args)
            self.assertEqual((got.returncode, got.stdout.strip(), got.stderr), (0, "handler+http", ""), args)

    def test_mistakes_say_what_to_type(self):
        cases = [
            # (arguments, the message (a regular expression))
            (["app/orders.py", "orders", "out.wasm"],
             r"^componentize: app/orders\.py is a file: pass it alone, componentize app/orders\.py out\.wasm"
             r" \(or its directory and module: componentize app orders out\.wasm\)$"),
            (["app", "out.wasm"],
             r"^componentize: app is a directory: pass the handler's file, e\.g\. componentize app/orders\.py out\.wasm$"),
            (["app", "nosuch", "out.wasm"],
             r"^componentize: no module nosuch in app \(no app/nosuch\.py, no app/nosuch/__init__\.py\)$"),
            (["app/nosuch.py", "out.wasm"], r"^componentize: app/nosuch\.py: no such file$"),
            (["app/orders", "out.wasm"],
             r"^componentize: app/orders: no such file: pass the handler's file, componentize app/orders\.py out\.wasm$"),
            (["nodir", "orders", "out.wasm"], r"^componentize: nodir: no such directory$"),
            (["app/orders.py", "out"], r"^componentize: out: the output should end in \.wasm$"),
            (["app", "orders-1", "out.wasm"], r"^componentize: orders-1: not a module name$"),
            (["app/orders.py"], r"^componentize: usage: componentize \[options\] APP\.py OUT\.wasm"
                                r" \(or APP_DIR MODULE OUT\.wasm; see --help\)$"),
            (["--nope", "app/orders.py", "out.wasm"], r"^componentize: unknown option --nope \(see --help\)$"),
            (["-p", "nodir", "app/orders.py", "out.wasm"], r"^componentize: nodir: no such directory$"),
        ]
        for args, message in cases:
            got = self.world(*args)
            self.assertEqual(got.returncode, 2, (args, got.stderr))
            self.assertRegex(got.stderr.strip(), message)
            self.assertEqual(got.stderr.count("\n"), 1, (args, got.stderr))
            self.assertEqual(got.stdout, "")

    def test_help(self):
        got = run(["--help"], cwd=self.dir.name)
        self.assertEqual(got.returncode, 0)
        self.assertIn("usage: componentize [-v] [--http | --no-http] [--state | --no-state] [-p DIR]... APP.py OUT.wasm\n"
                      "       componentize [-v] [--http | --no-http] [--state | --no-state] [-p DIR]... APP_DIR MODULE OUT.wasm\n",
                      got.stdout)


BUILT = re.compile(r"^built (?P<out>\S+) \((?P<size>\d+\.\d) MB, version (?P<version>[0-9a-f]{12}), "
                   r"world (?P<world>[a-z+]+)\) in \d+\.\d s$")


STAGE = r"^componentize: compiling orders\.py into a component \(about \d+ s\)$"


class Build(unittest.TestCase):
    """A real build: what it compiles and the built line, "up to date" when only a test
    changed, a failure's message and -v."""

    def test_build_up_to_date_failure_and_verbose(self):
        with tempfile.TemporaryDirectory() as app:
            write(app, {
                "orders.py": "import shardhost\nimport helper\n\n@shardhost.handler\ndef ship(record):\n"
                             "    return helper.answer()\n",
                "helper.py": "import shardhost\n\ndef answer():\n    return shardhost.ack\n",
                "test_orders.py": "import unittest\nimport orders\n",
            })
            out = os.path.join(app, "orders.wasm")
            first = run(["orders.py", "orders.wasm"], cwd=app)
            self.assertEqual(first.returncode, 0, first.stderr)
            lines = first.stderr.splitlines()
            self.assertEqual(len(lines), 2, first.stderr)
            self.assertRegex(lines[0], STAGE)
            built = BUILT.match(lines[1])
            self.assertTrue(built, lines[1])
            self.assertEqual(built["out"], "orders.wasm")
            self.assertEqual(built["version"], sha12(out))
            self.assertEqual(built["world"], "handler")
            self.assertAlmostEqual(float(built["size"]), os.path.getsize(out) / 1e6, delta=0.051)
            version = built["version"]
            # The world it was built for: the repository's `handler`, and no capability.
            with open(os.path.join(app, "out", "orders", "wit", "app.wit")) as f:
                self.assertIn("\nworld app {\n  include handler;\n}\n", f.read())
            staged = sorted(os.listdir(os.path.join(app, "out", "orders", "src", "app")))
            self.assertEqual([f for f in staged if f.endswith(".py")], ["helper.py", "orders.py"])

            # A test changes, a new one appears: nothing to build, in both forms.
            later = time.time() + 5
            with open(os.path.join(app, "test_orders.py"), "a") as f:
                f.write("class T(unittest.TestCase):\n    pass\n")
            os.utime(os.path.join(app, "test_orders.py"), (later, later))
            write(app, {"test_helper.py": "import helper\n"})
            for args in (["orders.py", "orders.wasm"], [".", "orders", "orders.wasm"], [app, "orders", out]):
                again = run(args, cwd=app)
                shown = args[-1]
                self.assertEqual((again.returncode, again.stderr),
                                 (0, "%s is up to date (version %s, world handler)\n" % (shown, version)), args)
            self.assertEqual(sha12(out), version)

            # A failure: the cause, naming the file and line; no traceback of componentize-py's.
            write(app, {"helper.py": "import shardhost\n\ndef answer(:\n    return shardhost.ack\n"})
            failed = run(["orders.py", "orders.wasm"], cwd=app)
            self.assertEqual(failed.returncode, 1, failed.stderr)
            self.assertRegex(failed.stderr.splitlines()[0], STAGE)
            self.assertEqual(failed.stderr.splitlines()[1], "componentize: helper.py:3: SyntaxError: invalid syntax")
            self.assertIn("    def answer(:\n", failed.stderr)
            self.assertTrue(failed.stderr.endswith("(the full output: out/orders/build.log; -v prints it)\n"),
                            failed.stderr)
            self.assertNotIn("Traceback", failed.stderr)
            self.assertNotIn("componentize-py", failed.stderr)
            self.assertEqual(sha12(out), version, "a failed build leaves the component as it was")

            # An error at import time names the app's line (not the standard library's); with
            # -v, componentize-py's own output comes first.
            write(app, {"helper.py": "import json\n\nCARRIERS = json.loads('{')\n"})
            verbose = run(["-v", "orders.py", "orders.wasm"], cwd=app)
            self.assertEqual(verbose.returncode, 1, verbose.stderr)
            self.assertIn("Caused by:", verbose.stderr)
            self.assertIn("Traceback (most recent call last):", verbose.stderr)
            self.assertRegex(verbose.stderr.splitlines()[0], STAGE)
            mine = verbose.stderr[verbose.stderr.index("\ncomponentize: ") + 1:].splitlines()
            self.assertRegex(mine[0], r"^componentize: helper\.py:3: json\.decoder\.JSONDecodeError: Expecting property name")
            self.assertEqual(mine[1], "    CARRIERS = json.loads('{')")
            self.assertEqual(mine[-1], "(the full output: out/orders/build.log)")

            # Fixed, with -v: componentize-py's output, then the one line; a new version.
            write(app, {"helper.py": "import shardhost\n\ndef answer():\n    return shardhost.drop\n"})
            rebuilt = run(["-v", "orders.py", "orders.wasm"], cwd=app)
            self.assertEqual(rebuilt.returncode, 0, rebuilt.stderr)
            self.assertIn("Component built successfully\n", rebuilt.stderr)
            last = BUILT.match(rebuilt.stderr.splitlines()[-1])
            self.assertTrue(last, rebuilt.stderr)
            self.assertEqual(last["version"], sha12(out))
            self.assertNotEqual(last["version"], version)


if __name__ == "__main__":
    unittest.main()
