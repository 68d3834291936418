"""The answers a handler gives."""

from __future__ import annotations

import datetime
from typing import Any, Optional, Tuple, Union

__all__ = ["Outcome", "ack", "drop", "retry", "retry_after"]

_U64_MAX = (1 << 64) - 1


class Outcome:
    """What becomes of one record. Immutable; compare with `==`.

    Use the module's values rather than this class: `shardhost.ack`, `shardhost.drop`,
    `shardhost.retry` and `shardhost.retry_after(ms)`.

    - `kind`: `"ack"`, `"drop"`, `"retry"` or `"retry-after"` (the WIT case names);
    - `delay_ms`: the delay of a `retry-after`, else None;
    - `settles`: True for ack and drop (the checkpoint may move past the record).
    """

    __slots__ = ("_kind", "_delay_ms", "_wit")

    _kind: str
    _delay_ms: Optional[int]

    def __init__(self, kind: str, delay_ms: Optional[int] = None) -> None:
        if kind not in ("ack", "drop", "retry", "retry-after"):
            raise ValueError("unknown outcome %r" % (kind,))
        if (kind == "retry-after") != (delay_ms is not None):
            raise ValueError("only retry-after takes a delay")
        object.__setattr__(self, "_kind", kind)
        object.__setattr__(self, "_delay_ms", delay_ms)
        object.__setattr__(self, "_wit", None)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("outcomes are immutable")

    @property
    def kind(self) -> str:
        return self._kind

    @property
    def delay_ms(self) -> Optional[int]:
        return self._delay_ms

    @property
    def settles(self) -> bool:
        return self._kind in ("ack", "drop")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Outcome):
            return NotImplemented
        return self._kind == other._kind and self._delay_ms == other._delay_ms

    def __hash__(self) -> int:
        return hash((self._kind, self._delay_ms))

    def __repr__(self) -> str:
        if self._kind == "retry-after":
            return "shardhost.retry_after(%d)" % self._delay_ms
        return "shardhost." + self._kind

    def __reduce__(self) -> Tuple[Any, Tuple[str, Optional[int]]]:
        return (Outcome, (self._kind, self._delay_ms))


#: Handled: the shard's checkpoint may move past the record.
ack = Outcome("ack")
#: Retired without handling, because it can never succeed: settles like `ack`.
drop = Outcome("drop")
#: Not handled now. Without a retry cap the record is held (the checkpoint stops in front of
#: it); under a cap a copy comes back with the next attempt number.
retry = Outcome("retry")


def retry_after(delay: Union[int, datetime.timedelta]) -> Outcome:
    """`retry`, after at least `delay`: whole milliseconds (an int) or a `datetime.timedelta`
    (rounded down to milliseconds). Saturates at 2**64 - 1 ms."""
    if isinstance(delay, datetime.timedelta):
        if delay < datetime.timedelta(0):
            raise ValueError("retry_after: negative delay %r" % (delay,))
        ms = delay // datetime.timedelta(milliseconds=1)
    elif isinstance(delay, int) and not isinstance(delay, bool):
        if delay < 0:
            raise ValueError("retry_after: negative delay %d ms" % delay)
        ms = delay
    else:
        raise TypeError(
            "retry_after takes milliseconds as an int or a datetime.timedelta, not %s"
            % type(delay).__name__
        )
    return Outcome("retry-after", min(ms, _U64_MAX))
