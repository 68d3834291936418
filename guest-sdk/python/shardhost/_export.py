"""What the decorators set up: the class componentize-py calls for the world's `handle`
export, and the adapters between the generated types and the SDK's.

componentize-py (0.25) imports the app module named on its command line and, for the
world-level export `handle`, instantiates the attribute `WitWorld` of that module (the
upper-camel-case name of the bindings module, `wit_world`) and calls its `handle` method. The
decorators put the SDK's `WitWorld` class there: into the module that defines the decorated
function and into every module whose top level is running at that moment (the app module,
when it imports the handler from another module). A `WitWorld` a module defines itself is
left alone. Not a public API: names here change without notice.
"""

import inspect
import os
import sys

from . import _host
from . import log as _log
from . import _outcome
from ._outcome import Outcome
from ._record import BatchInfo, Record

_registered = None  # (kind, function): kind "record" or "batch"

_HOW = "return shardhost.ack, shardhost.drop, shardhost.retry or shardhost.retry_after(ms)"


def register(kind, fn):
    global _registered
    if not callable(fn):
        raise TypeError("@shardhost.%s decorates a function, not %r" % (_decorator(kind), fn))
    if inspect.iscoroutinefunction(fn):
        raise TypeError("%s: handlers are plain functions; async ones are not supported" % _name(fn))
    if _registered is not None and not _same(_registered[1], fn):
        raise RuntimeError(
            "a component has one handler: %s is already @shardhost.%s, so %s cannot be"
            % (_name(_registered[1]), _decorator(_registered[0]), _name(fn))
        )
    _registered = (kind, fn)
    _install_world(fn)
    return fn


def reset():
    """Forgets the registered handler (tests)."""
    global _registered
    _registered = None


def registered():
    return _registered


def _decorator(kind):
    return "handler" if kind == "record" else "batch_handler"


def _name(fn):
    return "%s.%s" % (getattr(fn, "__module__", "?"), getattr(fn, "__qualname__", repr(fn)))


def _same(a, b):
    # The same function defined again (its module imported twice) counts as the same.
    return a is b or (
        getattr(a, "__module__", None) == getattr(b, "__module__", 0)
        and getattr(a, "__qualname__", None) == getattr(b, "__qualname__", 0)
    )


def _install_world(fn=None):
    """Puts `WitWorld` into the module defining `fn` and into every module whose top level is
    running now. `import shardhost` does this too inside a component, so that an app module
    without a decorated function fails its build with a message saying so."""
    targets = []
    module = sys.modules.get(getattr(fn, "__module__", None))
    if module is not None:
        targets.append(module.__dict__)
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == "<module>":
            targets.append(frame.f_globals)
        frame = frame.f_back
    for namespace in targets:
        name = namespace.get("__name__") or ""
        if name != "shardhost" and not name.startswith("shardhost."):
            namespace.setdefault("WitWorld", WitWorld)


class WitWorld:
    """The world's exports, as componentize-py calls them. componentize-py makes the one
    instance right after importing the app, while it builds the component."""

    def __init__(self):
        if _registered is None:
            raise RuntimeError(
                "no handler: the app imports shardhost but declares no handler; decorate one "
                "function with @shardhost.handler (per record) or @shardhost.batch_handler "
                "(per batch)"
            )

    def handle(self, info, records):
        return call(info, records, _host._backend.types)


def call(info, records, types):
    """One call of `handle`: the generated BatchInfo and the records (as `_record._lift` made
    them, or generated KinesisRecords) in, a generated BatchOutcome out. An exception is logged
    at error level (the host names it in its report of the failed call) and raised again,
    which traps."""
    backend = _host._backend
    backend.arm()
    _log._refresh()
    try:
        kind, result = run(info, records)
        if kind == "all":
            return types.BatchOutcome_All(_convert(types, [result])[0])
        return types.BatchOutcome_Each(_convert(types, result))
    except BaseException as e:
        _log._log_always(4, _describe(e))
        _log._failing()
        raise
    finally:
        _log._flush_streams()


_failed_record = None


def _records(records, attempt):
    """The call's records as SDK Records with the batch's attempt number."""
    if records and type(records[0]) is not Record:  # generated records: wrap them
        wrap = Record._wrap
        return [wrap(r, attempt) for r in records]
    if attempt != 1:
        for r in records:
            r._attempt = attempt
    return records


def run(info, records):
    """Runs the registered handler: ("each", [Outcome, ...]) or ("all", Outcome)."""
    global _failed_record
    _failed_record = None
    if _registered is None:
        raise RuntimeError(
            "no handler: decorate a function with @shardhost.handler or @shardhost.batch_handler"
        )
    kind, fn = _registered
    records = _records(records, info.attempt)
    if kind == "record":
        out = []
        append = out.append
        try:
            for r in records:
                o = fn(r)
                if o.__class__ is not Outcome:
                    _bad_outcome(fn, o)
                append(o)
        except BaseException:
            _failed_record = records[len(out)]
            raise
        return "each", out
    result = fn(BatchInfo._wrap(info), records)
    if isinstance(result, Outcome):
        return "all", result
    if result is None or isinstance(result, (str, bytes, dict)):
        _bad_batch(fn, result)
    try:
        outcomes = list(result)
    except TypeError:
        _bad_batch(fn, result)
    for i, o in enumerate(outcomes):
        if not isinstance(o, Outcome):
            raise TypeError(
                "batch handler %s: outcome %d of the list is %s, not an outcome (%s)"
                % (_name(fn), i, _show(o), _HOW)
            )
    if len(outcomes) != len(records):
        raise ValueError(
            "batch handler %s returned %d outcomes for %d records (one per record, in order, "
            "or one outcome for all)" % (_name(fn), len(outcomes), len(records))
        )
    return "each", outcomes


def _show(value):
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _bad_outcome(fn, o):
    if isinstance(o, Outcome):  # a subclass
        raise TypeError("handler %s returned an Outcome subclass; %s" % (_name(fn), _HOW))
    raise TypeError("handler %s returned %s, not an outcome: %s" % (_name(fn), _show(o), _HOW))


def _bad_batch(fn, result):
    raise TypeError(
        "batch handler %s returned %s: return one outcome for all records, or a list of one "
        "per record (%s)" % (_name(fn), _show(result), _HOW)
    )


_conv_cache = (None, None, None)


def _convert(types, outcomes):
    """[Outcome] -> [generated outcome]. ack, drop and retry are looked up by identity in a
    table made once per types module (a loop in C); a list with anything else (a retry_after,
    an Outcome built by hand) is converted one by one."""
    global _conv_cache
    if _conv_cache[0] is not types:
        by_kind = {
            "ack": types.Outcome_Ack(),
            "drop": types.Outcome_Drop(),
            "retry": types.Outcome_Retry(),
        }
        by_id = {id(getattr(_outcome, k)): w for k, w in by_kind.items()}
        _conv_cache = (types, by_id, by_kind)
    _, by_id, by_kind = _conv_cache
    try:
        return list(map(by_id.__getitem__, map(id, outcomes)))
    except KeyError:
        pass
    retry_after = types.Outcome_RetryAfter
    return [
        retry_after(o._delay_ms) if o._kind == "retry-after" else by_kind[o._kind]
        for o in outcomes
    ]


_SDK_DIR = os.path.dirname(os.path.abspath(__file__))


def _shown_path(filename):
    """A source path as a reader knows it: componentize-py mounts each `-p` directory as
    /0, /1, ...; those prefixes are dropped."""
    parts = filename.replace("\\", "/").split("/")
    if len(parts) > 2 and parts[0] == "" and parts[1].isdigit():
        return "/".join(parts[2:])
    return "/".join(parts[-2:])


def _describe(e):
    """One line naming an exception and where it was raised: the innermost frame outside
    the SDK (none when the SDK itself refused the handler's answer)."""
    where = ""
    frame = None
    tb = e.__traceback__
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        if os.path.dirname(os.path.abspath(filename)) != _SDK_DIR:
            frame = tb
        tb = tb.tb_next
    if frame is not None:
        code = frame.tb_frame.f_code
        where = " at %s:%d in %s" % (_shown_path(code.co_filename), frame.tb_lineno, code.co_name)
    message = str(e)
    line = "handler raised %s%s%s" % (type(e).__name__, ": " + message if message else "", where)
    r = _failed_record
    if r is not None:
        line += " (record sequence_number=%s partition_key=%s)" % (r.sequence_number, r.partition_key)
    return line
