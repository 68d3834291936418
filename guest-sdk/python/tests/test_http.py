"""shardhost.http and shardhost.config: requests, responses, redirects and errors in plain
CPython, answered by testing.FakeHost (the wasi:http transport: test_wasi_http.py)."""

import os
import unittest
from unittest import mock

import shardhost
from shardhost import config, http, testing


class Requests(unittest.TestCase):
    def test_the_builders(self):
        r = http.post("https://api.example/book", headers={"Idempotency-Key": 7, "X-B": b"\x01"}, json={"id": 1, "a": "é"})
        self.assertEqual((r.method, r.url), ("POST", "https://api.example/book"))
        self.assertEqual(r.headers, [("Idempotency-Key", b"7"), ("X-B", b"\x01"), ("Content-Type", b"application/json")])
        self.assertEqual(r.body, '{"id":1,"a":"é"}'.encode())
        r = http.put("http://h/x", headers=[("a", "1"), ("a", "2")], body="té")
        self.assertEqual((r.method, r.headers, r.body), ("PUT", [("a", b"1"), ("a", b"2")], "té".encode()))
        self.assertEqual(http.get("http://h/").body, b"")
        self.assertEqual(http.delete("http://h/").method, "DELETE")
        self.assertEqual(http.patch("http://h/", body=b"x").method, "PATCH")
        self.assertEqual(http.Request("options", "http://h/").method, "OPTIONS")
        r = http.post("http://h/", headers={"content-type": "application/x+json"}, json=[1])
        self.assertEqual(r.headers, [("content-type", b"application/x+json")])

    def test_what_a_request_refuses(self):
        with self.assertRaisesRegex(ValueError, "not both"):
            http.post("http://h/", body=b"x", json=1)
        with self.assertRaisesRegex(TypeError, "json= sends a value as JSON"):
            http.post("http://h/", body={"a": 1})
        with self.assertRaisesRegex(TypeError, "header X: a value is str, bytes or int"):
            http.get("http://h/", headers={"X": 1.5})
        with self.assertRaises(ValueError):
            http.post("http://h/", json=float("nan"))
        with self.assertRaises(TypeError):
            http.post("http://h/", json={1j: 1})
        with self.assertRaisesRegex(TypeError, "send_all takes Requests"):
            http.send_all(["http://h/"])


class Responses(unittest.TestCase):
    def test_a_response(self):
        r = http.Response(201, '{"id": 1}', {"Content-Type": "application/json", "X-N": 5}, "http://h/")
        self.assertTrue(r.ok)
        self.assertEqual(r.json(), {"id": 1})
        self.assertEqual(r.text(), '{"id": 1}')
        self.assertEqual(r.headers["content-type"], "application/json")
        self.assertEqual(r.headers.get("x-n"), "5")
        self.assertIsNone(r.headers.get("missing"))
        self.assertIn("CONTENT-TYPE", r.headers)
        self.assertEqual(len(r.headers), 2)
        self.assertFalse(http.Response(404).ok)
        self.assertFalse(http.Response(199).ok)
        multi = http.Headers([("Set-Cookie", b"a"), ("set-cookie", b"b\xe9")])
        self.assertEqual(multi.get_all("SET-COOKIE"), ["a", "b\xe9"])
        with self.assertRaises(KeyError):
            multi["x"]

    def test_text_and_json_follow_the_records_rules(self):
        with self.assertRaises(shardhost.DecodeError) as cm:
            http.Response(200, b"\xff").text()
        self.assertEqual(cm.exception.kind, "utf8")
        for body in ('{"a":1,"a":2}', "NaN", "[1,]", '{"a":1} x'):
            with self.assertRaises(shardhost.DecodeError) as cm:
                http.Response(200, body).json()
            self.assertEqual(cm.exception.kind, "json")


class Errors(unittest.TestCase):
    def test_messages_say_what_and_where(self):
        denied = http.Denied("https://api.example", "https://api.example/x")
        self.assertEqual(
            str(denied),
            "https://api.example: denied: this origin is not in the subscription's [subscription.http] allow",
        )
        self.assertEqual(str(http.Timeout("http://h/slow")), "http://h/slow: timed out")
        self.assertEqual(str(http.ConnectError("http://h/", "ConnectionRefused")), "http://h/: cannot connect: ConnectionRefused")
        self.assertIn("max_body", str(http.BodyTooLarge("http://h/big")))
        self.assertEqual(str(http.TooManyRedirects("http://h/loop")), "http://h/loop: more than 10 redirects")
        self.assertEqual(str(http.InvalidUrl("x", "why")), "x: not an http(s) URL: why")
        self.assertTrue(http.Timeout("u").transient and http.ConnectError("u").transient)
        self.assertFalse(denied.transient or http.BodyTooLarge("u").transient)
        for e in (denied, http.Timeout("u"), http.InvalidUrl("u", "w")):
            self.assertIsInstance(e, http.HttpError)
        self.assertIsInstance(http.InvalidUrl("u", "w"), ValueError)

    def test_urls_a_request_cannot_go_to_fail_before_any_request(self):
        with testing.FakeHost(http=lambda r: 200) as host:
            for url, why in [
                ("api.example/x", "http:// or https://"),
                ("ftp://files.example/", "only http and https"),
                ("https:///x", "no host"),
                ("https://user:pw@api.example/", "passwords"),
                ("https://api.example:0/", "port"),
                ("https://api.example:99999/", "port"),
                ("https://api.example/a b", "space"),
                ("not a url", "http:// or https://"),
            ]:
                with self.assertRaises(http.InvalidUrl) as cm:
                    http.get(url).send()
                self.assertIn(why, str(cm.exception))
                self.assertEqual(cm.exception.url, url)
        self.assertEqual(host.requests, [])


class Native(unittest.TestCase):
    def test_outside_shardhost_every_request_fails(self):
        with self.assertRaises(http.HttpError) as cm:
            http.get("http://h/").send()
        self.assertIn("not running inside shardhost", str(cm.exception))
        self.assertIs(type(cm.exception), http.HttpError)

    def test_config_comes_from_the_environment(self):
        with mock.patch.dict(os.environ, {"SHARDHOST_CONFIG_CARRIER_URL": "http://c/", "SHARDHOST_CONFIG_A_B": "x"}):
            self.assertEqual(config.get("carrier_url"), "http://c/")
            self.assertEqual(config.get("a.b"), "x")
            self.assertEqual(config.get("a-b"), "x")
            self.assertIsNone(config.get("missing"))
            self.assertEqual(config.get("missing", "d"), "d")
        with self.assertRaises(TypeError):
            config.get(1)

    def test_shardhost_http_without_importing_it(self):
        self.assertIs(shardhost.http, http)
        with self.assertRaises(AttributeError):
            shardhost.nothing


class Fake(unittest.TestCase):
    def test_config(self):
        with testing.FakeHost(config={"greeting": "hello", "empty": ""}):
            self.assertEqual(config.get("greeting"), "hello")
            self.assertEqual(config.get("empty"), "")
            self.assertIsNone(config.get("missing"))
            self.assertEqual(config.all(), {"greeting": "hello", "empty": ""})

    def test_answers_by_url(self):
        answers = {
            "https://carrier.example/book": http.Response(201, b"booked", {"X-Id": "9"}),
            "https://carrier.example/busy": 503,
            "https://carrier.example/slow": http.Timeout(),
            "https://carrier.example/echo": lambda r: http.Response(200, r.body),
        }
        with testing.FakeHost(http=answers) as host:
            r = http.post("https://carrier.example/book", json={"id": 9}).send()
            self.assertEqual((r.status, r.body, r.headers["x-id"], r.url), (201, b"booked", "9", "https://carrier.example/book"))
            self.assertEqual(http.get("https://carrier.example/busy").send().status, 503)
            with self.assertRaises(http.Timeout) as cm:
                http.get("https://carrier.example/slow").send()
            self.assertEqual(cm.exception.url, "https://carrier.example/slow")
            self.assertEqual(http.put("https://carrier.example/echo", body="b").send().body, b"b")
            with self.assertRaises(http.Denied) as cm:
                http.get("https://elsewhere.example:8443/x").send()
            self.assertEqual(cm.exception.origin, "https://elsewhere.example:8443")
        self.assertEqual([r.method for r in host.requests], ["POST", "GET", "GET", "PUT", "GET"])
        self.assertEqual(host.requests[0].body, b'{"id":9}')

    def test_a_function_answers_and_send_all_keeps_the_order(self):
        def answer(request):
            if request.url.endswith("/fail"):
                raise http.ConnectError(reason="refused")
            return int(request.url.rsplit("/", 1)[1])

        with testing.FakeHost(http=answer) as host:
            got = http.send_all([http.get("http://h/204"), http.get("http://h/fail"), http.get("bad"), http.get("http://h/404")])
        self.assertEqual(got[0].status, 204)
        self.assertIsInstance(got[1], http.ConnectError)
        self.assertEqual(str(got[1]), "http://h/fail: cannot connect: refused")
        self.assertIsInstance(got[2], http.InvalidUrl)
        self.assertEqual(got[3].status, 404)
        self.assertEqual(len(host.requests), 3)
        self.assertEqual(http.send_all([]), [])

    def test_a_wrong_answer_names_the_request(self):
        with testing.FakeHost(http=lambda r: "ok"):
            with self.assertRaisesRegex(TypeError, "answered 'ok' for GET http://h/"):
                http.get("http://h/").send()


class Redirects(unittest.TestCase):
    def serve(self, routes):
        """A FakeHost answering by path: (status, location) or a status."""

        def answer(request):
            path = request.url.split("/", 3)[3] if request.url.count("/") >= 3 else ""
            route = routes.get("/" + path, 404)
            if isinstance(route, tuple):
                return http.Response(route[0], headers={"Location": route[1]})
            return http.Response(route, request.method + " " + request.body.decode())

        return testing.FakeHost(http=answer)

    def test_followed_to_the_end(self):
        routes = {"/a": (301, "/b?x=1"), "/b?x=1": (302, "c"), "/c": (307, "https://other.example/d"), "/d": 200}
        with self.serve(routes) as host:
            r = http.get("http://h/a").send()
        self.assertEqual((r.status, r.url, r.text()), (200, "https://other.example/d", "GET "))
        self.assertEqual([q.url for q in host.requests], ["http://h/a", "http://h/b?x=1", "http://h/c", "https://other.example/d"])

    def test_which_redirects_keep_the_method_and_body(self):
        for status, method, kept in [
            (301, "POST", False), (302, "POST", False), (303, "POST", False), (303, "PUT", False),
            (307, "POST", True), (308, "PUT", True), (301, "GET", True), (303, "HEAD", False),
        ]:
            with self.serve({"/r": (status, "/to"), "/to": 200}) as host:
                r = http.Request(method, "http://h/r", headers={"Content-Type": "text/plain", "X": "y"}, body=b"b" if method not in ("GET", "HEAD") else None).send()
            to = host.requests[1]
            if kept:
                self.assertEqual((to.method, to.body, len(to.headers)), (method, host.requests[0].body, 2), (status, method))
            else:
                self.assertEqual((to.method, to.body, to.headers), ("HEAD" if method == "HEAD" else "GET", b"", [("X", b"y")]), (status, method))
            self.assertEqual(r.status, 200)

    def test_a_redirect_without_location_or_of_another_status_is_the_answer(self):
        with self.serve({"/r": 302, "/s": (300, "/x"), "/n": (304, "/x")}):
            self.assertEqual(http.get("http://h/r").send().status, 302)
            self.assertEqual(http.get("http://h/s").send().status, 300)
            self.assertEqual(http.get("http://h/n").send().status, 304)

    def test_at_most_ten(self):
        with self.serve({"/loop": (302, "/loop")}) as host:
            with self.assertRaises(http.TooManyRedirects):
                http.get("http://h/loop").send()
        self.assertEqual(len(host.requests), 11)
        routes = {"/%d" % i: (302, "/%d" % (i + 1)) for i in range(10)}
        routes["/10"] = 200
        with self.serve(routes):
            self.assertEqual(http.get("http://h/0").send().status, 200)

    def test_a_bad_location_and_a_denied_hop(self):
        with self.serve({"/bad": (302, "ftp://x/"), "/out": (302, "https://evil.example/")}):
            with self.assertRaises(http.InvalidUrl):
                http.get("http://h/bad").send()
        with testing.FakeHost(http={"http://h/out": http.Response(302, headers={"Location": "https://evil.example/"})}):
            with self.assertRaises(http.Denied) as cm:
                http.get("http://h/out").send()
        self.assertEqual(cm.exception.origin, "https://evil.example")


class Urls(unittest.TestCase):
    def test_split_and_join(self):
        from shardhost._url import Url

        def parts(u):
            u = Url.parse(u)
            return (u.scheme, u.authority, u.path_and_query)

        self.assertEqual(parts("https://API.example/a?b=1#f"), ("https", "api.example", "/a?b=1"))
        self.assertEqual(parts("http://127.0.0.1:8090"), ("http", "127.0.0.1:8090", "/"))
        self.assertEqual(parts("http://h?q"), ("http", "h", "/?q"))
        self.assertEqual(parts("http://[::1]:80/x"), ("http", "[::1]:80", "/x"))
        base = Url.parse("https://a.example/v1/book?x=1")
        self.assertEqual(str(base.join("https://b.example/z")), "https://b.example/z")
        self.assertEqual(str(base.join("//c.example/y")), "https://c.example/y")
        self.assertEqual(str(base.join("/root")), "https://a.example/root")
        self.assertEqual(str(base.join("next?p=2")), "https://a.example/v1/next?p=2")
        self.assertEqual(base.origin(), "https://a.example")


if __name__ == "__main__":
    unittest.main()
