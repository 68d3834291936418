//! Absolute `http` and `https` URLs: what a request needs (scheme, authority, path and
//! query), and resolving a redirect's `Location` against the URL that answered.

use std::fmt;

use super::Error;

/// An absolute `http` or `https` URL, split as `wasi:http` wants it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Url {
    /// `http` or `https`.
    pub scheme: String,
    /// `host[:port]` as written (an IPv6 host in brackets).
    pub authority: String,
    /// The path and query, starting with `/` (the fragment is dropped).
    pub path_and_query: String,
}

impl Url {
    /// Parses an absolute `http` or `https` URL.
    ///
    /// # Errors
    ///
    /// [`Error::Url`] naming the URL and what is wrong with it.
    pub fn parse(url: &str) -> Result<Url, Error> {
        let bad = |why: &str| Error::Url {
            url: url.to_owned(),
            why: why.to_owned(),
        };
        let (scheme, rest) = url
            .split_once("://")
            .ok_or_else(|| bad("it does not start with http:// or https://"))?;
        let scheme = scheme.to_ascii_lowercase();
        if scheme != "http" && scheme != "https" {
            return Err(bad("only http and https are supported"));
        }
        let rest = rest.split('#').next().unwrap_or_default();
        let end = rest.find(['/', '?']).unwrap_or(rest.len());
        let (authority, path) = rest.split_at(end);
        if authority.is_empty() {
            return Err(bad("it names no host"));
        }
        if authority.contains('@') {
            return Err(bad("user names and passwords in URLs are not supported"));
        }
        if authority
            .chars()
            .any(|c| c.is_whitespace() || c.is_control())
        {
            return Err(bad("the host holds a space or a control character"));
        }
        let host_end = if authority.starts_with('[') {
            authority
                .find(']')
                .map(|i| i + 1)
                .ok_or_else(|| bad("an unclosed [ in the host"))?
        } else {
            authority.find(':').unwrap_or(authority.len())
        };
        let port = &authority[host_end..];
        if !port.is_empty() {
            let digits = port.strip_prefix(':').ok_or_else(|| bad("a bad host"))?;
            if digits.parse::<u16>().map_or(true, |p| p == 0) {
                return Err(bad("the port is not a number from 1 to 65535"));
            }
        }
        let path_and_query = match path {
            "" => "/".to_owned(),
            p if p.starts_with('?') => format!("/{p}"),
            p => p.to_owned(),
        };
        if path_and_query
            .chars()
            .any(|c| c.is_whitespace() || c.is_control())
        {
            return Err(bad(
                "the path holds a space or a control character (percent-encode it)",
            ));
        }
        Ok(Url {
            scheme,
            authority: authority.to_ascii_lowercase(),
            path_and_query,
        })
    }

    /// `scheme://host[:port]`.
    pub fn origin(&self) -> String {
        format!("{}://{}", self.scheme, self.authority)
    }

    /// Resolves a `Location` against this URL: absolute, scheme-relative (`//host/…`),
    /// absolute-path (`/…`) or relative (`next?page=2`).
    ///
    /// # Errors
    ///
    /// When the result is not an http(s) URL.
    pub fn join(&self, location: &str) -> Result<Url, Error> {
        let location = location.trim();
        if location.contains("://") && !location.starts_with('/') {
            return Url::parse(location);
        }
        if let Some(rest) = location.strip_prefix("//") {
            return Url::parse(&format!("{}://{rest}", self.scheme));
        }
        if location.starts_with('/') {
            return Url::parse(&format!("{}{location}", self.origin()));
        }
        let path = self.path_and_query.split('?').next().unwrap_or("/");
        let dir = &path[..path.rfind('/').map_or(0, |i| i + 1)];
        let dir = if dir.is_empty() { "/" } else { dir };
        Url::parse(&format!("{}{dir}{location}", self.origin()))
    }
}

impl fmt::Display for Url {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}://{}{}",
            self.scheme, self.authority, self.path_and_query
        )
    }
}

#[cfg(test)]
mod tests {
    use super::Url;

    fn parsed(url: &str) -> (String, String, String) {
        let u = Url::parse(url).unwrap_or_else(|e| panic!("{url}: {e}"));
        (u.scheme, u.authority, u.path_and_query)
    }

    fn s(a: &str, b: &str, c: &str) -> (String, String, String) {
        (a.to_owned(), b.to_owned(), c.to_owned())
    }

    #[test]
    fn an_http_url_splits_into_scheme_authority_and_path() {
        assert_eq!(
            parsed("https://API.example/a?b=1#f"),
            s("https", "api.example", "/a?b=1")
        );
        assert_eq!(
            parsed("http://127.0.0.1:8090"),
            s("http", "127.0.0.1:8090", "/")
        );
        assert_eq!(parsed("http://h?q"), s("http", "h", "/?q"));
        assert_eq!(parsed("http://[::1]:80/x"), s("http", "[::1]:80", "/x"));
    }

    #[test]
    fn urls_a_request_cannot_go_to_are_refused_with_the_reason() {
        for (url, why) in [
            ("api.example/x", "http:// or https://"),
            ("ftp://files.example/", "only http and https"),
            ("https:///x", "no host"),
            ("https://user:pw@api.example/", "passwords"),
            ("https://api.example:0/", "port"),
            ("https://api.example:99999/", "port"),
            ("https://api.example/a b", "space"),
        ] {
            let e = Url::parse(url).unwrap_err().to_string();
            assert!(e.contains(url) && e.contains(why), "{url}: {e}");
        }
    }

    #[test]
    fn a_redirect_location_resolves_against_the_url_that_answered() {
        let base = Url::parse("https://a.example/v1/book?x=1").unwrap();
        let join = |l| base.join(l).unwrap().to_string();
        assert_eq!(join("https://b.example/z"), "https://b.example/z");
        assert_eq!(join("//c.example/y"), "https://c.example/y");
        assert_eq!(join("/root"), "https://a.example/root");
        assert_eq!(join("next?p=2"), "https://a.example/v1/next?p=2");
    }
}
