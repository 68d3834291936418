"""The values of `shardhost.http` that other modules need too: its errors, `Headers` and
`Response` (and the header values they take). Imported by `shardhost.http`, which is where
users name them (each class says `shardhost.http` as its module), and by `_wasi_http`, which
makes them from what the host answered; it imports neither.
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator, List, Mapping, Optional, Tuple, TypeVar, Union, overload

from . import _json
from ._record import DecodeError

_D = TypeVar("_D")

#: The most redirects one request follows.
MAX_REDIRECTS = 10


# Errors ---------------------------------------------------------------------------------------


class HttpError(Exception):
    """Why a request got no response. `url`: the URL of the request (of the redirect that
    failed, when one did); `transient`: whether trying again later may succeed (a timeout or a
    connection error). The subclasses say which failure it was; a plain HttpError is anything
    else the host answered."""

    transient = False

    def __init__(self, url: Optional[str] = None, reason: str = "") -> None:
        super().__init__(url, reason)
        self.url = url
        self.reason = reason

    def _what(self) -> str:
        return self.reason or "failed"

    def __str__(self) -> str:
        return "%s: %s" % (self.url, self._what()) if self.url is not None else self._what()


class Denied(HttpError):
    """The subscription does not allow this origin (or grants no HTTP at all). Not transient:
    the subscription's `[subscription.http] allow` must list the origin."""

    def __init__(self, origin: str, url: Optional[str] = None) -> None:
        super().__init__(url, "")
        self.origin = origin

    def __str__(self) -> str:
        return (
            "%s: denied: this origin is not in the subscription's [subscription.http] allow"
            % self.origin
        )


class Timeout(HttpError):
    """No whole response within the grant's `timeout` or what was left of the call's."""

    transient = True

    def _what(self) -> str:
        return "timed out"


class ConnectError(HttpError):
    """The server could not be reached (DNS, refused, reset, TLS); `reason` says which."""

    transient = True

    def _what(self) -> str:
        return "cannot connect" + (": " + self.reason if self.reason else "")


class BodyTooLarge(HttpError):
    """The response body is larger than the subscription's `max_body`."""

    def _what(self) -> str:
        return "the response body is larger than the subscription's max_body"


class TooManyRedirects(HttpError):
    """More than `MAX_REDIRECTS` redirects."""

    def _what(self) -> str:
        return "more than %d redirects" % MAX_REDIRECTS


class InvalidUrl(HttpError, ValueError):
    """The URL (or a redirect's `Location`) is not an absolute http or https URL; `reason` says
    why."""

    def _what(self) -> str:
        return "not an http(s) URL: " + self.reason


# Header values --------------------------------------------------------------------------------

#: A header value: str (sent as UTF-8), bytes or int.
HeaderValue = Union[str, bytes, bytearray, memoryview, int]
#: Request headers: a dict (any mapping), or (name, value) pairs (a name may repeat).
HeadersArg = Union[Mapping[str, HeaderValue], Iterable[Tuple[str, HeaderValue]], None]
#: A request body: bytes, or str (sent as UTF-8).
BodyArg = Union[bytes, bytearray, memoryview, str, None]


def _header_value(name: str, value: HeaderValue) -> bytes:
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value).encode("ascii")
    raise TypeError("header %s: a value is str, bytes or int, not %s" % (name, type(value).__name__))


# Responses ------------------------------------------------------------------------------------


class Headers:
    """A response's headers, in the order received: names compare in any case; values are
    str (bytes beyond ASCII as Latin-1, as HTTP defines them). `headers["content-type"]` and
    `.get(name, default)` give the first value, `.get_all(name)` every one, `.items()` the
    (name, value) pairs, `.raw` the (name, bytes) pairs."""

    __slots__ = ("raw",)

    raw: List[Tuple[str, bytes]]

    def __init__(self, pairs: Iterable[Tuple[str, Union[bytes, str]]] = ()) -> None:
        self.raw = [
            (n, v if isinstance(v, bytes) else str(v).encode("latin-1")) for n, v in pairs
        ]

    def get_all(self, name: str) -> List[str]:
        name = name.lower()
        return [v.decode("latin-1") for n, v in self.raw if n.lower() == name]

    @overload
    def get(self, name: str) -> Optional[str]: ...

    @overload
    def get(self, name: str, default: _D) -> Union[str, _D]: ...

    def get(self, name: str, default: object = None) -> object:
        values = self.get_all(name)
        return values[0] if values else default

    def __getitem__(self, name: str) -> str:
        values = self.get_all(name)
        if not values:
            raise KeyError(name)
        return values[0]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and bool(self.get_all(name))

    def items(self) -> List[Tuple[str, str]]:
        return [(n, v.decode("latin-1")) for n, v in self.raw]

    def keys(self) -> List[str]:
        return [n for n, _ in self.raw]

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys())

    def __len__(self) -> int:
        return len(self.raw)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Headers) and self.raw == other.raw

    def __repr__(self) -> str:
        return "Headers(%r)" % (self.items(),)


class Response:
    """A whole response (its body read to the end).

    `status` (int), `ok` (a 2xx status), `url` (the URL that answered: the last one, after
    redirects), `headers` (`Headers`), `body` (bytes), `text()`, `json()`.

    `Response(status, body=b"", headers=None, url="")` makes one for tests (body bytes or str;
    headers a dict or pairs)."""

    __slots__ = ("status", "url", "headers", "body")

    status: int
    url: str
    headers: Headers
    body: bytes

    def __init__(self, status: int, body: Union[bytes, bytearray, memoryview, str] = b"",
                 headers: Union[Headers, HeadersArg] = None, url: str = "") -> None:
        if not isinstance(status, int) or isinstance(status, bool):
            raise TypeError("a status is an int, not %r" % (status,))
        self.status = status
        self.url = url
        if isinstance(headers, Headers):
            self.headers = headers
        else:
            pairs: Any = headers.items() if hasattr(headers, "items") else (headers or ())  # type: ignore[union-attr]
            self.headers = Headers((n, _header_value(n, v)) for n, v in pairs)
        self.body = body.encode("utf-8") if isinstance(body, str) else bytes(body)

    @property
    def ok(self) -> bool:
        """Whether the status is 2xx."""
        return 200 <= self.status < 300

    def text(self) -> str:
        """The body as UTF-8 text. Raises DecodeError (kind "utf8") when it is not."""
        try:
            return self.body.decode("utf-8")
        except UnicodeDecodeError as e:
            raise DecodeError(
                "utf8", "response body is not UTF-8 text (invalid byte at offset %d)" % e.start, e.start
            ) from None

    def json(self) -> Any:
        """The body decoded as JSON, by the rule of `Record.json()` (guest-sdk/JSON.md). Raises
        DecodeError."""
        text = self.text()
        try:
            return _json.loads(text)
        except _json.JsonError as e:
            raise DecodeError("json", "response body is not valid JSON: %s" % e, e.pos) from None

    def __repr__(self) -> str:
        return "<Response %d from %s, %d bytes>" % (self.status, self.url, len(self.body))


# Users name these as `shardhost.http`'s (reprs, tracebacks, docs).
for _cls in (HttpError, Denied, Timeout, ConnectError, BodyTooLarge, TooManyRedirects, InvalidUrl,
             Headers, Response):
    _cls.__module__ = "shardhost.http"
del _cls
