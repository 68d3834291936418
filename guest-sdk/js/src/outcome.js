// The answers a handler gives: ack, drop, retry, retryAfter(ms).

const U64_MAX = 18446744073709551615n;

/**
 * What becomes of one record. Use the constants {@link ack}, {@link drop}, {@link retry} and
 * the function {@link retryAfter}; instances are frozen.
 */
export class Outcome {
  /** @type {"ack" | "drop" | "retry" | "retryAfter"} */
  kind;
  /** For `retryAfter`: the delay in whole milliseconds; otherwise undefined. */
  delayMs;

  /** @private Use ack, drop, retry or retryAfter(ms). */
  constructor(kind, delayMs) {
    if (!constructing) {
      throw new TypeError("use ack, drop, retry or retryAfter(ms) from \"shardhost\"");
    }
    this.kind = kind;
    this.delayMs = delayMs;
    Object.freeze(this);
  }

  /** Whether the outcome settles the record (ack or drop). */
  get settles() {
    return this.kind === "ack" || this.kind === "drop";
  }

  toString() {
    return this.kind === "retryAfter" ? `retryAfter(${this.delayMs})` : this.kind;
  }

  toJSON() {
    return this.toString();
  }
}

let constructing = false;
function make(kind, delayMs) {
  constructing = true;
  try {
    return new Outcome(kind, delayMs);
  } finally {
    constructing = false;
  }
}

/** Handled: the shard's checkpoint may move past the record. */
export const ack = make("ack");
/** Retired without handling, because it can never succeed: settles like ack. */
export const drop = make("drop");
/**
 * Not handled now. Without a retry cap on the subscription the record is held: the reader goes
 * on and the shard's checkpoint stops in front of it. Under a cap the host publishes a copy for
 * another attempt (and, past the cap, to the dead-letter stream).
 */
export const retry = make("retry");

/**
 * As {@link retry}, after at least `ms` milliseconds. Fractions round up; `Infinity` (or
 * anything past 2^64 - 1) means the longest delay there is. A bigint is taken as is.
 * @param {number | bigint} ms
 * @returns {Outcome}
 */
export function retryAfter(ms) {
  if (typeof ms === "bigint") {
    if (ms < 0n) throw new RangeError(`retryAfter: the delay must not be negative, got ${ms}`);
    return make("retryAfter", ms > U64_MAX ? Number(U64_MAX) : Number(ms));
  }
  if (typeof ms !== "number" || Number.isNaN(ms)) {
    throw new TypeError(`retryAfter: the delay must be a number of milliseconds, got ${describe(ms)}`);
  }
  if (ms < 0) throw new RangeError(`retryAfter: the delay must not be negative, got ${ms}`);
  return make("retryAfter", Math.ceil(ms));
}

function describe(value) {
  if (typeof value === "string") return JSON.stringify(value);
  if (value === null || value === undefined) return String(value);
  if (typeof value === "object") return Array.isArray(value) ? "an array" : `an object (${Object.prototype.toString.call(value)})`;
  return `${typeof value} ${String(value)}`;
}

// ---- to the host's shapes (internal) ----

export const HOST_ACK = Object.freeze({ tag: "ack" });
export const HOST_DROP = Object.freeze({ tag: "drop" });
export const HOST_RETRY = Object.freeze({ tag: "retry" });

/** @returns the WIT `outcome` for one handler answer; throws a TypeError for anything else. */
export function toHostOutcome(outcome, what) {
  if (outcome instanceof Outcome) {
    switch (outcome.kind) {
      case "ack":
        return HOST_ACK;
      case "drop":
        return HOST_DROP;
      case "retry":
        return HOST_RETRY;
      default: {
        const ms = outcome.delayMs;
        // Past 2^53 a Number is not exact; anything that large means "as late as possible".
        return { tag: "retry-after", val: ms >= 2 ** 64 ? U64_MAX : BigInt(ms) };
      }
    }
  }
  const hint = typeof outcome === "string" && ["ack", "drop", "retry"].includes(outcome)
    ? ` (the string "${outcome}"; use the constant ${outcome} exported by "shardhost")`
    : "";
  throw new TypeError(
    `${what} returned ${describe(outcome)}${hint}: return ack, drop, retry or retryAfter(ms) from "shardhost"`,
  );
}

/** @returns the WIT `batch-outcome` for a batch handler's answer (one outcome, or an array). */
export function toHostBatchOutcome(answer, count) {
  if (Array.isArray(answer)) {
    if (answer.length !== count) {
      throw new TypeError(
        `the batch handler returned ${answer.length} outcomes for ${count} records: return one outcome for the whole batch, or exactly one per record`,
      );
    }
    const each = new Array(answer.length);
    for (let i = 0; i < answer.length; i++) {
      each[i] = toHostOutcome(answer[i], `the batch handler (outcome ${i})`);
    }
    return { tag: "each", val: each };
  }
  return { tag: "all", val: toHostOutcome(answer, "the batch handler") };
}
