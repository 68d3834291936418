"""Strict JSON decoding for `Record.json()`: the JSON rule every shardhost SDK follows, written
down once in guest-sdk/JSON.md. In short:

- the data must be UTF-8 (checked before this module sees it); a leading byte order mark is
  not whitespace, so it is an error; whitespace is space, tab, CR and LF only;
- one JSON value and nothing after it but whitespace;
- no `NaN`, `Infinity` or `-Infinity` (Python's `json` accepts them), no trailing commas, no
  comments, no control characters inside strings;
- in the whole document, read or not: no object with the same key twice (compared after
  unescaping); no unpaired surrogate escape (`"\\ud800"`), which Python's `json` would hand
  over as a lone surrogate; no number that is infinite when rounded to a double (`1e400`, a
  400-digit integer); nesting at most 128 arrays/objects deep.

Numbers: an integer literal (no fraction, no exponent) in [-2**63, 2**64) is an `int`; every
other number is a `float`, including `-0`, `1.0`, `1e2` and integer literals past 64 bits, as
the Rust SDK's serde_json reads them. So `type(v) is int and v >= 0` is exactly what a Rust
`u64` field accepts.
"""

import json
import re

__all__ = ["JsonError", "loads"]

MAX_DEPTH = 128
_U64_END = 1 << 64
_I64_MIN = -(1 << 63)
_INF = float("inf")


class JsonError(ValueError):
    """The text is not JSON by the rule above. `.msg`, `.pos` (character offset or None)."""

    def __init__(self, msg, pos=None):
        self.msg = msg
        self.pos = pos
        super().__init__(msg if pos is None else "%s (at character %d)" % (msg, pos))


class _Reject(Exception):
    """Raised inside the json hooks; turned into JsonError."""


def _big_float(s):
    """A number literal that is not a 64-bit integer, as a float (correctly rounded, as in
    every SDK); rejects one that rounds to infinity."""
    f = float(s)
    if f == _INF or f == -_INF:
        raise _Reject("number out of range: " + (s if len(s) <= 40 else s[:37] + "..."))
    return f


def _parse_int(s):
    if len(s) <= 20:
        v = int(s)
        if _I64_MIN <= v < _U64_END:
            if v == 0 and s[0] == "-":
                return -0.0  # serde_json: `-0` is a float
            return v
    return _big_float(s)


def _parse_constant(name):
    raise _Reject("%s is not JSON" % name)


def _pairs(pairs):
    d = dict(pairs)
    if len(d) != len(pairs):
        seen = set()
        for k, _ in pairs:
            if k in seen:
                raise _Reject("duplicate key %s" % json.dumps(k))
            seen.add(k)
    return d


_decoder = json.JSONDecoder(
    parse_float=_big_float,
    parse_int=_parse_int,
    parse_constant=_parse_constant,
    object_pairs_hook=_pairs,
    strict=True,
)

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)
_BRACKET = re.compile(r"[\[\]{}]")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _too_deep(text):
    """Whether `text`, if it is JSON, nests deeper than MAX_DEPTH."""
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return False
    depth = 0
    for m in _BRACKET.finditer(_STRING.sub("", text)):
        if m.group() in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                return True
        else:
            depth -= 1
    return False


def _check_strings(value):
    """Raises _Reject on a string (or key) holding a lone surrogate."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            try:
                v.encode("utf-8")
            except UnicodeEncodeError:
                raise _Reject("lone surrogate escape in a string") from None
        elif isinstance(v, dict):
            stack.extend(v.keys())
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)


def _strict(text):
    """The full rule, for any text (the reference the fast path must agree with)."""
    if _too_deep(text):
        raise JsonError("nested more than %d arrays/objects deep" % MAX_DEPTH)
    try:
        value = _decoder.decode(text)
    except json.JSONDecodeError as e:
        raise JsonError(e.msg, e.pos) from None
    except _Reject as e:
        raise JsonError(str(e)) from None
    except RecursionError:  # cannot happen below MAX_DEPTH; kept as a guard
        raise JsonError("nested too deep") from None
    if "\\u" in text and _SURROGATE_ESCAPE.search(text):
        try:
            _check_strings(value)
        except _Reject as e:
            raise JsonError(str(e)) from None
    return value


# The fast path: CPython's own C scanner with the number hooks of the full rule (called only
# for numbers) but no object hook (a Python call per object, the larger cost); then a count of
# colons proves that no key repeats. Whatever that cannot prove goes to `_strict`, which
# decides.
_scan = json.JSONDecoder(
    parse_float=_big_float,
    parse_int=_parse_int,
    parse_constant=_parse_constant,
    strict=True,
).scan_once


def _count_keys(value):
    """The number of keys in all the objects of `value`."""
    keys = 0
    stack = [value]
    pop = stack.pop
    push = stack.extend
    while stack:
        v = pop()
        t = type(v)
        if t is dict:
            keys += len(v)
            push(v.values())
        elif t is list:
            push(v)
    return keys


def loads(text):
    """Decodes `text` (a str) by the rule above; raises JsonError."""
    if "\\u" in text or (
        len(text) > MAX_DEPTH and text.count("[") + text.count("{") > MAX_DEPTH
    ):
        return _strict(text)  # surrogate escapes and deep nesting: the full rule
    try:
        value, end = _scan(text, 0)
    except Exception:  # not JSON, leading whitespace, NaN, 1e400, ...: `_strict` says why
        return _strict(text)
    if end != len(text) and text[end:].strip(" \t\n\r"):
        return _strict(text)
    # Every key is followed by a colon, so an object that holds as many keys as the text has
    # colons holds every key of the text once: none repeats (and no other object has keys).
    if type(value) is dict:
        if len(value) == text.count(":"):
            return value
    elif ":" not in text:
        return value
    # Otherwise, when no colon follows whitespace, `"` + `:` counts every key (and perhaps
    # more, inside strings); the parsed objects hold that many keys only if none repeats.
    quoted = text.count('":')
    if quoted != text.count(":") and (
        " :" in text or "\t:" in text or "\n:" in text or "\r:" in text
    ):
        return _strict(text)
    if _count_keys(value) != quoted:
        return _strict(text)
    return value
