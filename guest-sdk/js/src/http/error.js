// Why a fetch got no response.

/** The most redirects one fetch follows (each one a new request the host checks). */
export const MAX_REDIRECTS = 10;

const TRANSIENT = new Set(["timeout", "connect"]);

/**
 * Why a `fetch` got no response: its promise rejects with one. A `TypeError`, as fetch's own
 * network errors are, with:
 *
 * - `kind`: `"denied"` (the subscription's `[subscription.http] allow` does not list the
 *   origin, or it grants no HTTP), `"timeout"` (no whole response within the grant's timeout
 *   or what was left of the call's), `"connect"` (DNS, refused, reset, TLS),
 *   `"body-too-large"` (over the grant's `max_body`), `"too-many-redirects"` (more than
 *   `MAX_REDIRECTS`), `"invalid-url"` (not an absolute http or https URL), `"other"`;
 * - `url`: the request's URL (the redirect's, when one failed); `origin` for `"denied"`;
 * - `transient`: whether trying again later may succeed (`"timeout"`, `"connect"`).
 *
 * `new HttpError(kind, url, { origin, reason })` makes one, for a test's fake answers.
 */
export class HttpError extends TypeError {
  /**
   * @param {"denied" | "timeout" | "connect" | "body-too-large" | "too-many-redirects" |
   *   "invalid-url" | "other"} kind
   * @param {string} [url]
   * @param {{ origin?: string, reason?: string, cause?: unknown }} [details]
   */
  constructor(kind, url, { origin, reason = "", cause } = {}) {
    super(message(kind, url, origin, reason), cause === undefined ? undefined : { cause });
    this.name = "HttpError";
    this.kind = kind;
    this.url = url;
    this.origin = origin ?? originOf(url);
    this.reason = reason;
  }

  get transient() {
    return TRANSIENT.has(this.kind);
  }
}

function originOf(url) {
  try {
    return new URL(url).origin;
  } catch {
    return undefined;
  }
}

function message(kind, url, origin, reason) {
  const at = url === undefined ? "fetch" : `fetch ${url}`;
  switch (kind) {
    case "denied":
      return `${at}: denied: the origin ${origin ?? originOf(url)} is not in the subscription's [subscription.http] allow`;
    case "timeout":
      return `${at}: timed out`;
    case "connect":
      return `${at}: cannot connect${reason ? `: ${reason}` : ""}`;
    case "body-too-large":
      return `${at}: the response body is larger than the subscription's max_body`;
    case "too-many-redirects":
      return `${at}: more than ${MAX_REDIRECTS} redirects`;
    case "invalid-url":
      return `${at}: not an http(s) URL${reason ? `: ${reason}` : ""}`;
    default:
      return `${at}: ${reason || "failed"}`;
  }
}
