"""`StateError`, what a failed operation of `shardhost.state` raises: in a module of its own, so
that the modules that make one (`_host`, `_wasi_keyvalue`) need not import `shardhost.state`,
which imports them. Users name it `shardhost.state.StateError` (its module says so).
"""

from __future__ import annotations

from typing import Callable, Dict, Optional

KINDS = ("no-such-store", "access-denied", "other")


class StateError(Exception):
    """A state operation failed. `kind` is the `wasi:keyvalue` error's case: "no-such-store",
    "access-denied" (a bucket the subscription's `[subscription.state]` does not list) or
    "other" (a key or value too large, a counter over a value `set` wrote, the store unreachable
    or throttled); `message` says more (for "other", the host's own words); `bucket` is the
    bucket's name when known."""

    def __init__(self, kind: str, message: Optional[str] = None, bucket: Optional[str] = None) -> None:
        if kind not in KINDS:
            raise ValueError("a StateError's kind is one of %s, not %r" % (KINDS, kind))
        if message is None:
            message = _DEFAULT_MESSAGES[kind](bucket)
        super().__init__(kind, message)
        self.kind = kind
        self.message = message
        self.bucket = bucket

    def __str__(self) -> str:
        return "%s: %s" % (self.kind, self.message)

    def __repr__(self) -> str:
        return "StateError(%r, %r)" % (self.kind, self.message)


_DEFAULT_MESSAGES: Dict[str, Callable[[Optional[str]], str]] = {
    "no-such-store": lambda b: "the host has no store%s" % ("" if b is None else " for bucket %r" % b),
    "access-denied": lambda b: "%s is not granted to this subscription ([subscription.state] buckets)"
    % ("the bucket" if b is None else "bucket %r" % b),
    "other": lambda b: "the store failed",
}


StateError.__module__ = "shardhost.state"
