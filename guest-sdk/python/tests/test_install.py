"""The SDK is a package: `pip install ./guest-sdk/python` into a venv gives `shardhost` (and
`shardhost.testing`), typed (py.typed), importable from anywhere; and its public API carries
type annotations that resolve."""

import inspect
import os
import subprocess
import sys
import tempfile
import typing
import unittest

SDK = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The public modules, and what of each is API: its __all__.
PUBLIC = ["shardhost", "shardhost.config", "shardhost.log", "shardhost.http", "shardhost.state",
          "shardhost.testing"]


class Install(unittest.TestCase):
    def test_pip_installs_the_sdk_into_a_venv_typed(self):
        with tempfile.TemporaryDirectory() as tmp:
            venv = os.path.join(tmp, "venv")
            made = subprocess.run([sys.executable, "-m", "venv", venv], capture_output=True, text=True, timeout=300)
            if made.returncode != 0:
                self.skipTest("no venv module (Debian: python3-venv): %s" % made.stderr.strip())
            python = os.path.join(venv, "bin", "python")
            pip = subprocess.run([python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", SDK],
                                 capture_output=True, text=True, timeout=600, cwd=tmp)
            self.assertEqual(pip.returncode, 0, "pip install %s failed:\n%s%s" % (SDK, pip.stdout, pip.stderr))
            # From outside the repository, with nothing on the path but the venv's own.
            probe = ("import os, shardhost, shardhost.testing, shardhost.http, shardhost.state\n"
                     "print(os.path.dirname(shardhost.__file__))\n"
                     "print(shardhost.testing.FakeHost.__name__, shardhost.__version__)\n")
            env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
            run = subprocess.run([python, "-I", "-c", probe], capture_output=True, text=True, timeout=60,
                                 cwd=tmp, env=env)
            self.assertEqual(run.returncode, 0, run.stderr)
            where, names = run.stdout.splitlines()
            self.assertTrue(os.path.realpath(where).startswith(os.path.realpath(venv) + os.sep),
                            "shardhost imported from %s, not the venv" % where)
            self.assertEqual(names, "FakeHost 0.1.0")
            self.assertTrue(os.path.isfile(os.path.join(where, "py.typed")), "py.typed is installed")
            installed = sorted(n for n in os.listdir(where) if not n.startswith("__pycache__"))
            source = sorted(n for n in os.listdir(os.path.join(SDK, "shardhost")) if not n.startswith("__pycache__"))
            self.assertEqual(installed, source, "the installed package is the SDK's shardhost/")
            site = os.path.dirname(where)
            self.assertFalse(os.path.exists(os.path.join(site, "tests")), "the SDK's tests are not installed")


def public_callables():
    """(qualified name, object) of every public function, class, and public method of a public
    class, in PUBLIC's __all__."""
    import importlib

    sys.path.insert(0, SDK)
    try:
        for name in PUBLIC:
            module = importlib.import_module(name)
            for attr in module.__all__:
                obj = getattr(module, attr)
                if inspect.ismodule(obj):
                    continue
                if inspect.isclass(obj):
                    yield "%s.%s" % (name, attr), obj.__init__, obj
                    for meth_name, meth in vars(obj).items():
                        if meth_name.startswith("_"):
                            continue
                        if isinstance(meth, property):
                            yield "%s.%s.%s" % (name, attr, meth_name), meth.fget, obj
                        elif isinstance(meth, (staticmethod, classmethod)):
                            yield "%s.%s.%s" % (name, attr, meth_name), meth.__func__, obj
                        elif inspect.isfunction(meth):
                            yield "%s.%s.%s" % (name, attr, meth_name), meth, obj
                elif callable(obj) and inspect.isfunction(obj):
                    yield "%s.%s" % (name, attr), obj, module
    finally:
        sys.path.remove(SDK)


class Annotations(unittest.TestCase):
    def test_the_public_api_is_annotated(self):
        missing = []
        count = 0
        for qualname, fn, owner in public_callables():
            if fn is object.__init__ or not inspect.isfunction(fn):
                continue
            count += 1
            sig = inspect.signature(fn)
            try:
                hints = typing.get_type_hints(fn)
            except Exception as e:  # an annotation that does not resolve
                missing.append("%s: %s: %s" % (qualname, type(e).__name__, e))
                continue
            for p in sig.parameters.values():
                if p.name in ("self", "cls"):
                    continue
                if p.name not in hints:
                    missing.append("%s: parameter %s" % (qualname, p.name))
            if "return" not in hints:
                missing.append("%s: return" % qualname)
        self.assertGreater(count, 50)
        self.assertEqual(missing, [], "unannotated public API:\n  " + "\n  ".join(missing))

    def test_py_typed_is_in_the_package(self):
        self.assertTrue(os.path.isfile(os.path.join(SDK, "shardhost", "py.typed")))
        with open(os.path.join(SDK, "pyproject.toml")) as f:
            text = f.read()
        self.assertIn("[build-system]", text)
        self.assertIn("Typing :: Typed", text)


if __name__ == "__main__":
    unittest.main()
