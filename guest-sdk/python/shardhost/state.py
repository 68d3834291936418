"""State: keys and values kept by the host between calls, through `wasi:keyvalue` (0.2 draft:
store, atomics, batch) and shardhost's `conditional` interface. The semantics every SDK
shares (buckets, limits, counters, `once`) are in guest-sdk/STATE.md::

    from shardhost import state

    seen = state.increment("seen:%s" % customer)         # bucket `default`
    orders = state.bucket("orders")                      # a bucket the config lists
    if orders.set_if_absent(order_id, record.data):
        ...

    booked = state.once("booked:%d" % id, lambda: book(shipment))   # False: done before

Keys are str (at most 1 KiB as UTF-8); values are bytes, or str (stored as UTF-8), at most
350 KiB. The module-level functions use the bucket `default`, which every grant opens;
`bucket(name)` gives another one the subscription's `[subscription.state] buckets` lists (else
each operation raises StateError `access-denied`). A bucket is opened on its first use and kept
for the life of the instance, so `bucket(...)` may be called at module top level; operations
may not (the top level runs when the component is built, where there is no host).

Every operation is one call to the host, which blocks until the store answered. A failure is a
`StateError` (`.kind`: "no-such-store", "access-denied" or "other"; `.message`: the host's
words): a key or value too large, a counter over a value `set` wrote, the store unreachable or
throttled. Treat it as a temporary failure (`retry_after`) unless you know better.

A component whose app imports this module (`from shardhost import state`, `import
shardhost.state`) is built for a world that includes `state`, which imports `wasi:keyvalue`
and `conditional`: the host runs it only for a subscription with a `[subscription.state]`
grant. Outside a component (unit tests) `shardhost.testing.FakeHost` answers from an in-memory
store with the host's rules (`testing.MemoryStore`); without one every operation raises
StateError.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple, Union

from . import _host
from . import log as _log
from ._state_error import KINDS, StateError  # noqa: F401  (KINDS: state.KINDS, as before)

__all__ = [
    "StateError",
    "Bucket",
    "bucket",
    "DEFAULT_BUCKET",
    "DONE",
    "get",
    "set",
    "delete",
    "exists",
    "increment",
    "set_if_absent",
    "compare_and_set",
    "get_many",
    "set_many",
    "delete_many",
    "once",
]

#: The bucket of the module-level functions; every state grant opens it.
DEFAULT_BUCKET = "default"

#: The value `once` marks a key with.
DONE = b"done"

_U64_MAX = 2**64 - 1

#: A value to store: bytes (bytearray, memoryview), or str (stored as UTF-8).
Value = Union[bytes, bytearray, memoryview, str]
#: What `set_many` takes: (key, value) pairs, or a mapping of key to value.
Entries = Union[Mapping[str, Value], Iterable[Tuple[str, Value]]]


def _key(key: str) -> str:
    if not isinstance(key, str):
        raise TypeError("a state key is a str, not %s" % type(key).__name__)
    return key


def _value(value: Value, what: str = "value") -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    raise TypeError(
        "a state %s is bytes or str, not %s (json.dumps an object first)" % (what, type(value).__name__)
    )


def _keys(keys: Iterable[str]) -> List[str]:
    if isinstance(keys, (str, bytes)):
        raise TypeError("keys is a list (any iterable) of str, not one %s" % type(keys).__name__)
    return [_key(k) for k in keys]


def _entries(entries: Entries) -> List[Tuple[str, bytes]]:
    items = entries.items() if isinstance(entries, Mapping) else entries
    pairs = []
    for entry in items:
        try:
            key, value = entry
        except (TypeError, ValueError):
            raise TypeError("set_many takes (key, value) pairs or a mapping, not %r" % (entry,)) from None
        pairs.append((_key(key), _value(value)))
    return pairs


class Bucket:
    """A bucket of the store: what the module-level functions do, in the bucket `name`. Get one
    with `bucket(name)`; it is opened at its first operation and kept for the instance's life."""

    __slots__ = ("name", "_opened")

    name: str
    _opened: Optional[Tuple[Any, Any]]

    def __init__(self, name: str) -> None:
        if not isinstance(name, str):
            raise TypeError("a bucket name is a str, not %s" % type(name).__name__)
        self.name = name
        self._opened = None  # (the store it was opened in, its handle)

    def __repr__(self) -> str:
        return "Bucket(%r)" % self.name

    def _use(self) -> Tuple[Any, Any]:
        """(store, handle): the bucket, opened in the current backend's store when it is not."""
        store = _host.backend().keyvalue()
        opened = self._opened
        if opened is None or opened[0] is not store:
            opened = (store, store.open(self.name))
            self._opened = opened
        return opened

    def get(self, key: str) -> Optional[bytes]:
        """The value of `key` (bytes), or None when it holds none. A counter (made by
        `increment`) reads as its decimal text."""
        key = _key(key)
        store, handle = self._use()
        return store.get(handle, key)

    def set(self, key: str, value: Value) -> None:
        """Sets `key` to `value` (bytes, or str as UTF-8), whatever it held."""
        key, value = _key(key), _value(value)
        store, handle = self._use()
        store.set(handle, key, value)

    def delete(self, key: str) -> None:
        """Removes `key` (nothing happens when it holds no value)."""
        key = _key(key)
        store, handle = self._use()
        store.delete(handle, key)

    def exists(self, key: str) -> bool:
        """Whether `key` holds a value."""
        key = _key(key)
        store, handle = self._use()
        return bool(store.exists(handle, key))

    def increment(self, key: str, delta: int = 1) -> int:
        """Adds `delta` (an int from 0 to 2**64 - 1: wasi:keyvalue counts up only) to the counter
        `key`, made at 0 when the key holds nothing, in one atomic step; answers the new value.
        A key that `set` wrote is not a counter: StateError "other"."""
        key = _key(key)
        if isinstance(delta, bool) or not isinstance(delta, int):
            raise TypeError("increment's delta is an int, not %s" % type(delta).__name__)
        if not 0 <= delta <= _U64_MAX:
            raise ValueError("increment's delta is from 0 to 2**64 - 1 (a counter only counts up), not %d" % delta)
        store, handle = self._use()
        return int(store.increment(handle, key, delta))

    def set_if_absent(self, key: str, value: Value) -> bool:
        """Sets `key` to `value` only if it holds no value, in one atomic step; answers whether
        it did."""
        key, value = _key(key), _value(value)
        store, handle = self._use()
        return bool(store.set_if_absent(handle, key, value))

    def compare_and_set(self, key: str, expected: Value, value: Value) -> bool:
        """Sets `key` to `value` only if it still holds exactly `expected` (as `get` read it),
        in one atomic step; answers whether it did (False also when it holds nothing)."""
        key, expected, value = _key(key), _value(expected, "expected value"), _value(value)
        store, handle = self._use()
        return bool(store.compare_and_set(handle, key, expected, value))

    def get_many(self, keys: Iterable[str]) -> List[Optional[bytes]]:
        """The values of `keys`, in their order: a list with bytes, or None for a key that holds
        no value."""
        keys = _keys(keys)
        store, handle = self._use()
        found = list(store.get_many(handle, keys))
        if len(found) != len(keys):
            raise StateError("other", "the store answered %d entries for %d keys" % (len(found), len(keys)), self.name)
        return [None if entry is None else entry[1] for entry in found]

    def set_many(self, entries: Entries) -> None:
        """Sets several keys: `entries` is an iterable of (key, value) pairs, or a mapping. Not
        atomic: after a failure some may be set."""
        pairs = _entries(entries)
        store, handle = self._use()
        store.set_many(handle, pairs)

    def delete_many(self, keys: Iterable[str]) -> None:
        """Removes several keys (not atomic: after a failure some may be removed)."""
        keys = _keys(keys)
        store, handle = self._use()
        store.delete_many(handle, keys)

    def once(self, key: str, effect: Callable[[], object]) -> bool:
        """Runs `effect()` unless `key` is marked done; marks it done when `effect` returns.
        Answers True when the effect ran now, False when the key was already marked (then the
        effect is not called).

        If `effect` raises, the exception goes on and the key stays unmarked: the next call (a
        retry, a replay) runs it again. The key is marked with `set_if_absent(key, DONE)`; if
        another call marked it while this one ran the effect, the effect may have run twice,
        which is logged at warn. Between the effect and the mark the instance can die, so an
        effect should still be idempotent on its own side (an idempotency key): `once` makes a
        repeat rare and cheap, not impossible."""
        if not callable(effect):
            raise TypeError("once(key, effect): effect is a function, not %s" % type(effect).__name__)
        key = _key(key)
        if self.exists(key):
            return False
        ran = effect()
        if inspect.isawaitable(ran):
            # A coroutine has not run yet: marking it done would lose the effect for good.
            if hasattr(ran, "close"):
                ran.close()
            raise TypeError(
                "once(key, effect): effect returned an awaitable, which handlers do not run; "
                "make effect a plain function"
            )
        try:
            marked = self.set_if_absent(key, DONE)
        except StateError as e:
            _log.warn(
                "once: the effect for %r (bucket %r) ran but its mark was not written (%s): it "
                "runs again on the next delivery",
                key,
                self.name,
                e,
            )
            raise
        if not marked:
            _log.warn(
                "once: another call marked %r (bucket %r) done while this one ran its effect: "
                "the effect may have run twice",
                key,
                self.name,
            )
        return True


_buckets: Dict[str, Bucket] = {}


def bucket(name: str) -> Bucket:
    """The bucket `name` (the same object for the same name). Nothing is asked of the host
    until its first operation; a name the subscription's `[subscription.state] buckets` does not
    list makes every operation raise StateError "access-denied"."""
    found = _buckets.get(name)
    if found is None:
        found = _buckets[name] = Bucket(name)
    return found


_default = bucket(DEFAULT_BUCKET)


def get(key: str) -> Optional[bytes]:
    """`Bucket.get` in the bucket `default`: bytes, or None."""
    return _default.get(key)


def set(key: str, value: Value) -> None:  # noqa: A001 (the shared API's name)
    """`Bucket.set` in the bucket `default`."""
    _default.set(key, value)


def delete(key: str) -> None:
    """`Bucket.delete` in the bucket `default`."""
    _default.delete(key)


def exists(key: str) -> bool:
    """`Bucket.exists` in the bucket `default`."""
    return _default.exists(key)


def increment(key: str, delta: int = 1) -> int:
    """`Bucket.increment` in the bucket `default`: the new value."""
    return _default.increment(key, delta)


def set_if_absent(key: str, value: Value) -> bool:
    """`Bucket.set_if_absent` in the bucket `default`: whether it wrote."""
    return _default.set_if_absent(key, value)


def compare_and_set(key: str, expected: Value, value: Value) -> bool:
    """`Bucket.compare_and_set` in the bucket `default`: whether it wrote."""
    return _default.compare_and_set(key, expected, value)


def get_many(keys: Iterable[str]) -> List[Optional[bytes]]:
    """`Bucket.get_many` in the bucket `default`: a list of bytes or None, in the order of keys."""
    return _default.get_many(keys)


def set_many(entries: Entries) -> None:
    """`Bucket.set_many` in the bucket `default`."""
    _default.set_many(entries)


def delete_many(keys: Iterable[str]) -> None:
    """`Bucket.delete_many` in the bucket `default`."""
    _default.delete_many(keys)


def once(key: str, effect: Callable[[], object]) -> bool:
    """`Bucket.once` in the bucket `default`: whether the effect ran now."""
    return _default.once(key, effect)
