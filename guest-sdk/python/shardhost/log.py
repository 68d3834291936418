"""Logging through the host.

Each line goes to the host's log, tagged there with the subscription, shard and handler
version. Two ways in, both filtered by the level the host records (`max-log-level`, asked
once per call), so a line the host would drop is never formatted or sent:

- Python's `logging`: inside a component the SDK puts a handler on the root logger that
  sends each record to the host, sets the root logger's level to NOTSET (the host decides)
  and follows the host's level with `logging.disable()`; `logger.debug(...)` under a host
  that records `info` returns after one cached level check.
- these functions: `shardhost.log.info("booked %s", id)` (%-style arguments, formatted only
  when the level is on), `trace`, `debug`, `warn`/`warning`, `error`, `log(level, ...)`, and
  `enabled(level)` to guard costly work.

Level mapping (Python levelno -> host): < 10 trace (`shardhost.log.TRACE` is 5), 10-19
debug, 20-29 info, 30-39 warn, >= 40 error (CRITICAL too).

Inside a component `print()` and `sys.stdout` go to the host at info, `sys.stderr` at warn
(the host itself discards the component's stdout and stderr), line by line.

Outside a component (unit tests) the functions write to standard error and `logging` is left
alone. While the component is being built (module import at pre-initialisation) there is no
host yet: lines go to the build's standard error.
"""

from __future__ import annotations

import io
import logging
import sys
from typing import Any, Optional, Union

from . import _host

__all__ = [
    "TRACE",
    "DEBUG",
    "INFO",
    "WARN",
    "WARNING",
    "ERROR",
    "CRITICAL",
    "enabled",
    "log",
    "trace",
    "debug",
    "info",
    "warn",
    "warning",
    "error",
    "HostHandler",
]

TRACE = 5
DEBUG = logging.DEBUG
INFO = logging.INFO
WARN = WARNING = logging.WARNING
ERROR = logging.ERROR
CRITICAL = logging.CRITICAL

if logging.getLevelName(TRACE) == "Level %d" % TRACE:
    logging.addLevelName(TRACE, "TRACE")

_NAMES = {
    "trace": TRACE,
    "debug": DEBUG,
    "info": INFO,
    "warn": WARN,
    "warning": WARN,
    "error": ERROR,
    "critical": CRITICAL,
}

# Python levels at or below this are not recorded by the host (as `logging.disable`).
# 0: everything is; a huge number: nothing is. Everything until the host says otherwise.
_NOTHING = 1 << 30
_disabled_upto = 0
# Set once the handler raised in the current call: what the runtime then prints to
# `sys.stderr` (the traceback) goes at debug, as the SDK's one error line already said it.
_failed = False
# The `logging.disable()` value the SDK set last; None: the SDK does not drive `logging`.
_logging_disable = None


def _levelno(level):
    if isinstance(level, int):
        return level
    try:
        return _NAMES[level.lower()]
    except (KeyError, AttributeError):
        raise ValueError("unknown log level %r" % (level,)) from None


def host_level(levelno):
    """The host level (0 trace ... 4 error) of a Python level number."""
    if levelno >= ERROR:
        return 4
    if levelno >= WARN:
        return 3
    if levelno >= INFO:
        return 2
    if levelno >= DEBUG:
        return 1
    return 0


# The Python level above which a host threshold records lines: host level -> `disable` value.
_DISABLE_FOR = {0: 0, 1: DEBUG - 1, 2: INFO - 1, 3: WARN - 1, 4: ERROR - 1, None: _NOTHING}


def enabled(level: Union[int, str] = INFO) -> bool:
    """Whether the host records lines of this level now (a Python level number, or a name:
    "trace", "debug", "info", "warn", "error")."""
    return _levelno(level) > _disabled_upto


def log(level: Union[int, str], message: Any, *args: object) -> None:
    """Writes a line at `level`; `message % args` when there are args (formatted only when
    the level is on)."""
    levelno = _levelno(level)
    if levelno > _disabled_upto:
        if args:
            message = message % args
        _host._backend.log(host_level(levelno), str(message))


def trace(message: Any, *args: object) -> None:
    """A line at trace level."""
    if TRACE > _disabled_upto:
        _host._backend.log(0, str(message % args if args else message))


def debug(message: Any, *args: object) -> None:
    """A line at debug level."""
    if DEBUG > _disabled_upto:
        _host._backend.log(1, str(message % args if args else message))


def info(message: Any, *args: object) -> None:
    """A line at info level."""
    if INFO > _disabled_upto:
        _host._backend.log(2, str(message % args if args else message))


def warn(message: Any, *args: object) -> None:
    """A line at warn level."""
    if WARN > _disabled_upto:
        _host._backend.log(3, str(message % args if args else message))


warning = warn


def error(message: Any, *args: object) -> None:
    """A line at error level."""
    if ERROR > _disabled_upto:
        _host._backend.log(4, str(message % args if args else message))


def _failing():
    """The handler raised: the rest of this call's stderr (the runtime's traceback) is debug."""
    global _failed
    _failed = True


def _log_always(level, message):
    """Whatever the threshold (the SDK's report of an exception: the host names the last
    error line of a failed call in its report)."""
    _host._backend.log(level, message)


def _refresh():
    """Asks the host which levels it records (once per call) and applies the answer."""
    global _disabled_upto, _logging_disable, _failed
    _failed = False
    upto = _DISABLE_FOR[_host._backend.max_log_level()]
    _disabled_upto = upto
    if _logging_disable is not None and upto != _logging_disable:
        logging.disable(upto)  # clears the loggers' level caches; only on a change
        _logging_disable = upto


class HostHandler(logging.Handler):
    """A `logging.Handler` that writes records to the host's log. Lines carry the logger's
    name unless it is the root logger; a record's exception is appended."""

    def __init__(self, level: Union[int, str] = logging.NOTSET) -> None:
        super().__init__(level)
        self.setFormatter(_Formatter())

    def emit(self, record: logging.LogRecord) -> None:
        try:
            _host._backend.log(host_level(record.levelno), self.format(record))
        except RecursionError:
            raise
        except Exception:
            self.handleError(record)


class _Formatter(logging.Formatter):
    def format(self, record):
        text = super().format(record)
        if record.name != "root":
            text = record.name + ": " + text
        return text


class _LineStream(io.TextIOBase):
    """`sys.stdout`/`sys.stderr` inside a component: complete lines to the host's log. Before
    the first call (the build) writes pass through to the original stream."""

    def __init__(self, levelno, original):
        super().__init__()
        self._levelno = levelno
        self._original = original
        self._buffer = []

    @property
    def encoding(self):
        return "utf-8"

    @property
    def errors(self):
        return "backslashreplace"

    def writable(self):
        return True

    def isatty(self):
        return False

    def _now(self) -> int:
        """This stream's level now: debug once the handler raised in this call (the runtime's
        traceback follows, and the SDK's error line already said it)."""
        return DEBUG if _failed and self._levelno >= WARN else self._levelno

    def write(self, s):
        if not isinstance(s, str):
            raise TypeError("write() argument must be str, not %s" % type(s).__name__)
        backend = _host._backend
        if not getattr(backend, "armed", True):
            if self._original is not None:
                return self._original.write(s)
            return len(s)
        if "\n" not in s:
            self._buffer.append(s)
            return len(s)
        lines = s.split("\n")
        lines[0] = "".join(self._buffer) + lines[0]
        rest = lines.pop()
        self._buffer = [rest] if rest else []
        levelno = self._now()
        if levelno > _disabled_upto:
            level = host_level(levelno)
            for line in lines:
                backend.log(level, line)
        return len(s)

    def flush(self):
        """Sends a partial line (the SDK flushes at the end of each call)."""
        if self._buffer:
            line = "".join(self._buffer)
            self._buffer = []
            levelno = self._now()
            if levelno > _disabled_upto and getattr(_host._backend, "armed", True):
                _host._backend.log(host_level(levelno), line)
        elif self._original is not None and not getattr(_host._backend, "armed", True):
            self._original.flush()


_handler: Optional[HostHandler] = None
_root_level: int = logging.NOTSET


def install_logging(streams: bool = True) -> None:
    """Routes `logging` (and, with `streams`, `sys.stdout`/`sys.stderr`) to the host. The SDK
    calls it on import inside a component; tests may call it (and `uninstall_logging`)."""
    global _handler, _logging_disable, _root_level
    root = logging.getLogger()
    if _handler is None:
        _handler = HostHandler()
        root.addHandler(_handler)
        _root_level = root.level
        root.setLevel(logging.NOTSET)
    _logging_disable = logging.root.manager.disable
    if streams and not isinstance(sys.stdout, _LineStream):
        sys.stdout = _LineStream(INFO, sys.stdout)
        sys.stderr = _LineStream(WARN, sys.stderr)


def uninstall_logging() -> None:
    """Undoes `install_logging`."""
    global _handler, _logging_disable
    if _handler is not None:
        logging.getLogger().removeHandler(_handler)
        logging.getLogger().setLevel(_root_level)
        _handler = None
    if _logging_disable is not None:
        logging.disable(logging.NOTSET)
        _logging_disable = None
    if isinstance(sys.stdout, _LineStream):
        sys.stdout = sys.stdout._original
    if isinstance(sys.stderr, _LineStream):
        sys.stderr = sys.stderr._original


def _flush_streams():
    for s in (sys.stdout, sys.stderr):
        if isinstance(s, _LineStream):
            s.flush()
