"""State through `wasi:keyvalue` (store, atomics, batch: the 0.2 draft) and shardhost's
`conditional` interface, as componentize-py binds them for the worlds that include `state`:
each operation of `shardhost.state` is one call, the bindings' `Err`
becomes a `StateError`.

Imported only inside a component, by `_host.WitBackend`; in the worlds without state there is
no `wasi:keyvalue` and `load()` answers None. A bucket (a resource) is kept for the instance's
life, by `shardhost.state`; it is never dropped.
"""

from componentize_py_types import Err


def load():
    """The store, or None when the component's world has no `wasi:keyvalue`."""
    try:
        from wit_world.imports import atomics, batch, conditional, wasi_keyvalue_store
    except ImportError:
        return None
    global StateError
    from ._state_error import StateError

    return Store(wasi_keyvalue_store, atomics, batch, conditional)


class Store:
    """What `shardhost.state` asks of a backend: `open(name)`, then operations on its handle
    (here the bindings' `Bucket`), each raising StateError."""

    def __init__(self, store, atomics, batch, conditional):
        self._store = store
        self._atomics = atomics
        self._batch = batch
        self._conditional = conditional
        self._kinds = (
            (store.Error_NoSuchStore, "no-such-store"),
            (store.Error_AccessDenied, "access-denied"),
        )

    def _error(self, error, bucket):
        """The StateError of a `wasi:keyvalue` error (the value of the bindings' Err)."""
        for case, kind in self._kinds:
            if isinstance(error, case):
                return StateError(kind, None, bucket)
        if isinstance(error, self._store.Error_Other):
            return StateError("other", str(error.value), bucket)
        return StateError("other", "the store answered %r" % (error,), bucket)

    def _call(self, bucket, f, *args):
        try:
            return f(*args)
        except Err as e:
            raise self._error(e.value, bucket) from None

    def open(self, name):
        return (name, self._call(name, self._store.open, name))

    def get(self, handle, key):
        name, b = handle
        return self._call(name, b.get, key)

    def set(self, handle, key, value):
        name, b = handle
        self._call(name, b.set, key, value)

    def delete(self, handle, key):
        name, b = handle
        self._call(name, b.delete, key)

    def exists(self, handle, key):
        name, b = handle
        return self._call(name, b.exists, key)

    def increment(self, handle, key, delta):
        name, b = handle
        return self._call(name, self._atomics.increment, b, key, delta)

    def set_if_absent(self, handle, key, value):
        name, b = handle
        return self._call(name, self._conditional.set_if_absent, b, key, value)

    def compare_and_set(self, handle, key, expected, value):
        name, b = handle
        return self._call(name, self._conditional.compare_and_set, b, key, expected, value)

    def get_many(self, handle, keys):
        name, b = handle
        return self._call(name, self._batch.get_many, b, keys)

    def set_many(self, handle, pairs):
        name, b = handle
        self._call(name, self._batch.set_many, b, pairs)

    def delete_many(self, handle, keys):
        name, b = handle
        self._call(name, self._batch.delete_many, b, keys)
