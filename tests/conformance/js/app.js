// The conformance handler in JavaScript (tests/conformance/README.md): a per-batch handler
// whose records' partition keys are commands. Its twins are tests/conformance/rust and python;
// the cases are tests/conformance/contract.ndjson, http.ndjson (the `http` and `config:NAME`
// commands; every `http` record of a call is fetched at once, with Promise.all) and
// state.ndjson (the `state` command).
//
// Build: ./build (next to this file) writes conformance.wasm, for the world handler+http+state
// (the app fetches and uses state).

import {
  batchHandler, ack, drop, retry, retryAfter, publish, seek, log, config, state, DecodeError, HostError,
  HttpError, StateError,
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
    case "state":
      if (key === "state") return stateCommand(record);
      break;
    case "raise":
      throw new Error("raised on purpose");
  }
  return drop;
}

const encoder = new TextEncoder();
const asText = (value) => (value === undefined ? null : LOSSY.decode(value));

/** What the effect of a `once` with `"fail": true` throws. */
class EffectFailed extends Error {}

/** The result of one state operation (README "State"), as a JSON value: what the operation
 * answered, or { error: KIND } when it threw a StateError ({ error: "effect" }: the effect of a
 * `once` threw). */
function stateResult(spec) {
  const target = spec.bucket !== undefined ? state.bucket(spec.bucket) : state;
  const key = spec.key_size !== undefined ? "k".repeat(spec.key_size) : spec.key;
  const value = spec.value_size !== undefined ? new Uint8Array(spec.value_size).fill(0x78) : encoder.encode(spec.value ?? "");
  try {
    switch (spec.op) {
      case "get":
        return asText(target.get(key));
      case "exists":
        return target.exists(key);
      case "set":
        target.set(key, value);
        return null;
      case "delete":
        target.delete(key);
        return null;
      case "increment":
        return target.increment(key, spec.delta ?? 1);
      case "set_if_absent":
        return target.setIfAbsent(key, value);
      case "compare_and_set":
        return target.compareAndSet(key, spec.expected ?? "", value);
      case "get_many":
        return target.getMany(spec.keys).map(asText);
      case "set_many":
        target.setMany(spec.entries);
        return null;
      case "delete_many":
        target.deleteMany(spec.keys);
        return null;
      case "once":
        try {
          return target.once(key, () => {
            if (spec.fail) throw new EffectFailed("failed on purpose");
          });
        } catch (e) {
          if (e instanceof EffectFailed) return { error: "effect" };
          throw e;
        }
    }
  } catch (e) {
    if (!(e instanceof StateError)) throw e;
    log.info("state: %s: %s: %s", spec.op, e.kind, e.message);
    return { error: e.kind };
  }
  return { error: `no such op: ${JSON.stringify(spec.op)}` };
}

/** Deep equality of JSON values (a bigint and a number are one number when equal). */
function same(a, b) {
  if ((typeof a === "bigint" || typeof b === "bigint") && (typeof a === "number" || typeof a === "bigint") && (typeof b === "number" || typeof b === "bigint")) {
    return (Number.isInteger(a) || typeof a === "bigint") && (Number.isInteger(b) || typeof b === "bigint") && BigInt(a) === BigInt(b);
  }
  if (Array.isArray(a) || Array.isArray(b)) {
    return Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((x, i) => same(x, b[i]));
  }
  if (a !== null && b !== null && typeof a === "object" && typeof b === "object") {
    const keys = Object.keys(a);
    return keys.length === Object.keys(b).length && keys.every((k) => Object.hasOwn(b, k) && same(a[k], b[k]));
  }
  return a === b;
}

const show = (value) => JSON.stringify(value, (k, v) => (typeof v === "bigint" ? v.toString() : v));

/** A `state` record: ack when the operation's result is its `expect`, else drop. */
function stateCommand(record) {
  let spec;
  let result;
  try {
    spec = record.json();
    if (spec === null || typeof spec !== "object" || Array.isArray(spec)) throw new TypeError("not an object");
    result = stateResult(spec);
  } catch (e) {
    if (!(e instanceof TypeError || e instanceof RangeError || e instanceof DecodeError)) throw e;
    log.warn("state: a case this handler cannot run: %s", e.message);
    return drop;
  }
  const expect = spec.expect ?? null;
  if (same(result, expect)) return ack;
  log.warn("state: %s gave %s, expected %s", spec.op, show(result), show(expect));
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
