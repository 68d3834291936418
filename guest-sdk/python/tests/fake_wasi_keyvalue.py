"""A stand-in for componentize-py's bindings of `wasi:keyvalue` (store, atomics, batch) and
shardhost's `conditional` (worlds with `state`), answering from a
`shardhost.testing.MemoryStore` as the host would: its StateErrors come back as the bindings'
`Err` of an `Error_*` case. Strict about what the host is strict about: a bucket is used only
while alive, the batch and atomics functions take a live bucket, values are bytes."""

import types
from dataclasses import dataclass

from tests.support import Err


@dataclass
class Error_NoSuchStore:
    pass


@dataclass
class Error_AccessDenied:
    pass


@dataclass
class Error_Other:
    value: str


def _wire(e):
    """The bindings' Err of a StateError."""
    if e.kind == "no-such-store":
        return Err(Error_NoSuchStore())
    if e.kind == "access-denied":
        return Err(Error_AccessDenied())
    return Err(Error_Other(e.message))


class Service:
    """The modules (`modules()`), answering from `store`; `opened`: the buckets opened, in
    order; `live`: the bucket resources not dropped."""

    def __init__(self, store):
        self.store = store
        self.opened = []
        self.live = set()

    def call(self, f, *args):
        from shardhost.state import StateError

        try:
            return f(*args)
        except StateError as e:
            raise _wire(e) from None

    def modules(self):
        service = self
        store = types.ModuleType("wit_world.imports.wasi_keyvalue_store")
        store.Error_NoSuchStore = Error_NoSuchStore
        store.Error_AccessDenied = Error_AccessDenied
        store.Error_Other = Error_Other

        class Bucket:
            def __init__(self, name):
                self._name = name
                self._gone = False
                service.live.add(self)

            def _h(self):
                assert not self._gone, "a bucket used after it was dropped"
                return self._name

            def __enter__(self):
                return self

            def __exit__(self, *exc):
                assert not self._gone, "a bucket dropped twice"
                self._gone = True
                service.live.discard(self)

            def get(self, key):
                assert isinstance(key, str)
                return service.call(service.store.get, self._h(), key)

            def set(self, key, value):
                assert isinstance(key, str) and isinstance(value, bytes), (key, value)
                service.call(service.store.set, self._h(), key, value)

            def delete(self, key):
                service.call(service.store.delete, self._h(), key)

            def exists(self, key):
                return service.call(service.store.exists, self._h(), key)

            def list_keys(self, cursor):
                raise AssertionError("the SDK does not list keys")

        def open(identifier):  # noqa: A001 (the binding's name)
            service.opened.append(identifier)
            name = service.call(service.store.open, identifier)
            return Bucket(name)

        store.Bucket = Bucket
        store.open = open

        def bucket_of(b):
            assert isinstance(b, Bucket), "a wasi:keyvalue bucket, not %r" % (b,)
            return b._h()

        atomics = types.ModuleType("wit_world.imports.atomics")

        def increment(b, key, delta):
            assert isinstance(delta, int) and 0 <= delta < 2**64, delta
            return service.call(service.store.increment, bucket_of(b), key, delta)

        atomics.increment = increment

        batch = types.ModuleType("wit_world.imports.batch")

        def get_many(b, keys):
            assert isinstance(keys, list)
            return service.call(service.store.get_many, bucket_of(b), keys)

        def set_many(b, key_values):
            assert isinstance(key_values, list)
            assert all(isinstance(k, str) and isinstance(v, bytes) for k, v in key_values), key_values
            service.call(service.store.set_many, bucket_of(b), key_values)

        def delete_many(b, keys):
            assert isinstance(keys, list)
            service.call(service.store.delete_many, bucket_of(b), keys)

        batch.get_many, batch.set_many, batch.delete_many = get_many, set_many, delete_many

        conditional = types.ModuleType("wit_world.imports.conditional")

        def set_if_absent(b, key, value):
            assert isinstance(value, bytes)
            return service.call(service.store.set_if_absent, bucket_of(b), key, value)

        def compare_and_set(b, key, expected, value):
            assert isinstance(expected, bytes) and isinstance(value, bytes)
            return service.call(service.store.compare_and_set, bucket_of(b), key, expected, value)

        conditional.set_if_absent, conditional.compare_and_set = set_if_absent, compare_and_set
        return {
            "wasi_keyvalue_store": store,
            "atomics": atomics,
            "batch": batch,
            "conditional": conditional,
        }
