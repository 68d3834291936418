// Why a state operation failed.

const KINDS = new Set(["no-such-store", "access-denied", "other"]);

function defaultMessage(kind, bucket) {
  const which = bucket === undefined ? "the bucket" : `bucket ${JSON.stringify(bucket)}`;
  if (kind === "access-denied") return `${which} is not granted to this subscription ([subscription.state] buckets)`;
  if (kind === "no-such-store") return `the host has no store${bucket === undefined ? "" : ` for ${which}`}`;
  return "the store failed";
}

/**
 * A state operation failed (the `state` object's methods throw one):
 *
 * - `kind`: the `wasi:keyvalue` error's case: `"access-denied"` (a bucket the subscription's
 *   `[subscription.state] buckets` does not list), `"other"` (a key over 1 KiB, a value over
 *   350 KiB, an `increment` of a value `set` wrote, the store unreachable or throttled) or
 *   `"no-such-store"`;
 * - `message`: for `"other"` the host's own words; `bucket`: the bucket's name.
 *
 * `new StateError(kind, message, { bucket })` makes one, for a test.
 */
export class StateError extends Error {
  /**
   * @param {"no-such-store" | "access-denied" | "other"} kind
   * @param {string} [message] by default, what the kind means
   * @param {{ bucket?: string, cause?: unknown }} [details]
   */
  constructor(kind, message, { bucket, cause } = {}) {
    if (!KINDS.has(kind)) throw new TypeError(`a StateError's kind is "no-such-store", "access-denied" or "other", not ${JSON.stringify(kind)}`);
    super(message ?? defaultMessage(kind, bucket), cause === undefined ? undefined : { cause });
    this.name = "StateError";
    this.kind = kind;
    this.bucket = bucket;
  }
}
