"""The conformance handler in Python (tests/conformance/README.md): a per-batch handler whose
records' partition keys are commands. Its twins are tests/conformance/rust and js; the cases
are tests/conformance/contract.ndjson, http.ndjson (the `http` and `config:NAME` commands) and
state.ndjson (the `state` command).

Build: ./build (next to this file) writes conformance.wasm, for the world handler+http+state
(the app imports shardhost.http and shardhost.state).
"""

import json

import shardhost
from shardhost import config, http, state

# 2020-01-01T00:00:00Z in milliseconds since the epoch.
EPOCH_2020_MS = 1577836800000
U64_MAX = 2**64 - 1
U32_MAX = 2**32 - 1
PUBLISH_STREAM = "conformance-out"
PUBLISH_KEY = "k"


def number(text, limit=U64_MAX):
    """An unsigned number as Rust's `str::parse` reads it (ASCII digits, an optional leading
    `+`, at most `limit`), or None."""
    digits = text[1:] if text.startswith("+") else text
    if not digits or not (digits.isascii() and digits.isdigit()):
        return None
    n = int(digits)
    return n if n <= limit else None


def outcome(name):
    """`ack`, `drop`, `retry` or `retry-after:N` as an Outcome; None for anything else."""
    if name == "ack":
        return shardhost.ack
    if name == "drop":
        return shardhost.drop
    if name == "retry":
        return shardhost.retry
    if name.startswith("retry-after:"):
        ms = number(name[len("retry-after:"):])
        if ms is not None:
            return shardhost.retry_after(ms)
    return None


def verdict(ok):
    return shardhost.ack if ok else shardhost.drop


def meta_ok(info, record):
    seq = record.sequence_number
    return (
        bool(seq)
        and seq.isascii()
        and seq.isdigit()
        and record.sub_sequence_number == 0
        and record.arrival_millis > EPOCH_2020_MS
        and bool(info.stream)
        and bool(info.shard_id)
    )


def command(info, record):
    """The outcome of one record whose partition key is a command: `ack`, `drop`, `retry`,
    `retry-after:N`, or a verb and an argument after the first colon (none: empty)."""
    key = record.partition_key
    simple = outcome(key)
    if simple is not None:
        return simple
    verb, _, arg = key.partition(":")
    if verb == "size":
        n = number(arg)
        return verdict(n is not None and len(record.data) == n)
    if verb == "sum":
        n = number(arg)
        return verdict(n is not None and sum(record.data) == n)
    if verb in ("text", "json"):
        try:
            record.text() if verb == "text" else record.json()
        except shardhost.DecodeError:
            return shardhost.drop
        return shardhost.ack
    if verb == "attempt":
        n = number(arg, U32_MAX)
        return verdict(n is not None and record.attempt == n)
    if verb == "meta":
        return verdict(meta_ok(info, record))
    if verb == "publish":
        try:
            shardhost.publish(PUBLISH_STREAM, PUBLISH_KEY, record.data)
        except shardhost.PublishError as e:
            shardhost.log.warn("publish refused: %s", e.reason)
            return shardhost.retry
        return shardhost.ack
    if verb == "seek":
        try:
            shardhost.seek(arg)
        except shardhost.SeekError as e:
            shardhost.log.warn("seek refused: %s", e.reason)
            return shardhost.retry
        return shardhost.ack
    if verb == "log":
        shardhost.log.info("%s", record.data.decode("utf-8", "replace"))
        return shardhost.ack
    if verb == "config":
        value = config.get(arg)
        if value is None:
            return shardhost.drop
        return shardhost.ack if value == record.data.decode("utf-8", "replace") else shardhost.retry
    if key == "state":
        return state_command(record)
    if verb == "raise":
        raise RuntimeError("raised on purpose")
    return shardhost.drop


def text(value):
    """A stored value as text (None stays None)."""
    return None if value is None else value.decode("utf-8", "replace")


class EffectFailed(Exception):
    """What the effect of a `once` with `"fail": true` raises."""


def state_result(spec):
    """The result of one state operation (README "State"), as a JSON value: what the operation
    answered, or {"error": KIND} when it raised a StateError ({"error": "effect"}: the effect of
    a `once` raised)."""
    target = state.bucket(spec["bucket"]) if "bucket" in spec else state
    op = spec.get("op")
    key = "k" * spec["key_size"] if "key_size" in spec else spec.get("key")
    value = b"x" * spec["value_size"] if "value_size" in spec else spec.get("value", "").encode("utf-8")
    try:
        if op == "get":
            return text(target.get(key))
        if op == "exists":
            return target.exists(key)
        if op == "set":
            return target.set(key, value)
        if op == "delete":
            return target.delete(key)
        if op == "increment":
            return target.increment(key, spec.get("delta", 1))
        if op == "set_if_absent":
            return target.set_if_absent(key, value)
        if op == "compare_and_set":
            return target.compare_and_set(key, spec.get("expected", "").encode("utf-8"), value)
        if op == "get_many":
            return [text(v) for v in target.get_many(spec["keys"])]
        if op == "set_many":
            return target.set_many([(k, v.encode("utf-8")) for k, v in spec["entries"]])
        if op == "delete_many":
            return target.delete_many(spec["keys"])
        if op == "once":
            def effect():
                if spec.get("fail"):
                    raise EffectFailed("failed on purpose")

            try:
                return target.once(key, effect)
            except EffectFailed:
                return {"error": "effect"}
    except state.StateError as e:
        shardhost.log.info("state: %s: %s", op, e)
        return {"error": e.kind}
    return {"error": "no such op: %r" % (op,)}


def same(a, b):
    """Deep equality of JSON values (a boolean is not a number, 1 and 1.0 are one number)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def state_command(record):
    """A `state` record: ack when the operation's result is its `expect`, else drop."""
    try:
        spec = record.json()
        if not isinstance(spec, dict):
            raise ValueError("not an object")
        result = state_result(spec)
    except (ValueError, TypeError, KeyError) as e:  # a malformed case (DecodeError is a ValueError)
        shardhost.log.warn("state: a case this handler cannot run: %s: %s", type(e).__name__, e)
        return shardhost.drop
    expect = spec.get("expect")
    if same(result, expect):
        return shardhost.ack
    shardhost.log.warn("state: %s gave %s, expected %s", spec.get("op"), json.dumps(result), json.dumps(expect))
    return shardhost.drop


def http_request(record):
    """The request an `http` record asks for, and the body it expects (None: any)."""
    spec = json.loads(record.data)
    request = http.Request(
        spec.get("method", "GET"),
        spec["url"],
        headers=spec.get("headers"),
        body=spec.get("body"),
    )
    return request, spec.get("expect_body")


# What a failed request answers: retry-after of its code.
HTTP_ERRORS = ((http.Denied, 1), (http.Timeout, 2), (http.ConnectError, 3), (http.BodyTooLarge, 4))


def http_outcome(answer, expect_body):
    if isinstance(answer, http.HttpError):
        code = next((c for kind, c in HTTP_ERRORS if isinstance(answer, kind)), 5)
        shardhost.log.info("http: %s", answer)
        return shardhost.retry_after(code)
    if expect_body is not None and answer.body.decode("utf-8", "replace") != expect_body:
        shardhost.log.info("http: %s answered %r, not %r", answer.url, answer.body[:200], expect_body)
        return shardhost.retry_after(6)
    return shardhost.retry_after(answer.status)


def http_records(records):
    """{index: outcome} of the `http` records, every request sent at once."""
    at = [i for i, r in enumerate(records) if r.partition_key == "http"]
    if not at:
        return {}
    asked = [http_request(records[i]) for i in at]
    answers = http.send_all([request for request, _ in asked])
    return {i: http_outcome(a, expect) for i, a, (_, expect) in zip(at, answers, asked)}


@shardhost.batch_handler
def conformance(info, records):
    if records and records[0].partition_key.startswith("all:"):
        # One outcome for the batch; drop when the rest of the key is not an outcome.
        return outcome(records[0].partition_key[len("all:"):]) or shardhost.drop
    sent = http_records(records)
    outcomes = [sent[i] if i in sent else command(info, r) for i, r in enumerate(records)]
    if any(r.partition_key == "wrong-shape" for r in records):
        # One outcome fewer than records: the call must fail.
        outcomes.pop()
    return outcomes
