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
shardhost.http`) is built for a world that includes `http`, which imports `wasi:http`: the host
runs it only for a subscription with a `[subscription.http]` table. Outside a component (unit
tests) every request fails unless `shardhost.testing.FakeHost(http=...)` answers it.
"""

from __future__ import annotations

import json as _stdjson
from typing import Any, Iterable, List, Tuple, Union

from . import _host
from ._http_types import (
    MAX_REDIRECTS,
    BodyArg,
    BodyTooLarge,
    ConnectError,
    Denied,
    HeadersArg,
    HeaderValue,
    Headers,
    HttpError,
    InvalidUrl,
    Response,
    Timeout,
    TooManyRedirects,
    _header_value,
)
from ._url import BadUrl, Url

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

# Requests -------------------------------------------------------------------------------------


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
