"""A stand-in for componentize-py's bindings of `wasi:http` (worlds with `http`), strict about
what the host is strict about: resources are used only while alive, dropped once, never with
live children (a pollable of its future, a stream of its body, the headers and body of their
response), and resources passed by ownership (a request to `handle`, a body to `finish`) are
gone afterwards. A test gives `Server.answer(request) -> answer` and reads `Server.events`.

An answer: `("response", status, [(name, bytes)], [chunk, ...], end)` where `end` is None (the
body ends) or an error code (the body breaks off with it); `("error", code)`: the future
fails; `("refuse", code)`: `handle` itself fails; a function of the request: the answer once
the request's body is written.
"""

import types
from dataclasses import dataclass

from tests.support import Err


@dataclass
class Ok:
    value: object


class Resource:
    def __init__(self, server, parent=None):
        self._server = server
        self._parent = parent
        self._children = set()
        self._gone = None  # "dropped" or "moved"
        server.live.add(self)
        if parent is not None:
            parent._children.add(self)

    def _check(self):
        if self._gone:
            raise AssertionError("%s used after it was %s" % (type(self).__name__, self._gone))

    def _end(self, how):
        self._check()
        if self._children:
            raise AssertionError(
                "%s %s with live children: %s"
                % (type(self).__name__, how, sorted(type(c).__name__ for c in self._children))
            )
        self._gone = how
        self._server.live.discard(self)
        if self._parent is not None:
            self._parent._children.discard(self)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._end("dropped")


def make(server):
    """The modules: {'outgoing_handler', 'wasi_http_types', 'poll', 'streams'}."""
    t = types.ModuleType("wit_world.imports.wasi_http_types")

    def variant(name, fields=()):
        cls = dataclass(type(name, (), {"__annotations__": {f: object for f in fields}}))
        setattr(t, name, cls)
        return cls

    for m in ("Get", "Head", "Post", "Put", "Delete", "Connect", "Options", "Trace", "Patch"):
        variant("Method_" + m)
    variant("Method_Other", ("value",))
    for s in ("Http", "Https"):
        variant("Scheme_" + s)
    variant("Scheme_Other", ("value",))
    for code in (
        "DnsTimeout", "DestinationNotFound", "DestinationUnavailable", "DestinationIpProhibited",
        "DestinationIpUnroutable", "ConnectionRefused", "ConnectionTerminated",
        "ConnectionTimeout", "ConnectionReadTimeout", "ConnectionWriteTimeout",
        "ConnectionLimitReached", "TlsProtocolError", "TlsCertificateError",
        "HttpRequestDenied", "HttpRequestLengthRequired", "HttpRequestMethodInvalid",
        "HttpRequestUriInvalid", "HttpRequestUriTooLong", "HttpResponseIncomplete",
        "HttpResponseTimeout", "HttpUpgradeFailed", "HttpProtocolError", "LoopDetected",
        "ConfigurationError",
    ):
        variant("ErrorCode_" + code)
    for code in ("DnsError", "TlsAlertReceived", "HttpResponseBodySize", "InternalError"):
        variant("ErrorCode_" + code, ("value",))
    variant("HeaderError_InvalidSyntax")
    variant("HeaderError_Forbidden")

    streams = types.ModuleType("wit_world.imports.streams")

    @dataclass
    class StreamError_Closed:
        pass

    @dataclass
    class StreamError_LastOperationFailed:
        value: object

    streams.StreamError_Closed = StreamError_Closed
    streams.StreamError_LastOperationFailed = StreamError_LastOperationFailed

    class IoError(Resource):
        def __init__(self, code, text="an io error"):
            super().__init__(server)
            self.code = code
            self.text = text

        def to_debug_string(self):
            self._check()
            return self.text

    def http_error_code(err):
        err._check()
        return err.code

    t.http_error_code = http_error_code

    class Fields(Resource):
        def __init__(self, entries=(), parent=None):
            super().__init__(server, parent)
            self._entries = list(entries)

        @classmethod
        def from_list(cls, entries):
            for name, value in entries:
                assert isinstance(name, str) and isinstance(value, bytes), (name, value)
                if name.lower() in server.forbidden:
                    raise Err(t.HeaderError_Forbidden())
            return cls(entries)

        def entries(self):
            self._check()
            return list(self._entries)

    class OutputStream(Resource):
        def __init__(self, body):
            super().__init__(server, body)
            self._body = body

        def blocking_write_and_flush(self, contents):
            self._check()
            assert isinstance(contents, bytes) and len(contents) <= 4096, len(contents)
            if self._body._request.closed:
                raise Err(StreamError_Closed())
            self._body._request.sent_body += contents

    class OutgoingBody(Resource):
        def __init__(self, request):
            super().__init__(server)
            self._request = request
            self._written = False

        def write(self):
            self._check()
            if self._written:
                raise Err(None)
            self._written = True
            return OutputStream(self)

        @classmethod
        def finish(cls, this, trailers):
            this._end("moved")
            this._request.finished = True

    class OutgoingRequest(Resource):
        def __init__(self, headers):
            headers._end("moved")
            super().__init__(server)
            self.headers = headers._entries
            self.method = self.scheme = self.authority = self.path_with_query = None
            self._body_taken = False
            self.sent_body = b""
            self.finished = False
            self.closed = False

        def set_method(self, method):
            self._check()
            self.method = method

        def set_scheme(self, scheme):
            self._check()
            self.scheme = scheme

        def set_authority(self, authority):
            self._check()
            self.authority = authority

        def set_path_with_query(self, path):
            self._check()
            self.path_with_query = path

        def body(self):
            self._check()
            if self._body_taken:
                raise Err(None)
            self._body_taken = True
            return OutgoingBody(self)

    class Pollable(Resource):
        def __init__(self, future):
            super().__init__(server, future)
            self.future = future

    class InputStream(Resource):
        def __init__(self, body, chunks, end):
            super().__init__(server, body)
            self._chunks = list(chunks)
            self._end_code = end

        def blocking_read(self, n):
            self._check()
            assert n > 0
            if self._chunks:
                chunk = self._chunks.pop(0)
                if len(chunk) > n:
                    chunk, rest = chunk[:n], chunk[n:]
                    self._chunks.insert(0, rest)
                return chunk
            if self._end_code is None:
                raise Err(StreamError_Closed())
            if isinstance(self._end_code, str):  # an io error without an error code
                raise Err(StreamError_LastOperationFailed(IoError(None, self._end_code)))
            raise Err(StreamError_LastOperationFailed(IoError(self._end_code)))

    class IncomingBody(Resource):
        def __init__(self, response):
            super().__init__(server, response)
            self._response = response
            self._streamed = False

        def stream(self):
            self._check()
            if self._streamed:
                raise Err(None)
            self._streamed = True
            return InputStream(self, self._response._chunks, self._response._end_code)

    class IncomingResponse(Resource):
        def __init__(self, status, headers, chunks, end):
            super().__init__(server)
            self._status, self._headers, self._chunks, self._end_code = status, headers, chunks, end
            self._consumed = False

        def status(self):
            self._check()
            return self._status

        def headers(self):
            self._check()
            return Fields(self._headers, parent=self)  # a child of the response

        def consume(self):
            self._check()
            if self._consumed:
                raise Err(None)
            self._consumed = True
            return IncomingBody(self)

    class FutureIncomingResponse(Resource):
        def __init__(self, request, answer):
            super().__init__(server)
            self._request = request
            self._answer = answer
            self._taken = False

        def subscribe(self):
            self._check()
            return Pollable(self)

        def ready(self):
            if callable(self._answer) and self._request.finished:
                self._answer = self._answer(self._request)
            return self._request.finished or self._answer[0] == "error"

        def get(self):
            self._check()
            if not self.ready():
                return None
            if self._taken:
                return Err(None)
            self._taken = True
            kind = self._answer[0]
            if kind == "error":
                return Ok(Err(self._answer[1]))
            _, status, headers, chunks, end = self._answer
            server.events.append(("response", self._request.authority + self._request.path_with_query))
            return Ok(Ok(IncomingResponse(status, headers, chunks, end)))

    t.Fields = Fields
    t.OutgoingRequest = OutgoingRequest
    t.OutgoingBody = OutgoingBody
    t.FutureIncomingResponse = FutureIncomingResponse
    t.IncomingResponse = IncomingResponse
    t.IncomingBody = IncomingBody

    handler = types.ModuleType("wit_world.imports.outgoing_handler")

    def handle(request, options):
        request._end("moved")
        assert options is None
        server.events.append(("send", request.authority + request.path_with_query))
        server.sent.append(request)
        answer = server.answer(request)
        if not callable(answer) and answer[0] == "refuse":
            raise Err(answer[1])
        if not callable(answer) and answer[0] == "error":
            request.closed = True
        return FutureIncomingResponse(request, answer)

    handler.handle = handle

    poll = types.ModuleType("wit_world.imports.poll")

    def poll_(pollables):
        assert pollables, "poll of an empty list traps"
        for p in pollables:
            p._check()
        server.events.append(("poll", len(pollables)))
        ready = [i for i, p in enumerate(pollables) if p.future.ready()]
        assert ready, "nothing would ever be ready: the guest waits forever"
        return ready[: server.ready_at_once]

    poll.poll = poll_

    return {
        "outgoing_handler": handler,
        "wasi_http_types": t,
        "poll": poll,
        "streams": streams,
    }


class Server:
    """What the fake host answers, and what it saw."""

    def __init__(self, answer, ready_at_once=1, forbidden=("host", "connection")):
        self.answer = answer
        self.ready_at_once = ready_at_once  # how many ready futures one poll reports
        self.forbidden = set(forbidden)
        self.live = set()
        self.events = []
        self.sent = []

    def modules(self):
        return make(self)


def method_name(request):
    m = request.method
    name = type(m).__name__.split("_", 1)[1]
    return m.value if name == "Other" else name.upper()


def url_of(request):
    scheme = type(request.scheme).__name__.split("_", 1)[1].lower()
    return "%s://%s%s" % (scheme, request.authority, request.path_with_query)
