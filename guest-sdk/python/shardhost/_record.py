"""The records a handler receives and where they come from."""

from __future__ import annotations

from typing import Any, Optional, Union

from . import _json

__all__ = ["Record", "BatchInfo", "DecodeError"]


class DecodeError(ValueError):
    """Why `Record.text()` or `Record.json()` could not decode a record.

    `kind` is `"utf8"` (the data is not UTF-8 text; `offset` is the byte offset of the first
    invalid byte) or `"json"` (the text is not JSON by the SDK's rule; `offset` is the
    character offset where decoding stopped, when known)."""

    def __init__(self, kind: str, message: str, offset: Optional[int] = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.offset = offset


class Record:
    """One Kinesis record, as the host delivered it (read-only).

    Handlers get their records from the host; `Record(partition_key, sequence_number, data)`
    builds one for a unit test (`data`: bytes, or str as UTF-8)."""

    __slots__ = ("_pk", "_seq", "_sub", "_ts", "_data", "_attempt")

    def __init__(
        self,
        partition_key: str,
        sequence_number: str,
        data: Union[bytes, bytearray, memoryview, str] = b"",
        *,
        sub_sequence_number: int = 0,
        arrival_millis: int = 0,
        attempt: int = 1,
    ) -> None:
        if isinstance(data, str):
            data = data.encode("utf-8")
        self._pk = str(partition_key)
        self._seq = str(sequence_number)
        self._sub = int(sub_sequence_number)
        self._ts = int(arrival_millis)
        self._data = bytes(data)
        self._attempt = int(attempt)

    @classmethod
    def _wrap(cls, raw, attempt):
        # From a generated KinesisRecord (when the bindings made those): no copy of the data.
        return _lift(
            raw.partition_key,
            raw.sequence_number,
            raw.sub_sequence_number,
            raw.approximate_arrival_timestamp,
            raw.data,
            attempt,
        )

    @property
    def partition_key(self) -> str:
        """The partition key the producer gave the record."""
        return self._pk

    @property
    def sequence_number(self) -> str:
        """The record's sequence number in its shard (a decimal string)."""
        return self._seq

    @property
    def sub_sequence_number(self) -> int:
        """The position of this user record inside a KPL aggregate; 0 for a plain record."""
        return self._sub

    @property
    def arrival_millis(self) -> int:
        """When Kinesis accepted the record, in milliseconds since the Unix epoch."""
        return self._ts

    @property
    def attempt(self) -> int:
        """1 on the first delivery; 2, 3, ... for copies under a retry cap."""
        return self._attempt

    @property
    def data(self) -> bytes:
        """The record's data (bytes), as the producer put it."""
        return self._data

    def text(self) -> str:
        """The data as UTF-8 text (a leading byte order mark is kept, as in Rust).

        Raises DecodeError (kind "utf8") when it is not UTF-8."""
        try:
            return self._data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise DecodeError(
                "utf8",
                "record data is not UTF-8 text (invalid byte at offset %d)" % e.start,
                e.start,
            ) from None

    def json(self) -> Any:
        """The data decoded as JSON by the rule every shardhost SDK follows (guest-sdk/JSON.md;
        the SDK's README.md, "JSON"): dicts, lists, str, int (integer literals in [-2**63, 2**64)),
        float (every other number: `1.0` and `1e3` too), bool and None.

        Raises DecodeError: kind "utf8" when the data is not UTF-8, "json" when the text is
        not JSON by that rule. The shape (which keys, which types) is the handler's to check.
        """
        try:
            text = self._data.decode("utf-8")
        except UnicodeDecodeError:
            text = self.text()  # raises the DecodeError
        try:
            return _json.loads(text)
        except _json.JsonError as e:
            raise DecodeError("json", "record data is not valid JSON: %s" % e, e.pos) from None

    def __bytes__(self) -> bytes:
        return bytes(self._data)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Record):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def _key(self):
        return (
            self.partition_key,
            self.sequence_number,
            self.sub_sequence_number,
            self.arrival_millis,
            self.data,
            self._attempt,
        )

    def __repr__(self) -> str:
        parts = [
            "partition_key=%r" % self.partition_key,
            "sequence_number=%r" % self.sequence_number,
        ]
        if self.sub_sequence_number:
            parts.append("sub_sequence_number=%d" % self.sub_sequence_number)
        parts.append("arrival_millis=%d" % self.arrival_millis)
        if self._attempt != 1:
            parts.append("attempt=%d" % self._attempt)
        data = self.data
        try:
            shown = repr(data.decode("utf-8"))
        except UnicodeDecodeError:
            shown = repr(data)
        if len(shown) > 200:
            shown = shown[:197] + "..."
        parts.append("data=" + shown)
        return "Record(%s)" % ", ".join(parts)


_new_record = Record.__new__


def _lift(partition_key, sequence_number, sub_sequence_number, arrival, data, attempt=1):
    """Makes a Record straight from the fields of a WIT `kinesis-record`, in the record's
    field order: the bindings call this instead of building their own record class, which the
    SDK would then wrap (`_host` installs it). The bindings give no attempt: the batch's is set
    by `_export._records` when it is not 1."""
    self = _new_record(Record)
    self._pk = partition_key
    self._seq = sequence_number
    self._sub = sub_sequence_number
    self._ts = arrival
    self._data = data
    self._attempt = attempt
    return self


class BatchInfo:
    """Where a batch comes from, and which delivery it is (read-only).

    `BatchInfo(stream, shard_id)` builds one for a unit test."""

    __slots__ = ("_stream", "_shard_id", "_millis_behind_latest", "_attempt")

    def __init__(self, stream: str, shard_id: str, *, millis_behind_latest: Optional[int] = None,
                 attempt: int = 1) -> None:
        self._stream = str(stream)
        self._shard_id = str(shard_id)
        self._millis_behind_latest = millis_behind_latest
        self._attempt = int(attempt)

    @classmethod
    def _wrap(cls, info):
        return cls(
            info.stream,
            info.shard_id,
            millis_behind_latest=info.millis_behind_latest,
            attempt=info.attempt,
        )

    @property
    def stream(self) -> str:
        """The stream's name."""
        return self._stream

    @property
    def shard_id(self) -> str:
        """The shard's id, e.g. `shardId-000000000000`."""
        return self._shard_id

    @property
    def millis_behind_latest(self) -> Optional[int]:
        """How far the reader is behind the tip of the shard, in ms; None when unknown."""
        return self._millis_behind_latest

    @property
    def attempt(self) -> int:
        """1 for a first delivery; higher for a copy published under a retry cap."""
        return self._attempt

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, BatchInfo):
            return NotImplemented
        return (self._stream, self._shard_id, self._millis_behind_latest, self._attempt) == (
            other._stream,
            other._shard_id,
            other._millis_behind_latest,
            other._attempt,
        )

    def __hash__(self) -> int:
        return hash((self._stream, self._shard_id, self._millis_behind_latest, self._attempt))

    def __repr__(self) -> str:
        return "BatchInfo(stream=%r, shard_id=%r, millis_behind_latest=%r, attempt=%d)" % (
            self._stream,
            self._shard_id,
            self._millis_behind_latest,
            self._attempt,
        )
