// The transport of the global `fetch` under Node (installed by ./register.js): answers each
// request from `state.http` of ./host.js and records it in `calls.http`; the SDK's own fetch
// (src/http/fetch.js) does the rest, redirects included, as in a component.
import { HttpError } from "../src/http/error.js";
import { calls, state } from "./host.js";

const NO_HOST = "not running inside shardhost (a test under Node): set state.http of shardhost/testing/host to answer";
const decoder = new TextDecoder();

export function start(request) {
  const seen = {
    method: request.method,
    url: request.url.href,
    headers: new Headers(request.headers),
    body: request.body,
    text: () => decoder.decode(request.body),
  };
  calls.http.push(seen);
  return { request, seen };
}

export function wait(tickets) {
  return tickets.map((_, i) => i);
}

export function cancel() {}

export function finish({ request, seen }) {
  const url = request.url.href;
  let answer = state.http;
  if (answer === undefined) throw new HttpError("other", url, { reason: NO_HOST });
  try {
    if (typeof answer !== "function") {
      answer = Object.hasOwn(answer, url) ? answer[url] : new HttpError("denied", url, { origin: request.url.origin });
    }
    if (typeof answer === "function") answer = answer(seen);
  } catch (e) {
    answer = e;
  }
  if (answer instanceof HttpError) {
    if (answer.url !== undefined) throw answer;
    throw new HttpError(answer.kind, url, { origin: answer.kind === "denied" ? request.url.origin : answer.origin, reason: answer.reason });
  }
  if (answer instanceof Error) throw answer;
  if (typeof answer === "number") return { status: answer, headers: [], body: new Uint8Array(0) };
  if (answer === null || typeof answer !== "object" || typeof answer.status !== "number") {
    throw new TypeError(`state.http answered ${String(answer)} for ${request.method} ${url}: answer a status, { status, headers, body } or an HttpError`);
  }
  const headers = answer.headers === undefined ? [] : [...new Headers(answer.headers)];
  const body = answer.body ?? new Uint8Array(0);
  return { status: answer.status, headers, body: typeof body === "string" ? new TextEncoder().encode(body) : body };
}
