//! [`Origin`]: reading one from `[subscription.http] allow`, and making one from the parts of a
//! request's URI so the host can compare the two.

use std::net::Ipv6Addr;

use super::{HttpGrant, Origin};

impl Origin {
    /// An origin as written in `allow`: `scheme://host[:port]`, scheme `http` or `https`, a
    /// host name, an IPv4 address or an IPv6 address in brackets, and an optional port from 1
    /// to 65535. Nothing else: no user, path, query, fragment or wildcard. Scheme and host are
    /// put in lower case and a missing port becomes the scheme's default, so two spellings of
    /// one origin compare equal. The error names the value and what to write instead.
    pub fn parse(s: &str) -> Result<Origin, String> {
        let bad = |why: String| format!("{s:?}: {why}");
        let example = "e.g. \"https://api.example.com\" or \"http://127.0.0.1:8090\"";
        let Some((scheme, rest)) = s.split_once("://") else {
            return Err(bad(format!("an origin is scheme://host[:port], {example}")));
        };
        let scheme = scheme.to_ascii_lowercase();
        if scheme != "http" && scheme != "https" {
            return Err(bad(format!(
                "the scheme must be http or https, not {scheme:?}"
            )));
        }
        // Where the authority ends: whatever follows it is what an origin does not have.
        let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let (authority, tail) = rest.split_at(end);
        let bare = |authority: &str| format!("{scheme}://{authority}");
        if let Some((_, after_user)) = authority.rsplit_once('@') {
            return Err(bad(format!(
                "an origin has no user name or password; write {:?} (credentials belong in \
                 the request's headers, e.g. from [subscription.config])",
                bare(after_user)
            )));
        }
        if !tail.is_empty() {
            let what = match tail.as_bytes()[0] {
                b'/' => "path",
                b'?' => "query",
                _ => "fragment",
            };
            return Err(bad(format!(
                "an origin has no {what}; write {:?}",
                bare(authority)
            )));
        }
        if authority.contains('*') {
            return Err(bad(
                "an origin names one host: wildcards are not supported; list each host".to_owned(),
            ));
        }
        let (host, port) = split_port(authority).map_err(bad)?;
        let host = normal_host(host).map_err(bad)?;
        let port = port.unwrap_or_else(|| Origin::default_port(&scheme));
        Ok(Origin { scheme, host, port })
    }

    /// The origin of a request from its URI's parts (`http::Uri`'s `scheme_str`, `host` and
    /// `port_u16`), normalized like [`Origin::parse`]: scheme and host in lower case, an IPv6
    /// address in brackets and in its shortest form, no port meaning the scheme's default.
    /// Validates nothing: an origin made from a malformed host simply matches no grant.
    pub fn from_parts(scheme: &str, host: &str, port: Option<u16>) -> Origin {
        let scheme = scheme.to_ascii_lowercase();
        let unbracketed = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host);
        let host = match unbracketed.parse::<Ipv6Addr>() {
            Ok(ip) => format!("[{ip}]"),
            Err(_) => host.to_ascii_lowercase(),
        };
        let port = port.unwrap_or_else(|| Origin::default_port(&scheme));
        Origin { scheme, host, port }
    }
}

impl HttpGrant {
    /// Whether a request to `origin` may go out.
    pub fn allows(&self, origin: &Origin) -> bool {
        self.allow.contains(origin)
    }
}

/// `host[:port]` → the host and the port, if written.
fn split_port(authority: &str) -> Result<(&str, Option<u16>), String> {
    let (host, port) = if authority.starts_with('[') {
        match authority.find(']') {
            Some(end) => {
                let (host, after) = authority.split_at(end + 1);
                match after.strip_prefix(':') {
                    Some(port) => (host, Some(port)),
                    None if after.is_empty() => (host, None),
                    None => return Err(format!("unexpected {after:?} after the IPv6 address")),
                }
            }
            None => return Err("an IPv6 address needs a closing `]`".to_owned()),
        }
    } else {
        match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        }
    };
    let port = match port {
        None => None,
        Some(p) => match p.parse::<u16>() {
            Ok(n) if n > 0 && p.bytes().all(|b| b.is_ascii_digit()) => Some(n),
            _ => {
                return Err(format!(
                    "the port must be a number from 1 to 65535, not {p:?}"
                ));
            }
        },
    };
    Ok((host, port))
}

/// A host as an origin holds it: a name or IPv4 address in lower case, or an IPv6 address in
/// brackets in its shortest form.
fn normal_host(host: &str) -> Result<String, String> {
    if host.is_empty() {
        return Err("the host is missing; an origin is scheme://host[:port]".to_owned());
    }
    if let Some(inner) = host.strip_prefix('[') {
        let inner = inner.strip_suffix(']').unwrap_or(inner);
        return match inner.parse::<Ipv6Addr>() {
            Ok(ip) => Ok(format!("[{ip}]")),
            Err(_) => Err(format!("{inner:?} is not an IPv6 address")),
        };
    }
    if !host.is_ascii() {
        return Err(
            "write the host in ASCII (an internationalized name in its xn-- form)".to_owned(),
        );
    }
    let ok_label = |l: &str| {
        !l.is_empty()
            && !l.starts_with('-')
            && !l.ends_with('-')
            && l.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    };
    if !host.split('.').all(ok_label) {
        return Err(format!(
            "{host:?} is not a host name: labels of letters, digits, `-` and `_`, separated by \
             single dots"
        ));
    }
    Ok(host.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn origin(scheme: &str, host: &str, port: u16) -> Origin {
        Origin {
            scheme: scheme.into(),
            host: host.into(),
            port,
        }
    }

    #[test]
    fn origins_are_normalized_to_lower_case_and_a_known_port() {
        let parse = |s: &str| Origin::parse(s).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            parse("https://api.carrier.example"),
            origin("https", "api.carrier.example", 443)
        );
        assert_eq!(
            parse("HTTPS://API.Carrier.Example:443"),
            origin("https", "api.carrier.example", 443)
        );
        assert_eq!(
            parse("http://127.0.0.1:8090"),
            origin("http", "127.0.0.1", 8090)
        );
        assert_eq!(parse("http://localhost"), origin("http", "localhost", 80));
        assert_eq!(parse("http://[::1]:8080"), origin("http", "[::1]", 8080));
        assert_eq!(
            parse("https://[0:0:0:0:0:0:0:1]"),
            origin("https", "[::1]", 443)
        );
        assert_eq!(parse("https://internal_svc.example:65535").port, 65535);
    }

    #[test]
    fn an_origin_displays_without_its_default_port() {
        let shown = |s: &str| Origin::parse(s).unwrap().to_string();
        assert_eq!(shown("https://x.example:443"), "https://x.example");
        assert_eq!(shown("http://x.example:443"), "http://x.example:443");
        assert_eq!(shown("https://[::1]:8443"), "https://[::1]:8443");
    }

    #[test]
    fn anything_but_scheme_host_and_port_is_refused_naming_the_value() {
        let cases = [
            (
                "https://x.example/api",
                "\"https://x.example/api\": an origin has no path; write \"https://x.example\"",
            ),
            (
                "https://x.example/",
                "an origin has no path; write \"https://x.example\"",
            ),
            (
                "https://x.example:8443?a=1",
                "an origin has no query; write \"https://x.example:8443\"",
            ),
            (
                "https://x.example#top",
                "an origin has no fragment; write \"https://x.example\"",
            ),
            (
                "https://user:pw@x.example",
                "an origin has no user name or password; write \"https://x.example\"",
            ),
            ("https://*.example", "wildcards are not supported"),
            (
                "ftp://x.example",
                "the scheme must be http or https, not \"ftp\"",
            ),
            ("x.example", "an origin is scheme://host[:port]"),
            ("https://", "the host is missing"),
            (
                "https://x.example:0",
                "the port must be a number from 1 to 65535, not \"0\"",
            ),
            ("https://x.example:65536", "from 1 to 65535, not \"65536\""),
            ("https://x.example:", "from 1 to 65535, not \"\""),
            ("https://x.example:+80", "from 1 to 65535, not \"+80\""),
            ("https://[::1", "needs a closing `]`"),
            ("https://[nope]", "\"nope\" is not an IPv6 address"),
            ("https://[::1]x", "unexpected \"x\" after the IPv6 address"),
            ("https://a..example", "is not a host name"),
            ("https://a b.example", "is not a host name"),
            ("https://bücher.example", "write the host in ASCII"),
        ];
        for (value, wanted) in cases {
            let err = Origin::parse(value).expect_err(value);
            assert!(err.starts_with(&format!("{value:?}: ")), "{err}");
            assert!(err.contains(wanted), "{value}: {err}");
        }
    }

    #[test]
    fn a_request_uris_parts_make_the_origin_a_grant_lists() {
        let grant = HttpGrant {
            allow: ["https://api.carrier.example", "http://[::1]:8090"]
                .map(|s| Origin::parse(s).unwrap())
                .into(),
            timeout: crate::config::defaults::HTTP_TIMEOUT,
            max_body: 1,
            max_in_flight: 1,
            ca_file: None,
            allow_private: false,
        };
        let allows = |scheme, host, port| grant.allows(&Origin::from_parts(scheme, host, port));
        assert!(allows("https", "api.carrier.example", None));
        assert!(allows("HTTPS", "API.carrier.example", Some(443)));
        assert!(allows("http", "[0::1]", Some(8090)));
        assert!(allows("http", "::1", Some(8090)));
        assert!(!allows("http", "api.carrier.example", None));
        assert!(!allows("https", "api.carrier.example", Some(8443)));
        assert!(!allows("https", "evil.example", None));
    }
}
