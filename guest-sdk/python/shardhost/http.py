"""Outbound HTTP requests, through the host's `wasi:http`.

The host sends a request only for a subscription with a `[subscription.http]` table, and only
to the origins its `allow` lists; a request elsewhere fails with `Denied` (an exception, not a
trap). Each request is bounded by the grant's `timeout` and by what is left of the call's
timeout, and its response body by `max_body`::

    from shardhost import http

    response = http.post(url, headers={"Idempotency-Key": str(id)}, json=shipment).send()
    if response.status >= 500:
        ...  # retry later

`send_all` sends several requests at once and answers when all are done (about the time of the
slowest, not of their sum), with a `Response` or an `HttpError` in place of each request.

Redirects (301, 302, 303, 307, 308 with a `Location`) are followed, up to `MAX_REDIRECTS`; each
one is a new request the host checks against `allow`. A 303, and a 301 or 302 of a request
other than GET or HEAD, continues as a GET without a body.

A component whose app imports this module (`from shardhost import http`, `import
shardhost.http`) is built for the world `http-handler`, which imports `wasi:http`: the host runs
it only for a subscription with a `[subscription.http]` table. Outside a component (unit tests)
every request fails unless `shardhost.testing.FakeHost(http=...)` answers it.
"""

from __future__ import annotations

import json as _stdjson
from typing import Any, Iterable, Iterator, List, Mapping, Optional, Tuple, TypeVar, Union, overload

from . import _host
from . import _json
from ._record import DecodeError
from ._url import BadUrl, Url

_D = TypeVar("_D")

__all__ = [
    "MAX_REDIRECTS",
    "Request",
    "Response",
    "Headers",
    "HttpError",
    "Denied",
    "Timeout",
    "ConnectError",
    "BodyTooLarge",
    "TooManyRedirects",
    "InvalidUrl",
    "get",
    "post",
    "put",
    "patch",
    "delete",
    "send",
    "send_all",
]

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


# Requests -------------------------------------------------------------------------------------

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


def _headers(headers: HeadersArg) -> List[Tuple[str, bytes]]:
    if headers is None:
        return []
    items = headers.items() if hasattr(headers, "items") else headers
    out = []
    for pair in items:
        try:
            name, value = pair
        except (TypeError, ValueError):
            raise TypeError("headers are a dict or (name, value) pairs, not %r" % (pair,)) from None
        if not isinstance(name, str):
            raise TypeError("a header name is a str, not %s" % type(name).__name__)
        out.append((name, _header_value(name, value)))
    return out


def _has(headers: List[Tuple[str, bytes]], name: str) -> bool:
    name = name.lower()
    return any(n.lower() == name for n, _ in headers)


class Request:
    """An HTTP request to send: made by `get`, `post`, `put`, `patch`, `delete`, or
    `Request(method, url, ...)`. Sent by `.send()`, `send(request)` or `send_all([...])`.

    - `headers`: a dict, or (name, value) pairs (a name may repeat); values str (sent as
      UTF-8), bytes or int;
    - `body`: bytes, or str (sent as UTF-8);
    - `json`: any value `json.dumps` takes: the body becomes its compact JSON, and
      `Content-Type: application/json` is added unless a Content-Type is given. Not together
      with `body`.

    Attributes: `method` (upper case), `url`, `headers` (a list of (name, bytes)), `body`
    (bytes)."""

    __slots__ = ("method", "url", "headers", "body")

    method: str
    url: str
    headers: List[Tuple[str, bytes]]
    body: bytes

    def __init__(self, method: str, url: str, headers: HeadersArg = None, body: BodyArg = None,
                 json: Any = None) -> None:
        if not isinstance(method, str) or not method:
            raise TypeError("the method is a str such as \"GET\", not %r" % (method,))
        self.method = method.upper()
        self.url = url
        self.headers = _headers(headers)
        if body is not None and json is not None:
            raise ValueError("give a request body or json, not both")
        if json is not None:
            self.body = _stdjson.dumps(
                json, separators=(",", ":"), ensure_ascii=False, allow_nan=False
            ).encode("utf-8")
            if not _has(self.headers, "content-type"):
                self.headers.append(("Content-Type", b"application/json"))
        elif body is None:
            self.body = b""
        elif isinstance(body, str):
            self.body = body.encode("utf-8")
        elif isinstance(body, (bytes, bytearray, memoryview)):
            self.body = bytes(body)
        else:
            raise TypeError(
                "a request body is bytes or str, not %s (json= sends a value as JSON)"
                % type(body).__name__
            )

    def send(self) -> Response:
        """Sends the request and waits for its whole response (redirects followed). A response
        of any status (404, 503, ...) is a Response; raises an HttpError when there is none."""
        return send(self)

    def _redirected(self, status: int, location: object) -> Request:
        """The request a redirect (`status`, to the Url `location`) continues as."""
        keeps = status in (307, 308) or (status in (301, 302) and self.method in ("GET", "HEAD"))
        nxt = Request.__new__(Request)
        nxt.url = str(location)
        if keeps:
            nxt.method, nxt.headers, nxt.body = self.method, list(self.headers), self.body
        else:
            nxt.method = "HEAD" if self.method == "HEAD" else "GET"
            nxt.body = b""
            nxt.headers = [
                (n, v) for n, v in self.headers if n.lower() not in ("content-type", "content-length")
            ]
        return nxt

    def __repr__(self) -> str:
        return "<Request %s %s>" % (self.method, self.url)


def get(url: str, headers: HeadersArg = None) -> Request:
    """A GET request (send it with `.send()`, or several at once with `send_all`)."""
    return Request("GET", url, headers)


def post(url: str, headers: HeadersArg = None, body: BodyArg = None, json: Any = None) -> Request:
    """A POST request."""
    return Request("POST", url, headers, body, json)


def put(url: str, headers: HeadersArg = None, body: BodyArg = None, json: Any = None) -> Request:
    """A PUT request."""
    return Request("PUT", url, headers, body, json)


def patch(url: str, headers: HeadersArg = None, body: BodyArg = None, json: Any = None) -> Request:
    """A PATCH request."""
    return Request("PATCH", url, headers, body, json)


def delete(url: str, headers: HeadersArg = None, body: BodyArg = None, json: Any = None) -> Request:
    """A DELETE request."""
    return Request("DELETE", url, headers, body, json)


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
        """The body decoded as JSON, by the rule of `Record.json()` (README "JSON"). Raises
        DecodeError."""
        text = self.text()
        try:
            return _json.loads(text)
        except _json.JsonError as e:
            raise DecodeError("json", "response body is not valid JSON: %s" % e, e.pos) from None

    def __repr__(self) -> str:
        return "<Response %d from %s, %d bytes>" % (self.status, self.url, len(self.body))


# Sending --------------------------------------------------------------------------------------


def send(request: Request) -> Response:
    """Sends one request and waits for its whole response (redirects followed). A response of
    any status is a Response; raises an HttpError when there is none."""
    answer = send_all([request])[0]
    if isinstance(answer, HttpError):
        raise answer
    return answer


def send_all(requests: Iterable[Request]) -> List[Union[Response, HttpError]]:
    """Sends every request at once and answers when all are done: a list with, in the order of
    the requests, a `Response`, or the `HttpError` (not raised) of a request that got none.
    Redirects are followed."""
    requests = list(requests)
    for r in requests:
        if not isinstance(r, Request):
            raise TypeError("send_all takes Requests (http.get(url), ...), not %r" % (r,))
    results: List[Any] = [None] * len(requests)
    todo = [(i, r, 0) for i, r in enumerate(requests)]
    while todo:
        round_ = [(r, _parse(r.url)) for _, r, _ in todo]
        answers = _host.backend().http_exchange(round_)
        nxt = []
        for (i, request, hops), answer in zip(todo, answers):
            if isinstance(answer, Response):
                try:
                    answer = _follow(request, answer, hops)
                except HttpError as e:
                    answer = e
            if isinstance(answer, Request):
                nxt.append((i, answer, hops + 1))
            else:
                results[i] = answer
        todo = nxt
    return results


def _parse(url: str) -> Any:
    """The Url of a request, or the InvalidUrl it is."""
    try:
        return Url.parse(url)
    except BadUrl as e:
        return InvalidUrl(url, str(e))


def _follow(request: Request, response: Response, hops: int) -> Union[Response, Request]:
    """The response itself, or the Request its redirect continues as."""
    if response.status not in (301, 302, 303, 307, 308):
        return response
    location = response.headers.get("location")
    if location is None:
        return response
    if hops >= MAX_REDIRECTS:
        raise TooManyRedirects(request.url)
    try:
        to = Url.parse(response.url).join(location)
    except BadUrl as e:
        raise InvalidUrl(location, str(e)) from None
    return request._redirected(response.status, to)
