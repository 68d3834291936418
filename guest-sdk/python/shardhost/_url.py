"""Absolute `http` and `https` URLs: what a request needs (scheme, authority, path and query)
and resolving a redirect's `Location` against the URL that answered. The same rule as the Rust
SDK's `http::Url`, so the three SDKs accept and refuse the same URLs.
"""

__all__ = ["BadUrl", "Url"]


class BadUrl(ValueError):
    """Why a text is not an absolute http(s) URL (`shardhost.http` makes it an InvalidUrl)."""


def _has_space_or_control(text):
    return any(c.isspace() or ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 for c in text)


class Url:
    """An absolute `http` or `https` URL, split as `wasi:http` wants it: `scheme` (`http` or
    `https`), `authority` (`host[:port]` in lower case, an IPv6 host in brackets) and
    `path_and_query` (starting with `/`; the fragment is dropped)."""

    __slots__ = ("scheme", "authority", "path_and_query")

    def __init__(self, scheme, authority, path_and_query):
        self.scheme = scheme
        self.authority = authority
        self.path_and_query = path_and_query

    @classmethod
    def parse(cls, url):
        """Parses an absolute http(s) URL; raises BadUrl saying what is wrong with it."""
        if not isinstance(url, str):
            raise BadUrl("a URL is a str, not %s" % type(url).__name__)
        scheme, sep, rest = url.partition("://")
        if not sep:
            raise BadUrl("it does not start with http:// or https://")
        scheme = scheme.lower()
        if scheme not in ("http", "https"):
            raise BadUrl("only http and https are supported")
        rest = rest.split("#", 1)[0]
        end = len(rest)
        for i, c in enumerate(rest):
            if c in "/?":
                end = i
                break
        authority, path = rest[:end], rest[end:]
        if not authority:
            raise BadUrl("it names no host")
        if "@" in authority:
            raise BadUrl("user names and passwords in URLs are not supported")
        if _has_space_or_control(authority):
            raise BadUrl("the host holds a space or a control character")
        if authority.startswith("["):
            close = authority.find("]")
            if close < 0:
                raise BadUrl("an unclosed [ in the host")
            host_end = close + 1
        else:
            colon = authority.find(":")
            host_end = len(authority) if colon < 0 else colon
        port = authority[host_end:]
        if port:
            if not port.startswith(":"):
                raise BadUrl("a bad host")
            digits = port[1:]
            if not (digits.isascii() and digits.isdigit()) or not 0 < int(digits) <= 65535:
                raise BadUrl("the port is not a number from 1 to 65535")
        if not path:
            path = "/"
        elif path.startswith("?"):
            path = "/" + path
        if _has_space_or_control(path):
            raise BadUrl("the path holds a space or a control character (percent-encode it)")
        return cls(scheme, authority.lower(), path)

    def origin(self):
        """`scheme://host[:port]`."""
        return "%s://%s" % (self.scheme, self.authority)

    def join(self, location):
        """Resolves a `Location` against this URL: absolute, scheme-relative (`//host/...`),
        absolute-path (`/...`) or relative (`next?page=2`). Raises BadUrl."""
        location = location.strip()
        if "://" in location and not location.startswith("/"):
            return Url.parse(location)
        if location.startswith("//"):
            return Url.parse("%s:%s" % (self.scheme, location))
        if location.startswith("/"):
            return Url.parse(self.origin() + location)
        path = self.path_and_query.split("?", 1)[0]
        directory = path[: path.rfind("/") + 1] or "/"
        return Url.parse(self.origin() + directory + location)

    def __str__(self):
        return "%s://%s%s" % (self.scheme, self.authority, self.path_and_query)

    def __repr__(self):
        return "Url(%r)" % str(self)

    def __eq__(self, other):
        return isinstance(other, Url) and str(self) == str(other)

    def __hash__(self):
        return hash(str(self))
