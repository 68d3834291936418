//! The status page (`GET /`): one HTML file, one script and one stylesheet, embedded in the
//! binary and served as they are. They hold no data, so they are served without the token
//! (a browser cannot send one on a plain navigation); the page's script asks `GET /status` and
//! `GET /status/history` for the data, sending the token the operator gave it (kept in the
//! tab's `sessionStorage`), and those routes refuse a request without it as every other route
//! does. The same-origin rules ([`guard::same_origin`](super::guard::same_origin)) apply to the
//! page and its assets too: a same-origin navigation, a classic script, a stylesheet and a
//! same-origin `GET` from the script carry no `Origin` header, so the page works under them.
//!
//! The Content-Security-Policy allows nothing but this origin: no inline script or style, no
//! other host (nothing is loaded from the internet), no frames, no forms sent anywhere.

use axum::http::header;
use axum::response::{IntoResponse, Response};

const INDEX: &str = include_str!("page/index.html");
const SCRIPT: &str = include_str!("page/status.js");
const STYLE: &str = include_str!("page/status.css");

/// Every path the page's assets are served at.
pub const SCRIPT_PATH: &str = "/page/status.js";
pub const STYLE_PATH: &str = "/page/status.css";

/// What the page may load and do: this origin only.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; \
     style-src 'self'; img-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; \
     form-action 'none'; frame-ancestors 'none'";

pub async fn index() -> Response {
    asset("text/html; charset=utf-8", INDEX)
}

pub async fn script() -> Response {
    asset("text/javascript; charset=utf-8", SCRIPT)
}

pub async fn style() -> Response {
    asset("text/css; charset=utf-8", STYLE)
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::REFERRER_POLICY, "no-referrer"),
            (header::X_FRAME_OPTIONS, "DENY"),
            // A new binary may serve a new page: never keep a stale one.
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_names_only_its_own_assets_and_nothing_inline() {
        assert!(INDEX.contains(&format!("src=\"{SCRIPT_PATH}\"")));
        assert!(INDEX.contains(&format!("href=\"{STYLE_PATH}\"")));
        assert!(!INDEX.contains("http://") && !INDEX.contains("https://"));
        assert!(!INDEX.contains("<style") && !INDEX.contains(" style="));
        assert!(!INDEX.contains("onclick") && !INDEX.contains("onload"));
        // A module script is fetched in CORS mode, with an Origin header the guard refuses.
        assert!(!INDEX.contains("type=\"module\""));
        // The one URL: SVG's namespace, a name, never fetched.
        let script = SCRIPT.replace("\"http://www.w3.org/2000/svg\"", "");
        for text in [script.as_str(), STYLE] {
            assert!(!text.contains("http://") && !text.contains("https://"));
        }
    }
}
