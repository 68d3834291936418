"""Write shardhost handlers in Python: one function and one decorator.

A handler is a WebAssembly component that shardhost calls with batches of Kinesis records
and that answers with an outcome per record. Build it with componentize-py (see README.md)::

    import shardhost

    @shardhost.handler
    def ship(record: shardhost.Record) -> shardhost.Outcome:
        try:
            shipment = record.json()
        except shardhost.DecodeError as e:
            shardhost.log.warn("not a shipment: %s", e)
            return shardhost.drop
        ...
        return shardhost.ack

Outcomes: `ack` and `drop` settle a record (the checkpoint may move past it); `retry` and
`retry_after(ms)` leave it unhandled (held, or sent again under the subscription's retry
cap). A per-batch handler, `@shardhost.batch_handler def f(info, records)`, returns one
outcome for all records or a list of one per record.

An exception in a handler fails the call (the component traps): the SDK first logs it at
error level, so the host's report of the failure names it. The host then bisects the batch.

The contract (the same as for Rust handlers): an instance is reused across calls, and thrown
away after a failed call; calls can be replayed, so handlers must be idempotent; order holds
per shard (and per partition key with lanes); each call has a time and memory budget.

`shardhost.config.get(name)` reads the subscription's `[subscription.config]` values;
`shardhost.http` (imported by the app: `from shardhost import http`) sends HTTP requests to the
origins its `[subscription.http]` allows; `shardhost.state` (`from shardhost import state`)
keeps keys and values in the store its `[subscription.state]` grants.
"""

from typing import TYPE_CHECKING, Any, Callable, Iterable, List, TypeVar, Union

from . import _host
from . import config
from . import log
from . import _export
from ._export import register as _register
from ._host import HostError, PublishError, SeekError, publish, seek
from ._outcome import Outcome, ack, drop, retry, retry_after
from ._record import BatchInfo, DecodeError, Record

__all__ = [
    "handler",
    "batch_handler",
    "Record",
    "BatchInfo",
    "DecodeError",
    "Outcome",
    "ack",
    "drop",
    "retry",
    "retry_after",
    "publish",
    "seek",
    "HostError",
    "PublishError",
    "SeekError",
    "log",
    "config",
    "http",
    "state",
]

__version__ = "0.1.0"

if TYPE_CHECKING:
    from . import http, state  # noqa: F401  (imported on first use: __getattr__)

#: A per-record handler: `(record: Record) -> Outcome`.
RecordHandler = TypeVar("RecordHandler", bound=Callable[[Record], Outcome])
#: A per-batch handler: `(info: BatchInfo, records: list[Record]) -> Outcome | list[Outcome]`.
BatchHandler = TypeVar(
    "BatchHandler", bound=Callable[[BatchInfo, List[Record]], Union[Outcome, Iterable[Outcome]]]
)


def handler(fn: RecordHandler) -> RecordHandler:
    """Declares the component's per-record handler: `fn(record: Record) -> Outcome`.

    It is called once per record, in shard order; the outcomes go back in the same order.
    Use it once per component, and not together with `batch_handler`. Returns `fn` unchanged,
    so it can still be called directly in tests."""
    return _register("record", fn)


def batch_handler(fn: BatchHandler) -> BatchHandler:
    """Declares the component's per-batch handler:
    `fn(info: BatchInfo, records: list[Record]) -> Outcome | list[Outcome]`.

    Return one outcome for every record of the batch, or a list (any iterable) with exactly
    one outcome per record, in order. Use it once per component, and not together with
    `handler`. Returns `fn` unchanged."""
    return _register("batch", fn)


def __getattr__(name: str) -> Any:
    # `shardhost.http` and `shardhost.state` without an import of them: imported on first use.
    # (An app that sends requests or keeps state should still name them in an import or as
    # `shardhost.http` / `shardhost.state`, which the build tool looks for to give the
    # component wasi:http / wasi:keyvalue.)
    if name in ("http", "state"):
        import importlib

        return importlib.import_module("." + name, __name__)
    raise AttributeError("module 'shardhost' has no attribute %r" % name)


if _host.backend().in_component:
    log.install_logging()
    _export._install_world()
