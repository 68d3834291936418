// Stands in for the `shardhost:handler/host@0.1.2` import under Node (see register.js): keeps
// every call in `calls`, answers what `state` says. A test may import it as
// "shardhost/testing/host" to look at the log lines, to make publish and seek answer, to give
// config values (`state.config`), to answer the handler's fetches (`state.http`) and to look at
// or replace the store its state goes to (`state.store`, a MemoryStore).
import { MemoryStore, storeError } from "./store.js";

export { MemoryStore, storeError };

/** Every call the SDK made, in order; `http`: every request fetch sent (a redirect is one more),
 * as { method, url, headers (a Headers), body (Uint8Array), text() }. */
export const calls = { log: [], maxLogLevel: 0, publish: [], seek: [], http: [] };

const NO_HOST = "not running inside shardhost (a test under Node)";

function defaults() {
  return {
    /** What max-log-level answers: a level name, or undefined for "none". */
    maxLevel: "trace",
    /** Whether log lines are also written to standard error. */
    echo: true,
    /** Answers publish(stream, partitionKey, data): a sequence number, or throw hostError(...). */
    publish: () => {
      throw hostError(NO_HOST);
    },
    /** Answers seek(sequenceNumber): throw hostError(...) to refuse. */
    seek: () => {
      throw hostError(NO_HOST);
    },
    /** The subscription's config values, { name: value }; undefined: from the environment
     * (SHARDHOST_CONFIG_<NAME>). */
    config: undefined,
    /**
     * What answers the handler's fetches: a function (request) => answer, or an object
     * { url: answer } (a URL it does not hold is denied, as an origin the subscription does not
     * allow). An answer: a status (number), { status, headers, body } (headers an object or
     * pairs, body a string or bytes), an HttpError (returned or thrown; its url filled in) or, in
     * the object, a function of the request. Redirects are followed by the SDK's fetch, as in a
     * component. undefined: every fetch fails, as outside shardhost.
     */
    http: undefined,
    /**
     * The store the SDK's `state` works on: a MemoryStore (./store.js), with the host's rules.
     * By default a new one, with the bucket `default` only; `new MemoryStore({ buckets:
     * ["orders"] })` grants more, `store.error = "throttled"` makes every operation fail. Keep
     * one across resets to play a second instance or a replay.
     */
    store: new MemoryStore(),
  };
}

/** What the stand-in answers; change it in a test. */
export const state = defaults();

/** Forgets the calls and restores the default answers. */
export function reset() {
  calls.log.length = 0;
  calls.publish.length = 0;
  calls.seek.length = 0;
  calls.http.length = 0;
  calls.maxLogLevel = 0;
  Object.assign(state, defaults());
}

/** The error the bindings throw for a refusal (a WIT `result` error): an Error with `payload`. */
export function hostError(reason) {
  const e = new Error(String(reason));
  e.payload = reason;
  return e;
}

export function log(level, message) {
  calls.log.push([level, message]);
  if (state.echo) process.stderr.write(`[${level.padStart(5)}] ${message}\n`);
}

export function maxLogLevel() {
  calls.maxLogLevel++;
  return state.maxLevel;
}

export function publish(stream, partitionKey, data) {
  calls.publish.push([stream, partitionKey, data]);
  return state.publish(stream, partitionKey, data);
}

export function seek(sequenceNumber) {
  calls.seek.push(sequenceNumber);
  return state.seek(sequenceNumber);
}
