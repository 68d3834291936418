// The conformance handler in JavaScript (tests/conformance/README.md): a per-batch handler
// whose records' partition keys are commands. Its twins are tests/conformance/rust and python;
// the cases are tests/conformance/contract.ndjson and http.ndjson (the `http` and `config:NAME`
// commands; every `http` record of a call is fetched at once, with Promise.all).
//
// Build: ./build (next to this file) writes conformance.wasm.

import {
  batchHandler, ack, drop, retry, retryAfter, publish, seek, log, config, DecodeError, HostError,
  HttpError,
} from "shardhost";

/** 2020-01-01T00:00:00Z in milliseconds since the epoch. */
const EPOCH_2020_MS = 1577836800000;
const U64_MAX = 18446744073709551615n;
const PUBLISH_STREAM = "conformance-out";
const PUBLISH_KEY = "k";
const U32_MAX = 4294967295n;
const DIGITS = /^[0-9]+$/;
const UNSIGNED = /^\+?[0-9]+$/;

/** An unsigned number as Rust's `str::parse` reads it (ASCII digits, an optional leading `+`,
 * at most `limit`), as a bigint; undefined for anything else. */
function number(text, limit = U64_MAX) {
  if (!UNSIGNED.test(text)) return undefined;
  const n = BigInt(text.startsWith("+") ? text.slice(1) : text);
  return n <= limit ? n : undefined;
}

/** `ack`, `drop`, `retry` or `retry-after:N` as an outcome; undefined for anything else. */
function outcome(name) {
  switch (name) {
    case "ack":
      return ack;
    case "drop":
      return drop;
    case "retry":
      return retry;
  }
  if (name.startsWith("retry-after:")) {
    const ms = number(name.slice("retry-after:".length));
    if (ms !== undefined) return retryAfter(ms);
  }
  return undefined;
}

const verdict = (ok) => (ok ? ack : drop);

function metaOk(info, record) {
  return (
    DIGITS.test(record.sequenceNumber) &&
    record.subSequenceNumber === 0 &&
    record.arrivalMillis > EPOCH_2020_MS &&
    info.stream !== "" &&
    info.shardId !== ""
  );
}

/** Whether `f()` does not throw a DecodeError (anything else is thrown on). */
function decodes(f) {
  try {
    f();
    return true;
  } catch (e) {
    if (e instanceof DecodeError) return false;
    throw e;
  }
}

const LOSSY = new TextDecoder("utf-8");

/** ack when the host call succeeds; retry (with a warning) when the host refuses it. */
function refusable(what, call) {
  try {
    call();
  } catch (e) {
    if (!(e instanceof HostError)) throw e;
    log.warn("%s refused: %s", what, e.message);
    return retry;
  }
  return ack;
}

/** The outcome of one record whose partition key is a command: `ack`, `drop`, `retry`,
 * `retry-after:N`, or a verb and an argument after the first colon (none: empty). */
function command(info, record) {
  const key = record.partitionKey;
  const simple = outcome(key);
  if (simple !== undefined) return simple;
  const colon = key.indexOf(":");
  const verb = colon < 0 ? key : key.slice(0, colon);
  const arg = colon < 0 ? "" : key.slice(colon + 1);
  switch (verb) {
    case "size": {
      const n = number(arg);
      return verdict(n !== undefined && BigInt(record.data.length) === n);
    }
    case "sum": {
      const n = number(arg);
      let sum = 0;
      const data = record.data;
      for (let i = 0; i < data.length; i++) sum += data[i];
      return verdict(n !== undefined && BigInt(sum) === n);
    }
    case "text":
      return verdict(decodes(() => record.text()));
    case "json":
      return verdict(decodes(() => record.json()));
    case "attempt": {
      const n = number(arg, U32_MAX);
      return verdict(n !== undefined && BigInt(record.attempt) === n);
    }
    case "meta":
      return verdict(metaOk(info, record));
    case "publish":
      return refusable("publish", () => publish(PUBLISH_STREAM, PUBLISH_KEY, record.data));
    case "seek":
      return refusable("seek", () => seek(arg));
    case "log":
      log.info("%s", LOSSY.decode(record.data));
      return ack;
    case "config": {
      const value = config.get(arg);
      if (value === undefined) return drop;
      return value === LOSSY.decode(record.data) ? ack : retry;
    }
    case "raise":
      throw new Error("raised on purpose");
  }
  return drop;
}

/** What a failed fetch answers: retry-after of its code. */
const HTTP_ERRORS = { denied: 1, timeout: 2, connect: 3, "body-too-large": 4 };

/** The outcome of one `http` record: its data is the request, as JSON. */
async function http(record) {
  const spec = record.json();
  let response;
  let body;
  try {
    response = await fetch(spec.url, { method: spec.method ?? "GET", headers: spec.headers, body: spec.body });
    body = await response.text();
  } catch (e) {
    log.info("http: %s", e.message);
    return retryAfter(e instanceof HttpError ? (HTTP_ERRORS[e.kind] ?? 5) : 5);
  }
  if (spec.expect_body !== undefined && body !== spec.expect_body) {
    log.info("http: %s answered %j, not %j", response.url, body.slice(0, 200), spec.expect_body);
    return retryAfter(6);
  }
  return retryAfter(response.status);
}

async function withHttp(info, records) {
  const sent = await Promise.all(records.map((r) => (r.partitionKey === "http" ? http(r) : undefined)));
  return records.map((r, i) => sent[i] ?? command(info, r));
}

export function conformance(info, records) {
  if (records.length > 0 && records[0].partitionKey.startsWith("all:")) {
    // One outcome for the batch; drop when the rest of the key is not an outcome.
    return outcome(records[0].partitionKey.slice("all:".length)) ?? drop;
  }
  const wrongShape = (outcomes) => {
    // One outcome fewer than records: the call must fail.
    if (records.some((r) => r.partitionKey === "wrong-shape")) outcomes.pop();
    return outcomes;
  };
  if (records.some((r) => r.partitionKey === "http")) return withHttp(info, records).then(wrongShape);
  return wrongShape(records.map((r) => command(info, r)));
}

export const handle = batchHandler(conformance);
