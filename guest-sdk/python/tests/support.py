"""Shared by the tests: stand-ins for the generated bindings. (The SDK is the `shardhost` in
this directory, on the path of `python3 -m unittest` run here.)"""

import types
from dataclasses import dataclass
from enum import Enum
from typing import List, Optional

def fake_types():
    """A stand-in for `wit_world.imports.types` (same names and fields as generated)."""
    m = types.ModuleType("fake_wit_types")

    @dataclass
    class KinesisRecord:
        partition_key: str
        sequence_number: str
        sub_sequence_number: int
        approximate_arrival_timestamp: int
        data: bytes

    @dataclass
    class BatchInfo:
        stream: str
        shard_id: str
        millis_behind_latest: Optional[int]
        attempt: int

    @dataclass
    class Outcome_Ack:
        pass

    @dataclass
    class Outcome_Drop:
        pass

    @dataclass
    class Outcome_Retry:
        pass

    @dataclass
    class Outcome_RetryAfter:
        value: int

    @dataclass
    class BatchOutcome_All:
        value: object

    @dataclass
    class BatchOutcome_Each:
        value: List[object]

    for c in (KinesisRecord, BatchInfo, Outcome_Ack, Outcome_Drop, Outcome_Retry,
              Outcome_RetryAfter, BatchOutcome_All, BatchOutcome_Each):
        setattr(m, c.__name__, c)
    return m


class Level(Enum):
    TRACE = 0
    DEBUG = 1
    INFO = 2
    WARN = 3
    ERROR = 4


@dataclass(frozen=True)
class Err(Exception):
    value: object


def fake_bindings(max_level=Level.TRACE, publish_error=None, seek_error=None, config=None, http=None,
                  state=None):
    """Modules standing in for what componentize-py generates, to put in sys.modules:
    `wit_world`, `wit_world.imports`, `wit_world.imports.host`, `wit_world.imports.types`,
    `wit_world.imports.store` (answering `config`), `componentize_py_types`. The host module
    records its calls in `.calls`. With `http` (a `fake_wasi_http.Server`), the world includes
    `http` (`handler+http`): the wasi:http modules are there too, and `types` is named
    `shardhost_handler_types`, as componentize-py names it beside wasi:http's `types`. With
    `state` (a `fake_wasi_keyvalue.Service`), the world includes `state` (`handler+state`, or
    `handler+http+state` with `http`): the wasi:keyvalue and conditional modules are there, and
    `store` is named `wasi_config_store` beside wasi:keyvalue's `store`."""
    host = types.ModuleType("wit_world.imports.host")
    host.Level = Level
    host.calls = []

    def log(level, message):
        assert isinstance(level, Level), level
        host.calls.append(("log", level.name.lower(), message))

    def max_log_level():
        host.calls.append(("max_log_level",))
        return host.max_level

    def publish(stream, key, data):
        assert isinstance(data, bytes)
        host.calls.append(("publish", stream, key, data))
        if host.publish_error:
            raise Err(host.publish_error)
        return "49600000000000000000000000000000000000000000000000000042"

    def seek(seq):
        host.calls.append(("seek", seq))
        if host.seek_error:
            raise Err(host.seek_error)

    host.log, host.max_log_level, host.publish, host.seek = log, max_log_level, publish, seek
    host.max_level = max_level
    host.publish_error = publish_error
    host.seek_error = seek_error
    store = types.ModuleType("wit_world.imports.store")
    store.values = dict(config or {})
    store.error = None

    def get(key):
        if store.error is not None:
            raise Err(store.error)
        return store.values.get(key)

    def get_all():
        if store.error is not None:
            raise Err(store.error)
        return list(store.values.items())

    store.get, store.get_all = get, get_all
    world = types.ModuleType("wit_world")
    world.__path__ = []
    imports = types.ModuleType("wit_world.imports")
    imports.__path__ = []
    world.imports = imports
    imports.host = host
    store_name = "store" if state is None else "wasi_config_store"
    setattr(imports, store_name, store)
    types_name = "types" if http is None else "shardhost_handler_types"
    setattr(imports, types_name, fake_types())
    cpt = types.ModuleType("componentize_py_types")
    cpt.Err = Err
    modules = {
        "wit_world": world,
        "wit_world.imports": imports,
        "wit_world.imports.host": host,
        "wit_world.imports." + store_name: store,
        "wit_world.imports." + types_name: getattr(imports, types_name),
        "componentize_py_types": cpt,
    }
    for service in (http, state):
        if service is not None:
            for name, module in service.modules().items():
                setattr(imports, name, module)
                modules["wit_world.imports." + name] = module
    return modules
