"""Helpers for unit tests of handlers in plain CPython (no component, no host).

Call the decorated function directly with `shardhost.Record(...)`: logging goes to standard
error, `publish`/`seek`, HTTP requests and state operations fail, and config values come from
the environment, as in a native Rust test. For more, `FakeHost` records what the handler logs,
publishes, seeks and requests, answers its config values and HTTP requests as the test says,
keeps its state in a `MemoryStore` (the host's rules, in memory), and `call` runs the
registered handler the way the host does (per-record or per-batch, outcomes checked)::

    from shardhost import Record, http, testing

    with testing.FakeHost(max_level="info") as host:
        outcomes = testing.call([Record("pk", "1", b'{"id": 1}')])
    assert host.lines == [("info", "...")]

    carrier = {"https://carrier.example/book": http.Response(201)}
    with testing.FakeHost(config={"carrier_url": "https://carrier.example/book"}, http=carrier) as host:
        ...
    assert [r.url for r in host.requests] == ["https://carrier.example/book"]

    store = testing.MemoryStore(buckets=["orders"])     # shared: a second instance, a replay
    with testing.FakeHost(state=store):
        ...
    assert store.value("booked:1") == b"done"
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from . import _export, _host
from . import log as _log
from ._outcome import Outcome
from ._record import BatchInfo, Record, _lift
from .http import HttpError, Request, Response

#: What answers one request: a Response, a status, or an HttpError (returned or raised).
Answer = Union[Response, int, HttpError]
#: `FakeHost(http=...)`: a function of the request, or a dict of URL to an answer (or to a
#: function of the request).
HttpAnswers = Union[Callable[[Request], Answer], Mapping[str, Union[Answer, Callable[[Request], Answer]]]]

__all__ = ["FakeHost", "MemoryStore", "call", "reset"]

#: The host's limits: a key's UTF-8 bytes, a value's bytes.
KEY_MAX = 1024
VALUE_MAX = 358400
MANY_MAX = 10000
_U64_MAX = 2**64 - 1


class MemoryStore:
    """The host's state store, in memory, with its rules: the bucket `default` and those in
    `buckets` open (any other is refused: StateError "access-denied"), a key of more than 1 KiB
    (UTF-8) or a value of more than 350 KiB (358400 bytes) refused ("other"), a counter read as
    its decimal text, `increment` over a value `set` wrote refused ("other"). With `error` set
    (a message), every operation fails with StateError "other" and that message, as when the
    store is unreachable or throttled.

    Give one to `FakeHost(state=...)`; the same store in several FakeHosts is what several
    instances (or a replay after a crash) share. For the test's own look:

    - `value(key, bucket="default")`: what `get` would answer (bytes or None);
    - `items(bucket="default")`: every key and value, a dict;
    - `put(key, value, bucket="default")`: writes without the handler (an int: a counter);
    - `calls`: every operation the handler asked for, as (name, bucket, key or keys, ...).
    """

    def __init__(self, buckets: Iterable[str] = (), error: Optional[str] = None) -> None:
        if isinstance(buckets, str):
            raise TypeError("buckets is a list of names, not one str")
        self.buckets: List[str] = ["default"] + [b for b in buckets if b != "default"]
        self.error = error
        self.calls: List[Tuple[Any, ...]] = []
        self._data: Dict[str, Dict[str, Union[bytes, int]]] = {}  # bucket -> {key: bytes (set) or int (a counter)}

    # for tests

    def value(self, key: str, bucket: str = "default") -> Optional[bytes]:
        return self._read(self._data.get(bucket, {}).get(key))

    def items(self, bucket: str = "default") -> Dict[str, bytes]:
        return {k: self._read(v) or b"" for k, v in self._data.get(bucket, {}).items()}

    def put(self, key: str, value: Union[bytes, str, int], bucket: str = "default") -> None:
        if isinstance(value, str):
            value = value.encode("utf-8")
        self._data.setdefault(bucket, {})[key] = value

    # the store (what shardhost.state asks of a backend's keyvalue())

    def open(self, name: str) -> str:
        self.calls.append(("open", name))
        self._fail(name)
        if name not in self.buckets:
            raise _state().StateError("access-denied", None, name)
        return name

    def get(self, bucket: str, key: str) -> Optional[bytes]:
        self.calls.append(("get", bucket, key))
        return self._read(self._bucket(bucket, key).get(key))

    def set(self, bucket: str, key: str, value: bytes) -> None:
        self.calls.append(("set", bucket, key, value))
        self._bucket(bucket, key)[key] = self._checked(bucket, value)

    def delete(self, bucket: str, key: str) -> None:
        self.calls.append(("delete", bucket, key))
        self._bucket(bucket, key).pop(key, None)

    def exists(self, bucket: str, key: str) -> bool:
        self.calls.append(("exists", bucket, key))
        return key in self._bucket(bucket, key)

    def increment(self, bucket: str, key: str, delta: int) -> int:
        self.calls.append(("increment", bucket, key, delta))
        values = self._bucket(bucket, key)
        now = values.get(key, 0)
        if not isinstance(now, int):
            raise _state().StateError("other", "%r holds a value that set wrote, not a counter" % key, bucket)
        if now + delta > _U64_MAX:
            raise _state().StateError("other", "counter %r would pass 2^64 - 1" % key, bucket)
        values[key] = now + delta
        return now + delta

    def set_if_absent(self, bucket: str, key: str, value: bytes) -> bool:
        self.calls.append(("set_if_absent", bucket, key, value))
        values = self._bucket(bucket, key)
        value = self._checked(bucket, value)
        if key in values:
            return False
        values[key] = value
        return True

    def compare_and_set(self, bucket: str, key: str, expected: bytes, value: bytes) -> bool:
        self.calls.append(("compare_and_set", bucket, key, expected, value))
        values = self._bucket(bucket, key)
        value = self._checked(bucket, value)
        if key not in values or self._read(values[key]) != expected:
            return False
        values[key] = value
        return True

    def get_many(self, bucket: str, keys: List[str]) -> List[Optional[Tuple[str, Optional[bytes]]]]:
        self.calls.append(("get_many", bucket, list(keys)))
        values = self._bucket(bucket, *keys)
        return [None if k not in values else (k, self._read(values[k])) for k in keys]

    def set_many(self, bucket: str, pairs: List[Tuple[str, bytes]]) -> None:
        self.calls.append(("set_many", bucket, list(pairs)))
        values = self._bucket(bucket, *(k for k, _ in pairs))
        checked = [(k, self._checked(bucket, v)) for k, v in pairs]
        values.update(checked)

    def delete_many(self, bucket: str, keys: List[str]) -> None:
        self.calls.append(("delete_many", bucket, list(keys)))
        values = self._bucket(bucket, *keys)
        for k in keys:
            values.pop(k, None)

    def _fail(self, bucket: str) -> None:
        if self.error is not None:
            raise _state().StateError("other", str(self.error), bucket)

    def _bucket(self, bucket: str, *keys: str) -> Dict[str, Union[bytes, int]]:
        self._fail(bucket)
        if len(keys) > MANY_MAX:
            raise _state().StateError(
                "other", "%d keys in one call: at most %d" % (len(keys), MANY_MAX), bucket
            )
        for key in keys:
            size = len(key.encode("utf-8"))
            if size > KEY_MAX:
                raise _state().StateError(
                    "other", "a key of %d bytes: the most is %d (1 KiB)" % (size, KEY_MAX), bucket
                )
        return self._data.setdefault(bucket, {})

    def _checked(self, bucket: str, value: bytes) -> bytes:
        if len(value) > VALUE_MAX:
            raise _state().StateError(
                "other", "a value of %d bytes: the most is %d (350 KiB)" % (len(value), VALUE_MAX), bucket
            )
        return bytes(value)

    @staticmethod
    def _read(value: Union[bytes, int, None]) -> Optional[bytes]:
        if value is None or isinstance(value, bytes):
            return value
        return str(value).encode("ascii")


def _state() -> Any:
    from . import state

    return state


class FakeHost:
    """A host for tests. Use as a context manager (it replaces the SDK's backend inside).

    - `lines`: the log lines, as (level name, message);
    - `published`: (stream, partition_key, data) per successful publish;
    - `seeks`: the sequence numbers asked for;
    - `max_level`: the level the host records ("trace" ... "error", or None for nothing);
    - `publish_error` / `seek_error`: when set, the reason the call is refused with;
    - `config`: the subscription's config values, a dict (`shardhost.config.get` reads it);
    - `http`: what answers HTTP requests: a function `(request) -> answer`, or a dict
      `{url: answer}` (a URL it does not hold is denied, as an origin the subscription does
      not allow). An answer is an `http.Response` (its `url` filled in when empty), an int
      status, an `http.HttpError` (returned or raised; its `url` filled in when None) or, in
      the dict, a function of the request. Redirects are followed by the SDK as in a
      component. None (the default): every request fails, as outside shardhost;
    - `requests`: every `http.Request` sent, in order (a redirect is one more);
    - `state`: the store `shardhost.state` works on, a `MemoryStore` (by default a new one, with
      the bucket `default` only).
    """

    in_component = False

    def __init__(self, max_level: Optional[str] = "trace", publish_error: Optional[str] = None,
                 seek_error: Optional[str] = None, config: Optional[Mapping[str, object]] = None,
                 http: Optional[HttpAnswers] = None, state: Optional[MemoryStore] = None) -> None:
        if max_level is not None and max_level not in _host.LEVEL_NAMES:
            raise ValueError("max_level is one of %s or None" % (_host.LEVEL_NAMES,))
        self.max_level = max_level
        self.publish_error = publish_error
        self.seek_error = seek_error
        self.config = dict(config or {})
        self.http = http
        self.state = MemoryStore() if state is None else state
        self.lines: List[Tuple[str, str]] = []
        self.published: List[Tuple[str, str, bytes]] = []
        self.seeks: List[str] = []
        self.requests: List[Request] = []
        self.armed = True
        self._previous: Any = None

    # backend interface

    def arm(self) -> None:
        pass

    def log(self, level: int, message: str) -> None:
        self.lines.append((_host.LEVEL_NAMES[level], message))

    def max_log_level(self) -> Optional[int]:
        return None if self.max_level is None else _host.LEVEL_NAMES.index(self.max_level)

    def publish(self, stream: str, partition_key: str, data: bytes) -> str:
        if self.publish_error is not None:
            raise _host.PublishError(self.publish_error)
        self.published.append((stream, partition_key, data))
        return "%056d" % len(self.published)

    def seek(self, sequence_number: str) -> None:
        if self.seek_error is not None:
            raise _host.SeekError(self.seek_error)
        self.seeks.append(sequence_number)

    def config_get(self, name: str) -> Optional[str]:
        value = self.config.get(name)
        return None if value is None else str(value)

    def config_all(self) -> Dict[str, str]:
        return {k: str(v) for k, v in self.config.items()}

    def http_exchange(self, round_: List[Tuple[Request, Any]]) -> List[Any]:
        from . import http

        answers = []
        for request, url in round_:
            if isinstance(url, http.HttpError):
                answers.append(url)
                continue
            self.requests.append(request)
            answers.append(self._answer(http, request, url))
        return answers

    def _answer(self, http: Any, request: Request, url: Any) -> Any:
        if self.http is None:
            return http.HttpError(request.url, _host.NO_HOST)
        answer: Any = self.http
        if isinstance(answer, dict):
            answer = answer.get(request.url, answer.get(str(url)))
            if answer is None:
                return http.Denied(url.origin(), request.url)
        try:
            if callable(answer):
                answer = answer(request)
        except http.HttpError as e:
            answer = e
        if isinstance(answer, bool) or not isinstance(answer, (int, http.Response, http.HttpError)):
            raise TypeError(
                "FakeHost(http=...) answered %r for %s %s: answer an http.Response, an int status "
                "or an http.HttpError" % (answer, request.method, request.url)
            )
        if isinstance(answer, int):
            return http.Response(answer, url=str(url))
        if isinstance(answer, http.HttpError):
            if answer.url is None:
                answer.url = request.url
            return answer
        if not answer.url:
            return http.Response(answer.status, answer.body, answer.headers, str(url))
        return answer

    def keyvalue(self) -> MemoryStore:
        return self.state

    # context manager

    def __enter__(self) -> FakeHost:
        self._previous = _host.set_backend(self)
        _log._refresh()
        return self

    def __exit__(self, *exc: object) -> None:
        _host.set_backend(self._previous)
        _log._refresh()


def call(records: Sequence[Record], info: Optional[BatchInfo] = None) -> List[Outcome]:
    """Runs the registered handler over `records` (a list of `shardhost.Record`) as one call
    from the host would, and answers the outcomes: a list with one per record (a per-batch
    handler's single outcome is given for every record). Raises what the handler raises, and
    TypeError/ValueError for a wrong answer (not an outcome, a wrong number of them)."""
    if info is None:
        info = BatchInfo("test-stream", "shardId-000000000000")
    raw_info = SimpleNamespace(
        stream=info.stream,
        shard_id=info.shard_id,
        millis_behind_latest=info.millis_behind_latest,
        attempt=info.attempt,
    )
    _log._refresh()
    copies = [
        _lift(r.partition_key, r.sequence_number, r.sub_sequence_number, r.arrival_millis,
              r.data, info.attempt)
        for r in records
    ]
    kind, result = _export.run(raw_info, copies)
    if kind == "all":
        return [result] * len(records)
    return result


def reset() -> None:
    """Forgets the registered handler, so a test can register another."""
    _export.reset()
