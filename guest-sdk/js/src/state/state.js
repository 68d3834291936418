// State: keys and values the host keeps between calls, through wasi:keyvalue and shardhost's
// `conditional` interface (./wasi.js). The semantics every SDK shares (buckets, limits,
// counters, `once`) are in guest-sdk/STATE.md.
//
// Everything here must stay free of side effects at module level (pure object literals, classes,
// /* @__PURE__ */ calls): the build tool (componentize) tells whether an app uses state by
// whether the bundler kept any of this module.

import { StateError } from "./error.js";
import { currentStore } from "./slot.js";
import { isLive, log } from "../log.js";

/** The bucket of the `state` object's own methods; every state grant opens it. */
const DEFAULT_BUCKET = "default";
/** The value `once` marks a key with. */
const DONE = /* @__PURE__ */ new TextEncoder().encode("done");
const U64_MAX = 18446744073709551615n;

const encoder = /* @__PURE__ */ new TextEncoder();

function live() {
  if (!isLive()) {
    // Module top level runs once, when componentize-js builds the component (a snapshot).
    throw new Error(
      "state can only be used while the host calls the handler, not at module top level (it runs when the component is built)",
    );
  }
}

function typeName(value) {
  return value === null ? "null" : Array.isArray(value) ? "an array" : typeof value;
}

function checkKey(key) {
  if (typeof key !== "string") throw new TypeError(`a state key must be a string, got ${typeName(key)}`);
  if (typeof key.isWellFormed === "function" && !key.isWellFormed()) {
    throw new TypeError("a state key contains a lone surrogate, which UTF-8 cannot carry");
  }
  return key;
}

function toBytes(value, what = "value") {
  if (value instanceof Uint8Array) return value;
  if (typeof value === "string") {
    if (typeof value.isWellFormed === "function" && !value.isWellFormed()) {
      throw new TypeError(`a state ${what} contains a lone surrogate, which UTF-8 cannot carry`);
    }
    return encoder.encode(value);
  }
  if (value instanceof ArrayBuffer) return new Uint8Array(value);
  if (ArrayBuffer.isView(value)) return new Uint8Array(value.buffer, value.byteOffset, value.byteLength);
  throw new TypeError(`a state ${what} must be a Uint8Array or a string, got ${typeName(value)} (JSON.stringify an object first)`);
}

function checkKeys(keys) {
  if (typeof keys === "string" || keys === null || typeof keys?.[Symbol.iterator] !== "function") {
    throw new TypeError(`keys must be an array (any iterable) of strings, got ${typeName(keys)}`);
  }
  return Array.from(keys, checkKey);
}

function checkEntries(entries) {
  let pairs;
  if (entries instanceof Map) pairs = [...entries];
  else if (entries !== null && typeof entries === "object" && typeof entries[Symbol.iterator] === "function") pairs = [...entries];
  else if (entries !== null && typeof entries === "object") pairs = Object.entries(entries);
  else throw new TypeError(`setMany takes [key, value] pairs, a Map or an object, got ${typeName(entries)}`);
  return pairs.map((pair) => {
    if (!Array.isArray(pair) || pair.length !== 2) {
      throw new TypeError(`setMany takes [key, value] pairs, a Map or an object, not ${typeName(pair)} ${String(pair)}`);
    }
    return [checkKey(pair[0]), toBytes(pair[1])];
  });
}

function toDelta(delta) {
  let n;
  if (typeof delta === "bigint") n = delta;
  else if (typeof delta === "number" && Number.isSafeInteger(delta)) n = BigInt(delta);
  else throw new TypeError(`increment's delta must be an integer (a number or a bigint), got ${typeof delta === "number" ? delta : typeName(delta)}`);
  if (n < 0n || n > U64_MAX) throw new RangeError(`increment's delta is from 0 to 2^64 - 1 (a counter only counts up), not ${n}`);
  return n;
}

/** A u64 from the host: a number when it is safe (up to 2^53 - 1), else a bigint. */
function toNumber(n) {
  return n <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(n) : n;
}

function isAsync(f) {
  return f.constructor?.name === "AsyncFunction";
}

/**
 * A bucket of the store: what the `state` object does, in the bucket `name`. Get one with
 * `state.bucket(name)`; it is opened on its first operation and kept for the instance's life.
 */
export class Bucket {
  #opened; // [the store it was opened in, its handle]

  /** @param {string} name */
  constructor(name) {
    if (typeof name !== "string") throw new TypeError(`a bucket name must be a string, got ${typeName(name)}`);
    /** @readonly */
    this.name = name;
  }

  /** [store, handle]: the bucket, opened in the installed store when it is not. */
  #use() {
    live();
    const store = currentStore();
    if (this.#opened === undefined || this.#opened[0] !== store) this.#opened = [store, store.open(this.name)];
    return this.#opened;
  }

  /**
   * The value of `key`, or `undefined` when it holds none. A counter (made by `increment`) reads
   * as its decimal text.
   * @param {string} key
   * @returns {Uint8Array | undefined}
   */
  get(key) {
    checkKey(key);
    const [store, handle] = this.#use();
    return store.get(handle, key) ?? undefined;
  }

  /**
   * Sets `key` to `value` (bytes, or a string as UTF-8), whatever it held.
   * @param {string} key
   * @param {Uint8Array | ArrayBuffer | ArrayBufferView | string} value
   */
  set(key, value) {
    checkKey(key);
    const bytes = toBytes(value);
    const [store, handle] = this.#use();
    store.set(handle, key, bytes);
  }

  /** Removes `key` (nothing happens when it holds no value). @param {string} key */
  delete(key) {
    checkKey(key);
    const [store, handle] = this.#use();
    store.del(handle, key);
  }

  /** Whether `key` holds a value. @param {string} key @returns {boolean} */
  exists(key) {
    checkKey(key);
    const [store, handle] = this.#use();
    return Boolean(store.exists(handle, key));
  }

  /**
   * Adds `delta` (from 0 to 2^64 - 1: wasi:keyvalue counts up only) to the counter `key`, made
   * at 0 when the key holds nothing, in one atomic step; answers the new value: a number, or a
   * bigint when it is past `Number.MAX_SAFE_INTEGER`. A key `set` wrote is not a counter
   * (StateError "other").
   * @param {string} key
   * @param {number | bigint} [delta]
   * @returns {number | bigint}
   */
  increment(key, delta = 1) {
    checkKey(key);
    const n = toDelta(delta);
    const [store, handle] = this.#use();
    return toNumber(BigInt(store.increment(handle, key, n)));
  }

  /**
   * Sets `key` to `value` only if it holds no value, in one atomic step; answers whether it did.
   * @param {string} key
   * @param {Uint8Array | ArrayBuffer | ArrayBufferView | string} value
   * @returns {boolean}
   */
  setIfAbsent(key, value) {
    checkKey(key);
    const bytes = toBytes(value);
    const [store, handle] = this.#use();
    return Boolean(store.setIfAbsent(handle, key, bytes));
  }

  /**
   * Sets `key` to `value` only if it still holds exactly `expected` (as `get` read it), in one
   * atomic step; answers whether it did (false also when it holds nothing).
   * @param {string} key
   * @param {Uint8Array | ArrayBuffer | ArrayBufferView | string} expected
   * @param {Uint8Array | ArrayBuffer | ArrayBufferView | string} value
   * @returns {boolean}
   */
  compareAndSet(key, expected, value) {
    checkKey(key);
    const was = toBytes(expected, "expected value");
    const bytes = toBytes(value);
    const [store, handle] = this.#use();
    return Boolean(store.compareAndSet(handle, key, was, bytes));
  }

  /**
   * The values of `keys`, in their order: each a Uint8Array, or `undefined` for a key that holds
   * no value.
   * @param {Iterable<string>} keys
   * @returns {Array<Uint8Array | undefined>}
   */
  getMany(keys) {
    const list = checkKeys(keys);
    const [store, handle] = this.#use();
    const found = store.getMany(handle, list);
    if (found.length !== list.length) {
      throw new StateError("other", `the store answered ${found.length} entries for ${list.length} keys`, { bucket: this.name });
    }
    return found.map((entry) => (entry === undefined || entry === null ? undefined : entry[1]));
  }

  /**
   * Sets several keys: `entries` is an array (any iterable) of [key, value] pairs, a Map or an
   * object. Not atomic: after a failure some may be set.
   * @param {Iterable<[string, Uint8Array | string]> | Map<string, Uint8Array | string> | Record<string, Uint8Array | string>} entries
   */
  setMany(entries) {
    const pairs = checkEntries(entries);
    const [store, handle] = this.#use();
    store.setMany(handle, pairs);
  }

  /** Removes several keys (not atomic: after a failure some may be removed). @param {Iterable<string>} keys */
  deleteMany(keys) {
    const list = checkKeys(keys);
    const [store, handle] = this.#use();
    store.deleteMany(handle, list);
  }

  /**
   * Runs `effect()` unless `key` is marked done; marks it done when `effect` returns. Answers
   * true when the effect ran now, false when the key was already marked (then `effect` is not
   * called).
   *
   * If `effect` throws, the error goes on and the key stays unmarked: the next call (a retry, a
   * replay) runs it again. An effect that returns a Promise (an async function: fetch) makes
   * `once` answer a Promise: the key is marked when it resolves, and stays unmarked when it
   * rejects (`await state.once(...)` works either way; for an async function `once` answers a
   * Promise even when it skips). The key is marked with `setIfAbsent(key, "done")`; if another
   * call marked it meanwhile, the effect may have run twice, which is logged at warn. The
   * instance can also die between the effect and the mark: keep the effect idempotent on its own
   * side too (an Idempotency-Key).
   * @param {string} key
   * @param {() => unknown} effect
   * @returns {boolean | Promise<boolean>}
   */
  once(key, effect) {
    checkKey(key);
    if (typeof effect !== "function") throw new TypeError(`once(key, effect): effect must be a function, got ${typeName(effect)}`);
    if (this.exists(key)) return isAsync(effect) ? Promise.resolve(false) : false;
    const ran = effect();
    if (ran !== null && typeof ran === "object" && typeof ran.then === "function") {
      return Promise.resolve(ran).then(() => this.#mark(key));
    }
    return this.#mark(key);
  }

  #mark(key) {
    let marked;
    try {
      marked = this.setIfAbsent(key, DONE);
    } catch (e) {
      log.warn(
        "once: the effect for %s (bucket %s) ran but its mark was not written (%s): it runs again on the next delivery",
        JSON.stringify(key),
        JSON.stringify(this.name),
        e?.message ?? String(e),
      );
      throw e;
    }
    if (!marked) {
      log.warn(
        "once: another call marked %s (bucket %s) done while this one ran its effect: the effect may have run twice",
        JSON.stringify(key),
        JSON.stringify(this.name),
      );
    }
    return true;
  }
}

const buckets = /* @__PURE__ */ new Map();

/** The bucket `name` (the same object for the same name); nothing is asked of the host until its
 * first operation. */
function bucket(name) {
  let found = buckets.get(name);
  if (found === undefined) {
    found = new Bucket(name);
    buckets.set(name, found);
  }
  return found;
}

/**
 * State (see guest-sdk/STATE.md): operations in the bucket `default`, and `bucket(name)` for
 * another bucket the subscription's `[subscription.state] buckets` lists. Keys are strings (at
 * most 1 KiB as UTF-8), values Uint8Arrays or strings (stored as UTF-8; at most 350 KiB). Every
 * operation is one blocking call to the host, and throws a StateError when it fails.
 *
 *   import { state } from "shardhost";
 *   const seen = state.increment(`seen:${customer}`);
 *   const orders = state.bucket("orders");
 *   if (orders.setIfAbsent(orderId, record.data)) { ... }
 *   const booked = await state.once(`booked:${id}`, async () => { ... });
 */
export const state = /* @__PURE__ */ Object.freeze({
  /** @param {string} name @returns {Bucket} */
  bucket(name) {
    if (typeof name !== "string") throw new TypeError(`a bucket name must be a string, got ${typeName(name)}`);
    return bucket(name);
  },
  /** `Bucket.get` in the bucket `default`. @param {string} key @returns {Uint8Array | undefined} */
  get: (key) => bucket(DEFAULT_BUCKET).get(key),
  /** `Bucket.set` in the bucket `default`. */
  set: (key, value) => bucket(DEFAULT_BUCKET).set(key, value),
  /** `Bucket.delete` in the bucket `default`. */
  delete: (key) => bucket(DEFAULT_BUCKET).delete(key),
  /** `Bucket.exists` in the bucket `default`. @returns {boolean} */
  exists: (key) => bucket(DEFAULT_BUCKET).exists(key),
  /** `Bucket.increment` in the bucket `default`: a number, or a bigint past 2^53 - 1. */
  increment: (key, delta = 1) => bucket(DEFAULT_BUCKET).increment(key, delta),
  /** `Bucket.setIfAbsent` in the bucket `default`. @returns {boolean} */
  setIfAbsent: (key, value) => bucket(DEFAULT_BUCKET).setIfAbsent(key, value),
  /** `Bucket.compareAndSet` in the bucket `default`. @returns {boolean} */
  compareAndSet: (key, expected, value) => bucket(DEFAULT_BUCKET).compareAndSet(key, expected, value),
  /** `Bucket.getMany` in the bucket `default`. @returns {Array<Uint8Array | undefined>} */
  getMany: (keys) => bucket(DEFAULT_BUCKET).getMany(keys),
  /** `Bucket.setMany` in the bucket `default`. */
  setMany: (entries) => bucket(DEFAULT_BUCKET).setMany(entries),
  /** `Bucket.deleteMany` in the bucket `default`. */
  deleteMany: (keys) => bucket(DEFAULT_BUCKET).deleteMany(keys),
  /** `Bucket.once` in the bucket `default`. @returns {boolean | Promise<boolean>} */
  once: (key, effect) => bucket(DEFAULT_BUCKET).once(key, effect),
});
