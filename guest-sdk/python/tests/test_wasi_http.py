"""WitBackend's config and HTTP over stand-ins of componentize-py's bindings (wasi:config/store,
wasi:http): every request of a round sent before the first wait, each body read as its head
arrives, resources released children first, the host's error codes as the SDK's errors."""

import sys
import unittest
from unittest import mock

from tests import fake_wasi_http, support

from shardhost import _host, config, http, log, testing


def ok(status=200, body=b"", headers=(), chunks=None, end=None):
    return ("response", status, list(headers), chunks if chunks is not None else [body], end)


class Backend(unittest.TestCase):
    def start(self, answer=None, config_values=None, http_world=True, **server):
        self.server = fake_wasi_http.Server(answer or (lambda r: ok()), **server) if http_world else None
        self.modules = support.fake_bindings(config=config_values, http=self.server)
        patch = mock.patch.dict(sys.modules, self.modules)
        patch.start()
        self.addCleanup(patch.stop)
        self.backend = _host.WitBackend()
        previous = _host.set_backend(self.backend)
        self.addCleanup(lambda: (_host.set_backend(previous), log._refresh()))
        testing.reset()
        self.types = self.modules["wit_world.imports.wasi_http_types"] if http_world else None
        return self.backend

    def tearDown(self):
        if getattr(self, "server", None) is not None:
            self.assertEqual(self.server.live, set(), "every resource released")


class Config(Backend):
    def test_values_once_the_host_calls(self):
        self.start(config_values={"greeting": "hello"}, http_world=False)
        with self.assertRaisesRegex(RuntimeError, "not at module top level"):
            config.get("greeting")
        self.backend.arm()
        self.assertEqual(config.get("greeting"), "hello")
        self.assertIsNone(config.get("missing"))
        self.assertEqual(config.all(), {"greeting": "hello"})
        self.modules["wit_world.imports.store"].error = "upstream down"
        self.assertIsNone(config.get("greeting"))
        self.assertEqual(config.all(), {})

    def test_a_component_built_without_http_says_so(self):
        self.start(http_world=False)
        self.backend.arm()
        self.assertIs(self.backend.types, self.modules["wit_world.imports.types"])
        with self.assertRaisesRegex(http.HttpError, r"built without HTTP .*--http"):
            http.get("http://h/").send()

    def test_the_http_world_names_its_types_by_package(self):
        self.start()
        self.assertIs(self.backend.types, self.modules["wit_world.imports.shardhost_handler_types"])


class Http(Backend):
    def test_nothing_is_sent_before_the_first_call(self):
        self.start()
        with self.assertRaisesRegex(RuntimeError, "HTTP requests can be sent only while the host calls"):
            http.get("http://h/").send()
        self.assertEqual(self.server.sent, [])

    def test_a_request_as_the_host_gets_it(self):
        self.start(lambda r: ok(201, b"done", [("Content-Type", b"text/plain"), ("X", b"\xe9")]))
        self.backend.arm()
        r = http.post("https://api.example:8443/book?x=1", headers={"Idempotency-Key": "7"}, json={"a": 1}).send()
        sent = self.server.sent[0]
        self.assertEqual(fake_wasi_http.method_name(sent), "POST")
        self.assertEqual(fake_wasi_http.url_of(sent), "https://api.example:8443/book?x=1")
        self.assertEqual(sent.headers, [("Idempotency-Key", b"7"), ("Content-Type", b"application/json"), ("Content-Length", b"7")])
        self.assertEqual((sent.sent_body, sent.finished), (b'{"a":1}', True))
        self.assertEqual((r.status, r.body, r.headers["x"], r.url), (201, b"done", "\xe9", "https://api.example:8443/book?x=1"))
        http.Request("PROPFIND", "http://h/").send()
        self.assertEqual(fake_wasi_http.method_name(self.server.sent[1]), "PROPFIND")
        self.assertEqual(self.server.sent[1].headers, [])
        http.post("http://h/", headers={"content-length": "0"}).send()
        http.put("http://h/").send()
        http.delete("http://h/", body=b"xy").send()
        self.assertEqual([r.headers for r in self.server.sent[2:]], [
            [("content-length", b"0")], [("Content-Length", b"0")], [("Content-Length", b"2")]])

    def test_large_bodies_go_out_in_pieces_and_come_back_whole(self):
        big = bytes(range(256)) * 100
        self.start(lambda r: ok(200, chunks=[big[:70000], big[70000:]]))
        self.backend.arm()
        r = http.put("http://h/up", body=big * 2).send()
        self.assertEqual(self.server.sent[0].sent_body, big * 2)
        self.assertEqual(r.body, big)

    def test_every_request_of_a_round_goes_out_before_the_first_wait(self):
        self.start(lambda r: ok(int(r.path_with_query[1:])), ready_at_once=1)
        self.backend.arm()
        got = http.send_all([http.get("http://h/%d" % s) for s in (200, 201, 202, 203)])
        self.assertEqual([r.status for r in got], [200, 201, 202, 203])
        kinds = [e[0] for e in self.server.events]
        self.assertEqual(kinds[:5], ["send"] * 4 + ["poll"])
        self.assertEqual([e for e in self.server.events if e[0] == "poll"], [("poll", 4), ("poll", 3), ("poll", 2), ("poll", 1)])

    def test_redirect_hops_are_rounds_of_their_own(self):
        def answer(r):
            if r.path_with_query == "/r":
                return ok(303, headers=[("Location", b"/to")])
            return lambda r: ok(200, fake_wasi_http.method_name(r).encode() + b" " + r.sent_body)

        self.start(answer, ready_at_once=5)
        self.backend.arm()
        got = http.send_all([http.post("http://h/r", body=b"x"), http.post("http://h/to", body=b"y")])
        self.assertEqual([g.text() for g in got], ["GET ", "POST y"])
        self.assertEqual([e for e in self.server.events if e[0] == "send"], [("send", "h/r"), ("send", "h/to"), ("send", "h/to")])

    def test_the_hosts_error_codes(self):
        t = None

        def answer(r):
            code = {
                "/denied": ("error", t.ErrorCode_HttpRequestDenied()),
                "/refused": ("error", t.ErrorCode_ConnectionRefused()),
                "/dns": ("error", t.ErrorCode_DnsError(None)),
                "/tls": ("error", t.ErrorCode_TlsCertificateError()),
                "/slow": ("error", t.ErrorCode_HttpResponseTimeout()),
                "/connect-slow": ("error", t.ErrorCode_ConnectionTimeout()),
                "/limit": ("error", t.ErrorCode_ConnectionLimitReached()),
                "/big": ("error", t.ErrorCode_HttpResponseBodySize(70000)),
                "/stall": ok(200, chunks=[b"x"], end=t.ErrorCode_ConnectionReadTimeout()),
                "/huge": ok(200, chunks=[b"x" * 100], end=t.ErrorCode_HttpResponseBodySize(None)),
                "/broken": ok(200, chunks=[b"x"], end=t.ErrorCode_HttpProtocolError()),
                "/cut": ok(200, chunks=[b"x"], end="connection reset"),
                "/odd": ("error", t.ErrorCode_InternalError("boom")),
                "/refuse": ("refuse", t.ErrorCode_HttpRequestUriInvalid()),
            }[r.path_with_query]
            return code

        self.start(lambda r: answer(r))
        t = self.types
        self.backend.arm()
        paths = ["/denied", "/refused", "/dns", "/tls", "/slow", "/connect-slow", "/limit", "/big", "/stall", "/huge", "/broken", "/odd", "/refuse", "/cut"]
        got = http.send_all([http.post("http://127.0.0.1:9" + p, body=b"b") for p in paths])
        kinds = {p: type(g).__name__ for p, g in zip(paths, got)}
        self.assertEqual(kinds, {
            "/denied": "Denied", "/refused": "ConnectError", "/dns": "ConnectError", "/tls": "ConnectError",
            "/slow": "Timeout", "/connect-slow": "Timeout", "/limit": "ConnectError", "/big": "BodyTooLarge",
            "/stall": "Timeout", "/huge": "BodyTooLarge", "/broken": "HttpError", "/odd": "HttpError",
            "/refuse": "HttpError", "/cut": "HttpError",
        })
        self.assertEqual(str(got[13]), "http://127.0.0.1:9/cut: the response body broke off: connection reset")
        denied = got[0]
        self.assertEqual(denied.origin, "http://127.0.0.1:9")
        self.assertEqual(denied.url, "http://127.0.0.1:9/denied")
        self.assertIn("[subscription.http] allow", str(denied))
        self.assertEqual(str(got[1]), "http://127.0.0.1:9/refused: cannot connect: ConnectionRefused")
        self.assertEqual(str(got[11]), "http://127.0.0.1:9/odd: InternalError('boom')")
        with self.assertRaises(http.Denied):
            http.get("http://127.0.0.1:9/denied").send()

    def test_a_header_the_host_refuses(self):
        self.start()
        self.backend.arm()
        with self.assertRaisesRegex(http.HttpError, "a header the host refuses: Forbidden"):
            http.get("http://h/", headers={"Host": "x"}).send()
        self.assertEqual(self.server.sent, [])


if __name__ == "__main__":
    unittest.main()
