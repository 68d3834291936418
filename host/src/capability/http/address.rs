//! Which addresses a request may reach: a public address always (its name was allowed); one of
//! the host's own networks (loopback, private, link-local with the cloud's instance metadata
//! service, unique-local, multicast, unspecified, ...) only when the grant names that address
//! literally or says `allow_private = true`. Whoever controls DNS for an allowed name then
//! cannot point it inside.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use super::{HttpGrant, Origin};

/// Why an address is not public.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Inside {
    Unspecified,
    Loopback,
    /// RFC 1918.
    Private,
    /// 100.64.0.0/10, carrier-grade NAT.
    Shared,
    /// 169.254.0.0/16 and fe80::/10, where `169.254.169.254` answers with the host's
    /// credentials on most clouds.
    LinkLocal,
    /// fc00::/7 (fd00:ec2::254 is AWS's metadata service over IPv6).
    UniqueLocal,
    /// fec0::/10, deprecated but still routed inside some networks.
    SiteLocal,
    Multicast,
    Broadcast,
    /// The IETF's protocol assignments, benchmarking and the reserved 240.0.0.0/4.
    Reserved,
}

impl fmt::Display for Inside {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Inside::Unspecified => "unspecified",
            Inside::Loopback => "loopback",
            Inside::Private => "private",
            Inside::Shared => "shared (carrier-grade NAT)",
            Inside::LinkLocal => "link-local (where cloud metadata services answer)",
            Inside::UniqueLocal => "unique-local",
            Inside::SiteLocal => "site-local",
            Inside::Multicast => "multicast",
            Inside::Broadcast => "broadcast",
            Inside::Reserved => "reserved",
        })
    }
}

/// What kind of inside address `ip` is, or `None` for a public one. An IPv6 address that
/// carries an IPv4 one (v4-mapped, v4-compatible, NAT64) is judged by the IPv4 address.
pub(super) fn inside(ip: IpAddr) -> Option<Inside> {
    match ip {
        IpAddr::V4(v4) => inside_v4(v4),
        IpAddr::V6(v6) => match embedded_v4(v6) {
            Some(v4) => inside_v4(v4),
            None => inside_v6(v6),
        },
    }
}

fn inside_v4(ip: Ipv4Addr) -> Option<Inside> {
    let [a, b, c, _] = ip.octets();
    Some(match (a, b) {
        (0, _) => Inside::Unspecified,
        (127, _) => Inside::Loopback,
        (10, _) | (172, 16..=31) | (192, 168) => Inside::Private,
        (100, 64..=127) => Inside::Shared,
        (169, 254) => Inside::LinkLocal,
        (192, 0) if c == 0 => Inside::Reserved,
        (198, 18..=19) => Inside::Reserved,
        (224..=239, _) => Inside::Multicast,
        _ if ip.is_broadcast() => Inside::Broadcast,
        (240..=255, _) => Inside::Reserved,
        _ => return None,
    })
}

fn inside_v6(ip: Ipv6Addr) -> Option<Inside> {
    let first = ip.segments()[0];
    Some(match first {
        _ if ip.is_unspecified() => Inside::Unspecified,
        _ if ip.is_loopback() => Inside::Loopback,
        0xfe80..=0xfebf => Inside::LinkLocal,
        0xfec0..=0xfeff => Inside::SiteLocal,
        0xfc00..=0xfdff => Inside::UniqueLocal,
        0xff00..=0xffff => Inside::Multicast,
        _ => return None,
    })
}

/// The IPv4 address an IPv6 one stands for: `::ffff:a.b.c.d` (mapped), `::a.b.c.d`
/// (compatible, but not `::` or `::1`) and `64:ff9b::a.b.c.d` (NAT64).
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = ip.segments();
    let low = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    match s[..6] {
        [0, 0, 0, 0, 0, 0xffff] => Some(low),
        [0, 0, 0, 0, 0, 0] if !ip.is_unspecified() && !ip.is_loopback() => Some(low),
        [0x64, 0xff9b, 0, 0, 0, 0] => Some(low),
        _ => None,
    }
}

/// An address a request may not connect to, and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Refused {
    pub(super) addr: SocketAddr,
    pub(super) inside: Inside,
}

/// Splits the addresses `origin`'s name resolved to into those the grant lets a request reach
/// and those it does not: an inside address is reached only with `allow_private`, or when an
/// allowed origin names that address and port literally. An origin that is itself an address
/// was allowed literally: every address of it may be reached.
pub(super) fn admit(
    grant: &HttpGrant,
    origin: &Origin,
    resolved: Vec<SocketAddr>,
) -> (Vec<SocketAddr>, Vec<Refused>) {
    let literal = origin
        .host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse::<IpAddr>()
        .is_ok();
    if grant.allow_private || literal {
        return (resolved, Vec::new());
    }
    let mut admitted = Vec::new();
    let mut refused = Vec::new();
    for addr in resolved {
        match inside(addr.ip()) {
            Some(inside) if !names(grant, addr) => refused.push(Refused { addr, inside }),
            _ => admitted.push(addr),
        }
    }
    (admitted, refused)
}

/// Whether an allowed origin is this address and port, written as an address.
fn names(grant: &HttpGrant, addr: SocketAddr) -> bool {
    grant.allow.iter().any(|o| {
        o.port == addr.port()
            && o.host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .parse::<IpAddr>()
                .is_ok_and(|ip| canonical(ip) == canonical(addr.ip()))
    })
}

/// An IPv4-mapped IPv6 address as its IPv4 address; any other as it is.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(s: &str) -> Option<Inside> {
        inside(s.parse().unwrap())
    }

    #[test]
    fn loopback_private_link_local_and_the_rest_of_the_inside_are_named() {
        let cases = [
            ("127.0.0.1", Inside::Loopback),
            ("127.255.0.9", Inside::Loopback),
            ("::1", Inside::Loopback),
            ("10.1.2.3", Inside::Private),
            ("172.16.0.1", Inside::Private),
            ("172.31.255.255", Inside::Private),
            ("192.168.1.1", Inside::Private),
            ("100.64.0.1", Inside::Shared),
            ("169.254.169.254", Inside::LinkLocal),
            ("fe80::1", Inside::LinkLocal),
            ("fd00:ec2::254", Inside::UniqueLocal),
            ("fc00::5", Inside::UniqueLocal),
            ("fec0::1", Inside::SiteLocal),
            ("224.0.0.1", Inside::Multicast),
            ("239.255.255.250", Inside::Multicast),
            ("ff02::1", Inside::Multicast),
            ("0.0.0.0", Inside::Unspecified),
            ("0.1.2.3", Inside::Unspecified),
            ("::", Inside::Unspecified),
            ("255.255.255.255", Inside::Broadcast),
            ("240.0.0.1", Inside::Reserved),
            ("192.0.0.170", Inside::Reserved),
            ("198.18.0.1", Inside::Reserved),
        ];
        for (ip, wanted) in cases {
            assert_eq!(kind(ip), Some(wanted), "{ip}");
        }
    }

    #[test]
    fn an_ipv6_address_carrying_an_ipv4_one_is_judged_by_it() {
        assert_eq!(kind("::ffff:127.0.0.1"), Some(Inside::Loopback));
        assert_eq!(kind("::ffff:169.254.169.254"), Some(Inside::LinkLocal));
        assert_eq!(kind("::ffff:10.0.0.1"), Some(Inside::Private));
        assert_eq!(kind("::10.0.0.1"), Some(Inside::Private));
        assert_eq!(kind("64:ff9b::a9fe:a9fe"), Some(Inside::LinkLocal));
        assert_eq!(kind("::ffff:93.184.216.34"), None);
    }

    #[test]
    fn public_addresses_pass() {
        for ip in [
            "93.184.216.34",
            "8.8.8.8",
            "172.32.0.1",
            "172.15.255.255",
            "100.128.0.1",
            "169.253.1.1",
            "192.0.2.1",
            "2606:2800:220:1:248:1893:25c8:1946",
            "2001:4860:4860::8888",
        ] {
            assert_eq!(kind(ip), None, "{ip}");
        }
    }

    fn grant(allow: &[&str], allow_private: bool) -> HttpGrant {
        HttpGrant {
            allow: allow.iter().map(|o| Origin::parse(o).unwrap()).collect(),
            timeout: std::time::Duration::from_secs(1),
            max_body: 1,
            max_in_flight: 1,
            ca_file: None,
            allow_private,
        }
    }

    fn addrs(list: &[&str]) -> Vec<SocketAddr> {
        list.iter().map(|a| a.parse().unwrap()).collect()
    }

    #[test]
    fn a_name_reaches_an_inside_address_only_when_the_grant_names_it_or_allows_private() {
        let origin = Origin::parse("http://carrier.example:8090").unwrap();
        let resolved = addrs(&["127.0.0.1:8090", "[::1]:8090", "93.184.216.34:8090"]);

        let (admitted, refused) = admit(
            &grant(&["http://carrier.example:8090"], false),
            &origin,
            resolved.clone(),
        );
        assert_eq!(admitted, addrs(&["93.184.216.34:8090"]));
        assert_eq!(
            refused.iter().map(|r| r.inside).collect::<Vec<_>>(),
            [Inside::Loopback, Inside::Loopback]
        );

        let named = grant(
            &["http://carrier.example:8090", "http://127.0.0.1:8090"],
            false,
        );
        let (admitted, refused) = admit(&named, &origin, resolved.clone());
        assert_eq!(admitted, addrs(&["127.0.0.1:8090", "93.184.216.34:8090"]));
        assert_eq!(refused[0].addr, "[::1]:8090".parse().unwrap());

        let other_port = grant(
            &["http://carrier.example:8090", "http://127.0.0.1:9"],
            false,
        );
        let (_, refused) = admit(&other_port, &origin, resolved.clone());
        assert_eq!(
            refused.len(),
            2,
            "the address with another port is not named"
        );

        let private = grant(&["http://carrier.example:8090"], true);
        let (admitted, refused) = admit(&private, &origin, resolved.clone());
        assert_eq!((admitted, refused), (resolved, Vec::new()));
    }

    #[test]
    fn an_origin_written_as_an_address_is_granted_literally() {
        let origin = Origin::parse("http://169.254.169.254").unwrap();
        let resolved = addrs(&["169.254.169.254:80"]);
        let granted = grant(&["http://169.254.169.254"], false);
        assert_eq!(
            admit(&granted, &origin, resolved.clone()),
            (resolved, Vec::new())
        );
        let v6 = Origin::parse("http://[::1]:8090").unwrap();
        let resolved = addrs(&["[::1]:8090"]);
        let granted = grant(&["http://[::1]:8090"], false);
        assert_eq!(admit(&granted, &v6, resolved.clone()).0, resolved);
    }
}
