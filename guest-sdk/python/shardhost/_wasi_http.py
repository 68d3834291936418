"""Requests through `wasi:http/outgoing-handler` (componentize-py's bindings of the worlds
that include `http`): send every request of a round, wait on their futures together
(`wasi:io/poll`), read each response's body as soon as its head arrives.

Every resource is released explicitly, children before their parents (a pollable before its
future, a stream before its body, headers and body before their response), as the host
requires: componentize-py would otherwise drop them whenever Python collects them, in any
order. Imported only inside a component, by `_host.WitBackend`; the world `handler` has no
`wasi:http`, and then `load()` answers None.
"""

from componentize_py_types import Err

_CHUNK = 64 * 1024


def load():
    """The transport, or None when the component's world has no `wasi:http` (then neither
    are the user-facing types, `_http_types`, loaded for it)."""
    try:
        from wit_world.imports import outgoing_handler, poll, streams
        from wit_world.imports import wasi_http_types as types
    except ImportError:
        return None
    global BodyTooLarge, ConnectError, Denied, HttpError, Response, Timeout
    from ._http_types import BodyTooLarge, ConnectError, Denied, HttpError, Response, Timeout

    return Transport(outgoing_handler, types, poll, streams)


def _release(resource):
    """Drops a resource now (componentize-py's `__exit__`)."""
    if resource is not None:
        resource.__exit__(None, None, None)


class Transport:
    def __init__(self, outgoing_handler, types, poll, streams):
        self._handler = outgoing_handler
        self._t = types
        self._poll = poll.poll
        self._closed = streams.StreamError_Closed
        self._methods = {
            "GET": types.Method_Get(),
            "HEAD": types.Method_Head(),
            "POST": types.Method_Post(),
            "PUT": types.Method_Put(),
            "DELETE": types.Method_Delete(),
            "PATCH": types.Method_Patch(),
            "OPTIONS": types.Method_Options(),
        }
        t = types
        self._timeouts = (
            t.ErrorCode_ConnectionTimeout,
            t.ErrorCode_ConnectionReadTimeout,
            t.ErrorCode_ConnectionWriteTimeout,
            t.ErrorCode_HttpResponseTimeout,
            t.ErrorCode_DnsTimeout,
        )
        self._connects = (
            t.ErrorCode_DnsError,
            t.ErrorCode_DestinationNotFound,
            t.ErrorCode_DestinationUnavailable,
            t.ErrorCode_DestinationIpProhibited,
            t.ErrorCode_DestinationIpUnroutable,
            t.ErrorCode_ConnectionRefused,
            t.ErrorCode_ConnectionTerminated,
            t.ErrorCode_ConnectionLimitReached,
            t.ErrorCode_TlsProtocolError,
            t.ErrorCode_TlsCertificateError,
            t.ErrorCode_TlsAlertReceived,
        )

    def exchange(self, round_):
        """[(Request, Url or InvalidUrl)] -> [Response or HttpError], redirects not followed."""
        answers = [None] * len(round_)
        waiting = []  # (index, future)
        for i, (request, url) in enumerate(round_):
            if isinstance(url, HttpError):
                answers[i] = url
                continue
            try:
                waiting.append((i, self._start(request, url)))
            except HttpError as e:
                answers[i] = e
        try:
            while waiting:
                pollables = [future.subscribe() for _, future in waiting]
                try:
                    ready = self._poll(pollables)
                finally:
                    for p in pollables:
                        _release(p)
                for at in sorted(set(ready), reverse=True):
                    i, future = waiting.pop(at)
                    request, url = round_[i]
                    try:
                        answers[i] = self._finish(request, url, future)
                    except HttpError as e:
                        answers[i] = e
                    finally:
                        _release(future)
        finally:
            for _, future in waiting:  # only after an exception: drop what is left
                _release(future)
        return answers

    def _start(self, request, url):
        """Hands a request to the host (headers, then the body): its future-incoming-response.

        Once the host has the request, a failure to write or finish its body is not raised
        here: the body is dropped unfinished, the host fails the request, and its future says
        why (a denied origin, a timeout, ...), which is what the user needs to know."""
        t = self._t
        try:
            headers = t.Fields.from_list(_with_length(request))
        except Err as e:
            raise HttpError(request.url, "a header the host refuses: %s" % _show(e.value)) from None
        outgoing = t.OutgoingRequest(headers)  # takes the fields
        body = None
        try:
            method = self._methods.get(request.method) or t.Method_Other(request.method)
            scheme = t.Scheme_Https() if url.scheme == "https" else t.Scheme_Http()
            try:
                outgoing.set_method(method)
                outgoing.set_scheme(scheme)
                outgoing.set_authority(url.authority)
                outgoing.set_path_with_query(url.path_and_query)
            except Err:
                raise HttpError(request.url, "the host refuses the method or URL") from None
            body = outgoing.body()
            sending, outgoing = outgoing, None
            try:
                future = self._handler.handle(sending, None)  # takes the request
            except Err as e:
                raise self._error(request, url, e.value) from None
            if self._write(body, request.body):
                finishing, body = body, None
                try:
                    t.OutgoingBody.finish(finishing, None)  # takes the body
                except Err:
                    pass  # the future tells
            return future
        finally:
            _release(body)
            _release(outgoing)

    def _write(self, body, data):
        """Writes the request body; False when the host took no more of it."""
        try:
            stream = body.write()
        except Err:
            return False
        try:
            for at in range(0, len(data), 4096):
                stream.blocking_write_and_flush(data[at : at + 4096])
        except Err as e:
            if not isinstance(e.value, self._closed):
                _release(e.value.value)
            return False
        finally:
            _release(stream)
        return True

    def _finish(self, request, url, future):
        """The whole response of a ready future."""
        got = future.get()
        if got is None:
            raise HttpError(request.url, "the response is not ready")
        if isinstance(got, Err):
            raise HttpError(request.url, "the response was already taken")
        inner = got.value
        if isinstance(inner, Err):
            raise self._error(request, url, inner.value)
        response = inner.value
        try:
            status = response.status()
            fields = response.headers()
            try:
                headers = fields.entries()
            finally:
                _release(fields)
            body = self._read(request, url, response)
        finally:
            _release(response)
        return Response(status, body, headers, str(url))

    def _read(self, request, url, response):
        """Reads a response's body to its end."""
        try:
            incoming = response.consume()
        except Err:
            raise HttpError(request.url, "the response body was already taken") from None
        chunks = []
        try:
            try:
                stream = incoming.stream()
            except Err:
                raise HttpError(request.url, "no response body stream") from None
            try:
                while True:
                    try:
                        chunks.append(stream.blocking_read(_CHUNK))
                    except Err as e:
                        if isinstance(e.value, self._closed):
                            break
                        raise self._stream_error(request, url, e.value.value) from None
            finally:
                _release(stream)
        finally:
            _release(incoming)
        return b"".join(chunks)

    def _stream_error(self, request, url, io_error):
        """The HttpError of a body read that failed (`io_error`: a wasi:io error resource):
        by its wasi:http error code, or else the host's own words for it."""
        try:
            code = self._t.http_error_code(io_error)
            why = None if code is not None else io_error.to_debug_string()
        finally:
            _release(io_error)
        if code is None:
            return HttpError(request.url, "the response body broke off: %s" % why)
        return self._error(request, url, code)

    def _error(self, request, url, code):
        """What the host's error code means for the user."""
        if isinstance(code, self._t.ErrorCode_HttpRequestDenied):
            return Denied(url.origin(), request.url)
        if isinstance(code, self._timeouts):
            return Timeout(request.url)
        if isinstance(code, self._t.ErrorCode_HttpResponseBodySize):
            return BodyTooLarge(request.url)
        if isinstance(code, self._connects):
            return ConnectError(request.url, _show(code))
        return HttpError(request.url, _show(code))


_BODY_METHODS = ("POST", "PUT", "PATCH")


def _with_length(request):
    """The request's headers, with `Content-Length` when it has a body (or is a POST, PUT or
    PATCH) and does not say one: the host then sends the body with its length rather than in
    chunks, which some servers do not read."""
    headers = request.headers
    if (request.body or request.method in _BODY_METHODS) and not any(
        n.lower() == "content-length" for n, _ in headers
    ):
        headers = headers + [("Content-Length", str(len(request.body)).encode("ascii"))]
    return headers


def _show(code):
    """An error code as a short text: `ConnectionRefused`, `DnsError(...)`."""
    name = type(code).__name__
    name = name.split("_", 1)[1] if "_" in name else name
    value = getattr(code, "value", None)
    return name if value is None else "%s(%r)" % (name, value)
