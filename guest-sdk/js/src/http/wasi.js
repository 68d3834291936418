// The transport of the SDK's fetch in a component: wasi:http's outgoing handler, the only
// module that names wasi:http's bindings (bundled only into components built with HTTP, for
// a world that includes `http`). See ./fetch.js for what a transport does.
//
// Every resource is released explicitly, children before their parents (a pollable before its
// future, a stream before its body, headers and body before their response), as the host
// requires: the bindings release a resource they were handed back only when told to.

import { handle as send } from "wasi:http/outgoing-handler@0.2.12";
import { Fields, OutgoingBody, OutgoingRequest, httpErrorCode } from "wasi:http/types@0.2.12";
import { poll } from "wasi:io/poll@0.2.12";

import { HttpError } from "./error.js";

const DISPOSE = Symbol.dispose ?? Symbol.for("dispose");
const CHUNK = 64n * 1024n;
const WRITE = 4096;

function release(resource) {
  if (resource !== undefined && resource !== null) resource[DISPOSE]();
}

const METHODS = {
  GET: { tag: "get" },
  HEAD: { tag: "head" },
  POST: { tag: "post" },
  PUT: { tag: "put" },
  DELETE: { tag: "delete" },
  PATCH: { tag: "patch" },
  OPTIONS: { tag: "options" },
};

const TIMEOUTS = new Set([
  "connection-timeout",
  "connection-read-timeout",
  "connection-write-timeout",
  "HTTP-response-timeout",
  "DNS-timeout",
]);
const CONNECTS = new Set([
  "DNS-error",
  "destination-not-found",
  "destination-unavailable",
  "destination-IP-prohibited",
  "destination-IP-unroutable",
  "connection-refused",
  "connection-terminated",
  "connection-limit-reached",
  "TLS-protocol-error",
  "TLS-certificate-error",
  "TLS-alert-received",
]);

/** What the host's error code (a wasi:http `error-code`) means for the user. */
export function errorOf(request, code) {
  const url = request.url.href;
  const tag = code?.tag ?? String(code);
  if (tag === "HTTP-request-denied") return new HttpError("denied", url, { origin: request.url.origin });
  if (TIMEOUTS.has(tag)) return new HttpError("timeout", url);
  if (tag === "HTTP-response-body-size") return new HttpError("body-too-large", url);
  const shown = code?.val === undefined ? tag : `${tag}(${JSON.stringify(code.val, (k, v) => (typeof v === "bigint" ? Number(v) : v))})`;
  if (CONNECTS.has(tag)) return new HttpError("connect", url, { reason: shown });
  return new HttpError("other", url, { reason: shown });
}

function latin1(text) {
  const bytes = new Uint8Array(text.length);
  for (let i = 0; i < text.length; i++) bytes[i] = text.charCodeAt(i) & 0xff;
  return bytes;
}

function fromLatin1(bytes) {
  let text = "";
  for (let i = 0; i < bytes.length; i += 8192) text += String.fromCharCode(...bytes.subarray(i, i + 8192));
  return text;
}

const BODY_METHODS = new Set(["POST", "PUT", "PATCH"]);

/** The request's headers, with `content-length` when it has a body (or is a POST, PUT or PATCH)
 * and does not say one: the host then sends the body with its length rather than in chunks,
 * which some servers do not read. */
function withLength(request) {
  const { headers, body, method } = request;
  if ((body.length === 0 && !BODY_METHODS.has(method)) || headers.some(([n]) => n.toLowerCase() === "content-length")) return headers;
  return [...headers, ["content-length", String(body.length)]];
}

/** Hands a request to the host; its ticket (the future-incoming-response). Once the host has
 * the request, a failure to write or finish its body is not thrown: the body is dropped
 * unfinished, the host fails the request, and its future says why. */
export function start(request) {
  const url = request.url.href;
  let fields;
  try {
    fields = Fields.fromList(withLength(request).map(([name, value]) => [name, latin1(value)]));
  } catch (e) {
    throw new HttpError("other", url, { reason: `a header the host refuses: ${e?.payload?.tag ?? e}` });
  }
  let outgoing = new OutgoingRequest(fields); // takes the fields
  let body;
  try {
    try {
      outgoing.setMethod(METHODS[request.method] ?? { tag: "other", val: request.method });
      outgoing.setScheme(request.url.protocol === "https:" ? { tag: "HTTPS" } : { tag: "HTTP" });
      outgoing.setAuthority(request.url.host);
      outgoing.setPathWithQuery(request.url.pathname + request.url.search);
    } catch {
      throw new HttpError("other", url, { reason: "the host refuses the method or URL" });
    }
    body = outgoing.body();
    const sending = outgoing;
    outgoing = undefined;
    let future;
    try {
      future = send(sending, undefined); // takes the request
    } catch (e) {
      throw errorOf(request, e?.payload);
    }
    if (write(body, request.body)) {
      const finishing = body;
      body = undefined;
      try {
        OutgoingBody.finish(finishing, undefined); // takes the body
      } catch {
        // the future tells
      }
    }
    return { future, request };
  } finally {
    release(body);
    release(outgoing);
  }
}

/** Writes the request body; false when the host took no more of it. */
function write(body, bytes) {
  let stream;
  try {
    stream = body.write();
  } catch {
    return false;
  }
  try {
    for (let at = 0; at < bytes.length; at += WRITE) {
      stream.blockingWriteAndFlush(bytes.subarray(at, at + WRITE));
    }
    return true;
  } catch (e) {
    if (e?.payload?.tag === "last-operation-failed") release(e.payload.val);
    return false;
  } finally {
    release(stream);
  }
}

/** Blocks until one or more of the tickets' responses are ready; their indices. */
export function wait(tickets) {
  const pollables = tickets.map((t) => t.future.subscribe());
  try {
    return Array.from(poll(pollables));
  } finally {
    for (const p of pollables) release(p);
  }
}

/** Gives a request up (the host stops it). */
export function cancel(ticket) {
  release(ticket.future);
}

/** The whole response of a ready ticket. */
export function finish({ future, request }) {
  try {
    const got = future.get();
    if (got === undefined) throw new HttpError("other", request.url.href, { reason: "the response is not ready" });
    if (got.tag === "err") throw new HttpError("other", request.url.href, { reason: "the response was already taken" });
    if (got.val.tag === "err") throw errorOf(request, got.val.val);
    const response = got.val.val;
    try {
      const status = response.status();
      const fields = response.headers();
      let headers;
      try {
        headers = fields.entries().map(([name, value]) => [name, fromLatin1(value)]);
      } finally {
        release(fields);
      }
      return { status, headers, body: read(request, response) };
    } finally {
      release(response);
    }
  } finally {
    release(future);
  }
}

/** A response's body, read to its end. */
function read(request, response) {
  const url = request.url.href;
  let incoming;
  try {
    incoming = response.consume();
  } catch {
    throw new HttpError("other", url, { reason: "the response body was already taken" });
  }
  const chunks = [];
  let length = 0;
  try {
    let stream;
    try {
      stream = incoming.stream();
    } catch {
      throw new HttpError("other", url, { reason: "no response body stream" });
    }
    try {
      for (;;) {
        let chunk;
        try {
          chunk = stream.blockingRead(CHUNK);
        } catch (e) {
          const error = e?.payload;
          if (error?.tag === "closed") break;
          if (error?.tag !== "last-operation-failed") throw e;
          let code;
          let why;
          try {
            code = httpErrorCode(error.val);
            if (code === undefined) why = error.val.toDebugString();
          } finally {
            release(error.val);
          }
          // without an error code, the host's own words for it
          if (code === undefined) throw new HttpError("other", url, { reason: `the response body broke off: ${why}` });
          throw errorOf(request, code);
        }
        chunks.push(chunk);
        length += chunk.length;
      }
    } finally {
      release(stream);
    }
  } finally {
    release(incoming);
  }
  if (chunks.length === 1) return chunks[0];
  const body = new Uint8Array(length);
  let at = 0;
  for (const c of chunks) {
    body.set(c, at);
    at += c.length;
  }
  return body;
}
