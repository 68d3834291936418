"""The seam between the SDK and whoever answers its host calls.

In a component (componentize-py), `WitBackend` calls the generated bindings of the world's
imports: `host` and `wasi:config/store` here, `wasi:http` through `_wasi_http` (when the world
includes `http`), `wasi:keyvalue` and `conditional` through `_wasi_keyvalue` (when it includes
`state`); they are imported in these modules and nowhere else, and only there. In plain CPython (a handler's unit tests, the SDK's own)
`NativeBackend` writes log lines to standard error, answers `publish`, `seek`, every HTTP
request and every state operation with an error, and reads config values from the environment
(`SHARDHOST_CONFIG_<NAME>`), as the Rust SDK does in a native build.
`shardhost.testing.FakeHost` is a third backend that records what the handler did and answers
what the test says (state from an in-memory store, `testing.MemoryStore`).

Levels are ints here: 0 trace, 1 debug, 2 info, 3 warn, 4 error (the WIT enum's order).
"""

from __future__ import annotations

import os
import sys
from typing import Union

from ._state_error import StateError

__all__ = ["HostError", "PublishError", "SeekError", "publish", "seek"]

LEVEL_NAMES = ("trace", "debug", "info", "warn", "error")

NO_HOST = "not running inside shardhost (native build)"

NO_HTTP = (
    "this component was built without HTTP (its world does not include `http`): the build "
    "imports wasi:http when the app imports shardhost.http, or with `componentize --http`"
)

NO_STATE = (
    "this component was built without state (its world does not include `state`): the build "
    "imports wasi:keyvalue when the app imports shardhost.state, or with `componentize --state`"
)


class NoStore:
    """The store of a backend without one: every operation raises StateError "other"."""

    def __init__(self, reason):
        self.reason = reason

    def open(self, name):
        raise StateError("other", self.reason, name)


def config_env_name(name):
    """The environment variable a config value comes from outside a component:
    `SHARDHOST_CONFIG_<NAME>`, the name upper-cased with every other character as `_` (the
    Rust SDK's rule)."""
    return "SHARDHOST_CONFIG_" + "".join(
        c.upper() if c.isascii() and c.isalnum() else "_" for c in name
    )


def http_failures(round_, reason):
    """Every request of a round failed with `reason` (an InvalidUrl stays what it is)."""
    from ._http_types import HttpError  # (loaded with shardhost.http, which asked)

    return [url if isinstance(url, HttpError) else HttpError(r.url, reason) for r, url in round_]


class HostError(Exception):
    """The host refused a call; `reason` is its answer."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class PublishError(HostError):
    """`publish` failed: no such stream, throttled, not allowed, the call's timeout, ..."""


class SeekError(HostError):
    """`seek` was refused: not a sequence number this reader delivered, ..."""


class NativeBackend:
    """Plain CPython: no host."""

    in_component = False

    def arm(self):
        pass

    def log(self, level, message):
        stream = sys.stderr
        if stream is not None:
            stream.write("[%5s] %s\n" % (LEVEL_NAMES[level], message))

    def max_log_level(self):
        return 0

    def publish(self, stream, partition_key, data):
        raise PublishError(NO_HOST)

    def seek(self, sequence_number):
        raise SeekError(NO_HOST)

    def config_get(self, name):
        return os.environ.get(config_env_name(name))

    def config_all(self):
        return {}

    def http_exchange(self, round_):
        return http_failures(round_, NO_HOST)

    def keyvalue(self):
        return _NO_HOST_STORE


class WitBackend:
    """Inside a component built by componentize-py.

    Nothing may call the host before the first call of `handle`: the app is imported while
    componentize-py builds the component (pre-initialisation), where no host answers. Until
    then (`armed` False) log lines go to the build's standard error, and `publish`, `seek`,
    config values, HTTP requests and state operations raise."""

    in_component = True

    def __init__(self):
        # The generated bindings; imported while the component is built, so that an
        # instance starts with them loaded.
        import wit_world.imports.host as host
        from componentize_py_types import Err

        try:  # the worlds without `state`
            import wit_world.imports.store as store
        except ImportError:  # with state: two `store` interfaces, named by their packages
            import wit_world.imports.wasi_config_store as store
        try:  # the worlds without `http`
            import wit_world.imports.types as types
        except ImportError:  # with HTTP: two `types` interfaces, named by their packages
            import wit_world.imports.shardhost_handler_types as types
        from . import _wasi_http, _wasi_keyvalue

        self._store = store
        self._http = _wasi_http.load()
        kv = _wasi_keyvalue.load()
        self._keyvalue = NoStore(NO_STATE) if kv is None else kv

        # componentize-py (0.25) looks the record constructors of the bindings up after it
        # imports the app, and calls them with the fields in WIT order: pointing
        # `KinesisRecord` at `_lift` makes each record an SDK Record directly, with no
        # generated object to wrap. (If a runtime builds generated records anyway, the SDK
        # wraps them: `_export._records`.)
        from . import _record

        types.KinesisRecord = _record._lift
        self._host = host
        self.types = types
        self._err = Err
        self._levels = (
            host.Level.TRACE,
            host.Level.DEBUG,
            host.Level.INFO,
            host.Level.WARN,
            host.Level.ERROR,
        )
        self.armed = False
        self._stderr = sys.stderr

    def arm(self):
        self.armed = True

    def log(self, level, message):
        if self.armed:
            self._host.log(self._levels[level], message)
        elif self._stderr is not None:
            self._stderr.write("[%5s] %s\n" % (LEVEL_NAMES[level], message))

    def max_log_level(self):
        if not self.armed:
            return 0
        level = self._host.max_log_level()
        return None if level is None else level.value

    def publish(self, stream, partition_key, data):
        if not self.armed:
            raise PublishError("publish is only possible during a call of the handler")
        try:
            return self._host.publish(stream, partition_key, data)
        except self._err as e:
            raise PublishError(str(e.value)) from None

    def seek(self, sequence_number):
        if not self.armed:
            raise SeekError("seek is only possible during a call of the handler")
        try:
            self._host.seek(sequence_number)
        except self._err as e:
            raise SeekError(str(e.value)) from None

    def _callable(self, what):
        if not self.armed:
            raise RuntimeError(
                "%s only while the host calls the handler, not at module top level (the app's "
                "top level runs when the component is built)" % what
            )

    def config_get(self, name):
        self._callable("config values can be read")
        try:
            return self._store.get(name)
        except self._err:
            return None

    def config_all(self):
        self._callable("config values can be read")
        try:
            return dict(self._store.get_all())
        except self._err:
            return {}

    def http_exchange(self, round_):
        self._callable("HTTP requests can be sent")
        if self._http is None:
            return http_failures(round_, NO_HTTP)
        return self._http.exchange(round_)

    def keyvalue(self):
        self._callable("state can be used")
        return self._keyvalue


_NO_HOST_STORE = NoStore(NO_HOST)


def _detect():
    try:
        import componentize_py_runtime  # noqa: F401  (exists only inside a component)
    except ImportError:
        return NativeBackend()
    return WitBackend()


_backend = _detect()


def backend():
    return _backend


def set_backend(new):
    """Swaps the backend (for tests); answers the previous one."""
    global _backend
    old, _backend = _backend, new
    return old


def publish(stream: str, partition_key: str, data: Union[bytes, bytearray, memoryview, str]) -> str:
    """Puts a record into a Kinesis stream through the host; answers its sequence number.

    `data` is bytes (or bytearray/memoryview), or str, sent as UTF-8. Raises PublishError with
    the host's reason when it could not (and always outside a component).

    Delivery is at-least-once: a call that is replayed publishes again, so make what you
    publish safe to repeat (key it by stream, shard and sequence number)."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    elif not isinstance(data, bytes):
        data = bytes(data)
    return _backend.publish(str(stream), str(partition_key), data)


def seek(sequence_number: str) -> None:
    """Asks the host to restart reading of the calling shard at this sequence number (one
    this reader delivered, e.g. of a record answered with `retry`), once the call returns.
    Raises SeekError with the host's reason when it refuses."""
    _backend.seek(str(sequence_number))
