"""The parts of `componentize` (next to this file) that read Python: which of the app's files
the handler imports, which world they need, and what a failed build's log says. Not part of the
SDK package; run by componentize only, with the machine's python3 (3.9 or later):

  componentize-helper.py scan HTTP STATE MODULE ROOT...
      ROOT: the app's directory, then each -p DIR. Prints the world (`handler` and the
      capabilities it includes: handler, handler+http, handler+state or handler+http+state;
      HTTP and STATE: yes, no or auto), then one line per
      file the module imports, transitively, from the ROOTs: "INDEX<TAB>PATH" (INDEX: its ROOT's,
      from 0). Exit 3 when MODULE is in none of the ROOTs.
  componentize-helper.py explain LOG ENTRY ROOT...
      ROOT: the directories componentize-py had on its path (/0, /1, ... in its traceback; the
      SDK's last). Prints what went wrong, for people: the last line of the app's own that the
      traceback names, as FILE:LINE: EXCEPTION, with its source line.

An import is any `import` or `from ... import` statement anywhere in a file (in a function, a
`try`, an `if`), relative ones included, and `importlib.import_module("name")` or
`__import__("name")` with a literal name. A module found in no ROOT (the standard library, the
SDK, a typo) is not followed: componentize-py says what is missing, if anything is.
"""

import ast
import os
import re
import sys


# ---- which files ----

def find(name, roots):
    """[(root index, path, module name)] of the files importing the dotted module `name` runs, found as
    Python's path finder would with `roots` as the path: each package's __init__.py on the way,
    then the module's own file. Namespace packages (directories without __init__.py) have no
    file. A part found nowhere ends the list there."""
    places = list(enumerate(roots))
    files = []
    parts = name.split(".")
    for k, part in enumerate(parts):
        found = None
        portions = []
        for i, d in places:
            pkg = os.path.join(d, part)
            init = os.path.join(pkg, "__init__.py")
            if os.path.isfile(init):
                found = (i, init, pkg)
                break
            if os.path.isfile(pkg + ".py"):
                found = (i, pkg + ".py", None)
                break
            if os.path.isdir(pkg):
                portions.append((i, pkg))
        if found is not None:
            i, path, pkg = found
            files.append((i, path, ".".join(parts[: k + 1])))
            if pkg is None:  # a module: nothing below it
                return files
            places = [(i, pkg)]
        elif portions:
            places = portions
        else:
            return files
    return files


def read(path):
    with open(path, "rb") as f:
        return f.read()


IMPORT_RE = re.compile(rb"^\s*import\s+([\w. ,]+)", re.M)
FROM_RE = re.compile(rb"^\s*from\s+(\.*)([\w.]*)\s+import\s+\(?([\w, *]+)", re.M)


def imports(tree, source, package, is_package):
    """The absolute names a module imports (names of modules, or of attributes that may be
    submodules). `package`: its package's name ("" for a top-level module). Without a tree (the
    file does not parse here), what lines that look like imports say."""
    names = []

    def relative(level, module):
        base = package.split(".") if package else []
        if level > len(base):
            return None  # beyond the top-level package (or none): ImportError in Python
        base = base[: len(base) - (level - 1)]
        return ".".join(base + ([module] if module else []))

    def from_import(level, module, aliases):
        target = module if level == 0 else relative(level, module)
        if not target:
            return
        names.append(target)
        for alias in aliases:
            if alias != "*":
                names.append(target + "." + alias)
            else:
                names.append((target, "*"))

    if tree is None:
        for m in IMPORT_RE.finditer(source):
            for part in m.group(1).decode("ascii", "replace").split(","):
                part = part.strip().split(" ")[0]
                if part:
                    names.append(part)
        for m in FROM_RE.finditer(source):
            aliases = [a.strip().split(" ")[0] for a in m.group(3).decode("ascii", "replace").split(",")]
            from_import(len(m.group(1)), m.group(2).decode("ascii", "replace"), [a for a in aliases if a])
        return names
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            from_import(node.level, node.module, [a.name for a in node.names])
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str) and not node.args[0].value.startswith("."):
            f = node.func
            called = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
            if called in ("import_module", "__import__"):
                names.append(node.args[0].value)
    return names


def star_names(tree):
    """A package's literal __all__, for `from package import *` (its submodules get imported)."""
    if tree is None:
        return []
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            try:
                value = ast.literal_eval(node.value)
            except ValueError:
                return []
            return [v for v in value if isinstance(v, str)]
    return []


def parse(path, source):
    try:
        return ast.parse(source, path)
    except (SyntaxError, ValueError):
        return None


def scan(module, roots):
    """{path: (root index, tree or None, source)} of every file `module` imports from `roots`,
    itself included; None when `module` is in no root."""
    found = {}
    seen = set()
    queue = [module]
    first = True
    while queue:
        item = queue.pop()
        star = None
        if isinstance(item, tuple):
            item, star = item
        if (item, star) in seen:
            continue
        seen.add((item, star))
        files = find(item, roots)
        if first:
            first = False
            if not files or files[-1][2] != item:
                return None
        for i, path, name in files:
            is_package = os.path.basename(path) == "__init__.py"
            if path not in found:
                source = read(path)
                tree = parse(path, source)
                found[path] = (i, tree, source)
                package = name if is_package else name.rpartition(".")[0]
                queue.extend(imports(tree, source, package, is_package))
            if star is not None and name == item and is_package:
                queue.extend(item + "." + n for n in star_names(found[path][1]))
    return found


# ---- which world ----

def uses(tree, source, name):
    """Whether a module imports shardhost.NAME, or names it as an attribute of shardhost."""
    full = "shardhost." + name
    if tree is None:
        return bool(re.search(rb"\bshardhost\." + name.encode() + rb"\b", source)
                    or re.search(rb"from\s+shardhost\s+import\s+[^\n]*\b" + name.encode() + rb"\b", source))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            if any(a.name == full or a.name.startswith(full + ".") for a in node.names):
                return True
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "shardhost" and any(a.name in (name, "*") for a in node.names):
                return True
            if node.module == full or node.module.startswith(full + "."):
                return True
        elif isinstance(node, ast.Attribute) and node.attr == name:
            if isinstance(node.value, ast.Name) and node.value.id == "shardhost":
                return True
    return False


# The capabilities, by the names of their worlds in wit/handler.wit (and of their SDK modules),
# in the order a world's name lists them.
CAPABILITIES = ("http", "state")


def world(found, asked):
    """`handler` and each capability the files use (or `asked` says yes to), joined by "+"."""
    used = [name for name in CAPABILITIES if asked[name] == "yes"
            or (asked[name] == "auto" and any(uses(t, s, name) for _, t, s in found.values()))]
    return "+".join(["handler"] + used)


def main_scan(args):
    http, state, module, roots = args[0], args[1], args[2], args[3:]
    found = scan(module, roots)
    if found is None:
        return 3
    print(world(found, {"http": http, "state": state}))
    for path in sorted(found, key=lambda p: (found[p][0], p)):
        print("%d\t%s" % (found[path][0], path))
    return 0


# ---- what went wrong ----

FRAME_RE = re.compile(r'^  File "(?P<file>[^"]+)", line (?P<line>\d+)(?:, in (?P<fn>.*))?$')


def shown(path):
    """A path as people read it: relative to the working directory when inside it."""
    here = os.getcwd()
    if path.startswith(here + os.sep):
        return os.path.relpath(path, here)
    return path


def explain(log, entry, roots):
    """The lines that say why componentize-py failed, from its log."""
    text = log.replace("\r\n", "\n")
    # componentize-py reports the app's exception as the message of an AssertionError of its
    # own, after its own traceback, and again after "Caused by:".
    start = text.find("AssertionError: ")
    inner = text[start + len("AssertionError: "):] if start >= 0 else text
    inner = inner.split("\n\nCaused by:", 1)[0]
    last_tb = inner.rfind("Traceback (most recent call last):")
    if last_tb >= 0:
        inner = inner[last_tb + len("Traceback (most recent call last):"):]
    lines = inner.strip("\n").split("\n")
    frames = []  # (file, line, [source lines])
    rest = []
    for line in lines:
        m = FRAME_RE.match(line)
        if m:
            frames.append((m["file"], int(m["line"]), []))
            rest = []
        elif line.startswith("    ") and frames and not rest:
            frames[-1][2].append(line)
        elif line.strip():
            rest.append(line)
    mapped = []
    for file, line, source in frames:
        m = re.match(r"^/(\d+)/(.*)$", file)
        if m and int(m[1]) < len(roots) - 1:  # the app or a -p DIR (the last root is the SDK)
            mapped.append((shown(os.path.join(roots[int(m[1])], m[2])), line, source))
    if not rest:
        caused = text.split("Caused by:", 1)
        cause = caused[1].strip().split("\n")[0].strip() if len(caused) == 2 else ""
        if not cause:
            tail = [l for l in text.strip().split("\n") if l.strip()]
            cause = tail[-1].strip() if tail else "componentize-py failed"
        return ["componentize: %s: %s" % (entry, cause)]
    no_world = re.match(r"^AttributeError: module '[\w.]+' has no attribute 'WitWorld'$", rest[0])
    if no_world and not mapped:
        return ["componentize: %s declares no handler: import shardhost and decorate the handler function with "
                "@shardhost.handler (per record) or @shardhost.batch_handler (per batch)" % entry]
    if mapped:
        file, line, source = mapped[-1]
        out = ["componentize: %s:%d: %s" % (file, line, rest[0])]
        out += rest[1:]
        # the source line (and the caret line under it), indented
        out += [s for s in source if s.strip() and not set(s.strip()) <= set("~^")][:1]
        carets = [s for s in source if s.strip() and set(s.strip()) <= set("^")]
        if carets and rest[0].startswith(("SyntaxError", "IndentationError", "TabError")):
            out.append(carets[0])
        return out
    return ["componentize: %s: %s" % (entry, rest[0])] + rest[1:]


def main_explain(args):
    log, entry, roots = args[0], args[1], args[2:]
    with open(log, encoding="utf-8", errors="replace") as f:
        text = f.read()
    for line in explain(text, entry, roots):
        print(line)
    return 0


if __name__ == "__main__":
    command, rest = sys.argv[1], sys.argv[2:]
    sys.exit({"scan": main_scan, "explain": main_explain}[command](rest))
