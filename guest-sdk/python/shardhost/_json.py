"""Strict JSON decoding for `Record.json()`: accepts and rejects what the Rust SDK's
`serde_json` (1.0, default features) accepts and rejects.

The rule, in full (README.md "JSON"):

- the data must be UTF-8 (checked before this module sees it); a leading byte order mark is
  not whitespace, so it is an error; whitespace is space, tab, CR and LF only;
- one JSON value and nothing after it but whitespace;
- no `NaN`, `Infinity` or `-Infinity` (Python's `json` accepts them), no trailing commas, no
  comments, no control characters inside strings;
- no unpaired surrogate escape (`"\\ud800"`), which Python's `json` would hand over as a
  lone surrogate;
- no number whose magnitude `serde_json` cannot hold in an f64 (`1e400`; the decision is
  `serde_json`'s own, computed the way it does, also at the edge of the range);
- nesting at most 127 arrays/objects deep (`serde_json`'s recursion limit);
- no object with the same key twice (`serde_json` rejects a repeated field of a struct; this
  decoder cannot know which keys a handler reads, so it rejects every repetition).

Numbers come out as `serde_json::Value` holds them: an integer literal in
[-2**63, 2**64) is an `int`; every other number is a `float`, including `-0`, `1.0`, `1e2`
and integers past 64 bits. So `isinstance(v, int) and not isinstance(v, bool) and v >= 0`
is exactly what a Rust `u64` field accepts.
"""

import json
import re

__all__ = ["JsonError", "loads"]

MAX_DEPTH = 127
_U64_END = 1 << 64
_I64_MIN = -(1 << 63)
_I32_MAX = (1 << 31) - 1

# 1e0 ... 1e308 as f64 constants (Rust's POW10 table: the same correctly rounded doubles).
_POW10 = [float("1e%d" % i) for i in range(309)]


class JsonError(ValueError):
    """The text is not JSON by the rule above. `.msg`, `.pos` (character offset or None)."""

    def __init__(self, msg, pos=None):
        self.msg = msg
        self.pos = pos
        super().__init__(msg if pos is None else "%s (at character %d)" % (msg, pos))


class _Reject(Exception):
    """Raised inside the json hooks; turned into JsonError."""


def _f64_from_parts(positive, significand, exponent):
    """serde_json's `f64_from_parts` (without `float_roundtrip`): None when out of range."""
    f = float(significand)
    while True:
        e = abs(exponent)
        if e < len(_POW10):
            if exponent >= 0:
                f *= _POW10[e]
                if f == float("inf"):
                    return None
            else:
                f /= _POW10[e]
            break
        if f == 0.0:
            break
        if exponent >= 0:
            return None
        f /= 1e308
        exponent += 308
    return f if positive else -f


def _serde_f64(s):
    """The f64 serde_json makes of the number literal `s` (valid JSON number syntax), or None
    when serde_json answers "number out of range". Follows `parse_integer`, `parse_decimal`,
    `parse_exponent` and their overflow paths digit for digit."""
    i = 0
    positive = True
    if s[0] == "-":
        positive = False
        i = 1
    n = len(s)
    significand = 0
    exponent = 0
    overflowed = False
    # integer part
    while i < n and s[i].isdigit():
        d = ord(s[i]) - 48
        if overflowed:
            exponent += 1
        elif significand * 10 + d > 0xFFFFFFFFFFFFFFFF:
            overflowed = True
            exponent += 1
        else:
            significand = significand * 10 + d
        i += 1
    # fraction: digits are taken again (even after a long integer part) until one would
    # overflow; from there on they are ignored
    if i < n and s[i] == ".":
        i += 1
        ignoring = False
        while i < n and s[i].isdigit():
            d = ord(s[i]) - 48
            if not ignoring:
                if significand * 10 + d > 0xFFFFFFFFFFFFFFFF:
                    ignoring = True
                else:
                    significand = significand * 10 + d
                    exponent -= 1
            i += 1
    # exponent
    if i < n and s[i] in "eE":
        i += 1
        positive_exp = True
        if s[i] in "+-":
            positive_exp = s[i] == "+"
            i += 1
        exp = 0
        while i < n:
            exp = exp * 10 + (ord(s[i]) - 48)
            i += 1
            if exp > _I32_MAX:
                # parse_exponent_overflow
                if significand != 0 and positive_exp:
                    return None
                return 0.0 if positive else -0.0
        exponent = exponent + exp if positive_exp else exponent - exp
        exponent = max(-_I32_MAX - 1, min(_I32_MAX, exponent))  # saturating
    return _f64_from_parts(positive, significand, exponent)


def _big_float(s):
    """A number literal that is not a 64-bit integer, as a float; rejects what serde_json
    rejects as out of range."""
    f = float(s)
    if -1e307 < f < 1e307:
        return f  # far from the edge: serde_json's approximation cannot overflow here
    g = _serde_f64(s)
    if g is None:
        raise _Reject("number out of range: " + (s if len(s) <= 40 else s[:37] + "..."))
    return f if f not in (float("inf"), float("-inf")) else g


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
