// `fetch` over a transport: what the SDK installs as the global `fetch` of a component built
// with HTTP (src/http/install.js, over wasi:http), and of a handler's tests under Node
// (testing/http.js, over a fake).
//
// A transport sends one request and answers its response, without redirects:
//   start(request) -> ticket     hands it to the host (throws an HttpError when it cannot)
//   wait(tickets) -> [index]     blocks until one or more are ready; their indices
//   finish(ticket) -> answer     the whole response of a ready one, { status, headers:
//                                [[name, value]], body: Uint8Array } (throws an HttpError)
//   cancel(ticket)               gives a request up
// `request`: { method, url (a URL), headers: [[name, value]], body: Uint8Array }.
//
// Every fetch hands its request to the transport at once; one driver, run as a task when the
// handler's code has nothing left to do but wait (setTimeout 0), waits on all of them
// together and settles each as its response arrives: `Promise.all` of fetches sends them all
// at once, and takes about the time of the slowest.

import { HttpError, MAX_REDIRECTS } from "./error.js";

const encoder = new TextEncoder();
const REDIRECTS = new Set([301, 302, 303, 307, 308]);
const NULL_BODY = new Set([101, 103, 204, 205, 304]);
const NORMALIZED = new Set(["DELETE", "GET", "HEAD", "OPTIONS", "POST", "PUT", "PATCH"]);
const FORBIDDEN_METHODS = new Set(["CONNECT", "TRACE", "TRACK"]);
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

function later(task) {
  if (typeof setTimeout === "function") setTimeout(task, 0);
  else queueMicrotask(task);
}

/**
 * A `fetch` over `transport` (see the top of this file).
 * @param {object} transport
 * @param {{ schedule?: (task: () => void) => void }} [options] how the driver is scheduled
 */
export function createFetch(transport, { schedule = later } = {}) {
  /** Requests in flight: { ticket, request, hops, redirected, resolve, reject, signal, onAbort }. */
  const pending = [];
  let scheduled = false;

  function kick() {
    if (!scheduled && pending.length > 0) {
      scheduled = true;
      schedule(drive);
    }
  }

  function drive() {
    scheduled = false;
    if (pending.length === 0) return;
    let ready;
    try {
      ready = transport.wait(pending.map((job) => job.ticket));
    } catch (e) {
      for (const job of pending.splice(0)) {
        transport.cancel(job.ticket);
        fail(job, e);
      }
      return;
    }
    const indices = [...new Set(ready)].sort((a, b) => b - a);
    const done = indices.map((i) => pending.splice(i, 1)[0]).reverse();
    for (const job of done) settle(job);
    kick();
  }

  function settle(job) {
    let answer;
    try {
      answer = transport.finish(job.ticket);
    } catch (e) {
      fail(job, e);
      return;
    }
    const location = REDIRECTS.has(answer.status) ? header(answer.headers, "location") : undefined;
    if (location !== undefined && job.request.redirect !== "manual") {
      const url = job.request.url.href;
      if (job.request.redirect === "error") {
        fail(job, new HttpError("other", url, { reason: `redirected (${answer.status}), and redirect is "error"` }));
        return;
      }
      if (job.hops >= MAX_REDIRECTS) {
        fail(job, new HttpError("too-many-redirects", url));
        return;
      }
      let to;
      try {
        to = parseUrl(location, job.request.url);
      } catch (e) {
        fail(job, e);
        return;
      }
      job.request = redirected(job.request, answer.status, to);
      job.hops++;
      job.redirected = true;
      start(job);
      return;
    }
    let response;
    try {
      response = toResponse(answer, job.request.url.href, job.redirected);
    } catch (e) {
      fail(job, e);
      return;
    }
    done(job);
    job.resolve(response);
  }

  function start(job) {
    try {
      job.ticket = transport.start(job.request);
    } catch (e) {
      fail(job, e);
      return;
    }
    pending.push(job);
    kick();
  }

  function fail(job, e) {
    done(job);
    job.reject(e);
  }

  function done(job) {
    if (job.onAbort) job.signal.removeEventListener("abort", job.onAbort);
  }

  /**
   * `fetch(input, init)` as the Fetch standard has it (a URL or a Request, and `method`,
   * `headers`, `body`, `redirect`, `signal`), resolving to a `Response` once its whole body
   * has arrived. Rejects with an `HttpError` when there is no response.
   * @param {string | URL | Request} input
   * @param {RequestInit} [init]
   * @returns {Promise<Response>}
   */
  return async function fetch(input, init = undefined) {
    const request = await toRequest(input, init ?? {});
    const signal = request.signal;
    if (signal?.aborted) throw signal.reason;
    return new Promise((resolve, reject) => {
      const job = { ticket: undefined, request, hops: 0, redirected: false, resolve, reject, signal, onAbort: undefined };
      if (signal) {
        job.onAbort = () => {
          const at = pending.indexOf(job);
          if (at >= 0) {
            pending.splice(at, 1);
            transport.cancel(job.ticket);
          }
          job.reject(signal.reason);
        };
        signal.addEventListener("abort", job.onAbort, { once: true });
      }
      start(job);
    });
  };
}

function header(headers, name) {
  for (const [n, v] of headers) if (n.toLowerCase() === name) return v;
  return undefined;
}

/** The URL of a request (`base`: where a relative one is resolved), http or https only. */
function parseUrl(text, base) {
  let url;
  try {
    url = base === undefined ? new URL(text) : new URL(text, base);
  } catch {
    throw new HttpError("invalid-url", String(text), { reason: "not an absolute URL" });
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw new HttpError("invalid-url", url.href, { reason: "only http and https are supported" });
  }
  if (url.username !== "" || url.password !== "") {
    throw new HttpError("invalid-url", String(text), { reason: "user names and passwords in URLs are not supported" });
  }
  return url;
}

/** The request a redirect (`status`, to the URL `to`) continues as (the Fetch standard's rule). */
function redirected(request, status, to) {
  const keeps = status === 307 || status === 308 || ((status === 301 || status === 302) && (request.method === "GET" || request.method === "HEAD"));
  if (keeps) return { ...request, url: to };
  return {
    ...request,
    url: to,
    method: request.method === "HEAD" ? "HEAD" : "GET",
    body: new Uint8Array(0),
    headers: request.headers.filter(([n]) => !/^content-(type|length|encoding|language|location)$/i.test(n)),
  };
}

async function toRequest(input, init) {
  let url;
  let method = "GET";
  let headers;
  let body = null;
  let redirect = "follow";
  let signal;
  if (typeof Request === "function" && input instanceof Request) {
    url = input.url;
    method = input.method;
    headers = input.headers;
    redirect = input.redirect ?? "follow";
    signal = input.signal ?? undefined;
    if (input.body !== null && input.body !== undefined && init.body === undefined) {
      body = new Uint8Array(await input.arrayBuffer());
    }
  } else {
    url = input instanceof URL ? input.href : String(input);
  }
  if (init.method !== undefined) method = String(init.method);
  if (init.headers !== undefined) headers = init.headers;
  if (init.redirect !== undefined) redirect = init.redirect;
  if (init.signal !== undefined) signal = init.signal ?? undefined;
  if (!TOKEN.test(method)) throw new TypeError(`fetch: ${JSON.stringify(method)} is not a valid method`);
  if (NORMALIZED.has(method.toUpperCase())) method = method.toUpperCase();
  if (FORBIDDEN_METHODS.has(method.toUpperCase())) throw new TypeError(`fetch: the method ${method} is not allowed`);
  if (!["follow", "manual", "error"].includes(redirect)) {
    throw new TypeError(`fetch: redirect is "follow", "manual" or "error", not ${JSON.stringify(redirect)}`);
  }
  const list = headerList(headers);
  let type;
  if (init.body !== undefined && init.body !== null) [body, type] = await bodyBytes(init.body);
  if (body !== null && body.length > 0 && (method === "GET" || method === "HEAD")) {
    throw new TypeError(`fetch: a ${method} request cannot have a body`);
  }
  if (type && !list.some(([n]) => n.toLowerCase() === "content-type")) list.push(["content-type", type]);
  return { method, url: parseUrl(url), headers: list, body: body ?? new Uint8Array(0), redirect, signal };
}

/** [[name, value]] of a HeadersInit: a Headers, an array of pairs, or an object. */
function headerList(init) {
  if (init === undefined || init === null) return [];
  if (typeof Headers === "function") return [...new Headers(init)];
  const pairs = Symbol.iterator in Object(init) ? [...init] : Object.entries(init);
  return pairs.map(([n, v]) => [String(n).toLowerCase(), String(v)]);
}

/** A body's bytes and its default Content-Type, as fetch extracts them. */
async function bodyBytes(body) {
  if (body instanceof Uint8Array) return [body, undefined];
  if (body instanceof ArrayBuffer) return [new Uint8Array(body), undefined];
  if (ArrayBuffer.isView(body)) return [new Uint8Array(body.buffer, body.byteOffset, body.byteLength), undefined];
  if (typeof body === "string") return [encoder.encode(body), "text/plain;charset=UTF-8"];
  if (typeof Response !== "function") throw new TypeError("fetch: a body is a string or bytes");
  // URLSearchParams, Blob, FormData, ReadableStream: as the platform's own Response reads them.
  const read = new Response(body);
  const type = read.headers.get("content-type") ?? undefined;
  return [new Uint8Array(await read.arrayBuffer()), type];
}

/** The platform's Response of an answer, with its URL and whether a redirect led there. */
function toResponse(answer, url, wasRedirected) {
  const { status } = answer;
  if (status < 200 || status > 599) {
    throw new HttpError("other", url, { reason: `the response status ${status} is not one fetch can give` });
  }
  const headers = new Headers();
  for (const [name, value] of answer.headers) {
    try {
      headers.append(name, value);
    } catch {
      // a header the platform refuses (its name or value): left out
    }
  }
  const response = new Response(NULL_BODY.has(status) ? null : answer.body, { status, headers });
  Object.defineProperty(response, "url", { value: url, enumerable: true });
  Object.defineProperty(response, "redirected", { value: wasRedirected, enumerable: true });
  return response;
}
