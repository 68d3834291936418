// The host's state store, in memory, with its rules, for tests under Node: ./keyvalue.js (the
// stand-in of the wasi:keyvalue and conditional bindings) answers from the MemoryStore in
// `state.store` of ./host.js. Exported there as `MemoryStore`.

/** The host's limits: a key's UTF-8 bytes, a value's bytes. */
export const KEY_MAX = 1024;
export const VALUE_MAX = 358400;
export const MANY_MAX = 10000;
const U64_MAX = 18446744073709551615n;

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** The error the bindings throw for a wasi:keyvalue `error`: an Error with `payload`. */
export function storeError(tag, val) {
  const e = new Error(val === undefined ? tag : `${tag}: ${val}`);
  e.payload = val === undefined ? { tag } : { tag, val };
  return e;
}

const other = (message) => storeError("other", message);

/**
 * The host's store, in memory: the bucket `default` and those in `buckets` open (any other is
 * refused: "access-denied"), a key of more than 1 KiB (UTF-8) or a value of more than 350 KiB
 * (358400 bytes) refused ("other"), a counter read as its decimal text, `increment` over a value
 * `set` wrote refused ("other"). With `error` set (a message), every operation fails with
 * "other" and that message, as when the store is unreachable or throttled.
 *
 * Put one in `state.store` of shardhost/testing/host (a new one, with `default` only, after each
 * `reset()`); keep it across resets to play a second instance or a replay. For the test's own
 * look: `value(key, bucket)` (what `get` answers), `text(key, bucket)`, `items(bucket)` and
 * `texts(bucket)` (every key), `put(key, value, bucket)` (a bigint value: a counter), `calls`
 * (every operation asked for, as [name, bucket, ...arguments]).
 */
export class MemoryStore {
  /** @param {{ buckets?: string[], error?: string }} [options] */
  constructor({ buckets = [], error = undefined } = {}) {
    /** The buckets that open: `default`, then the others. */
    this.buckets = ["default", ...buckets.filter((b) => b !== "default")];
    /** When set: every operation fails with "other" and this message. */
    this.error = error;
    /** Every operation asked for, in order. */
    this.calls = [];
    /** bucket -> Map(key -> Uint8Array (set) or bigint (a counter)) */
    this.data = new Map();
  }

  // for tests

  /** What `get` answers for `key`: a Uint8Array, or undefined. */
  value(key, bucket = "default") {
    return read(this.data.get(bucket)?.get(key));
  }

  /** `value` as text. */
  text(key, bucket = "default") {
    const v = this.value(key, bucket);
    return v === undefined ? undefined : decoder.decode(v);
  }

  /** Every key and value of a bucket: { key: Uint8Array }. */
  items(bucket = "default") {
    return Object.fromEntries([...(this.data.get(bucket) ?? [])].map(([k, v]) => [k, read(v)]));
  }

  /** Every key and value of a bucket, as text: { key: string }. */
  texts(bucket = "default") {
    return Object.fromEntries(Object.entries(this.items(bucket)).map(([k, v]) => [k, decoder.decode(v)]));
  }

  /** Writes without the handler: a string (UTF-8) or bytes, or a bigint for a counter. */
  put(key, value, bucket = "default") {
    this.#values(bucket).set(key, typeof value === "string" ? encoder.encode(value) : value);
  }

  // what ./keyvalue.js asks

  open(name) {
    this.calls.push(["open", name]);
    this.#fail();
    if (!this.buckets.includes(name)) throw storeError("access-denied");
  }

  /** Whether the bucket is (still) granted: a bucket opened under another store is refused. */
  check(name) {
    if (!this.buckets.includes(name)) throw storeError("access-denied");
  }

  get(bucket, key) {
    this.calls.push(["get", bucket, key]);
    return read(this.#bucket(bucket, key).get(key));
  }

  set(bucket, key, value) {
    this.calls.push(["set", bucket, key, value]);
    this.#bucket(bucket, key).set(key, checked(value));
  }

  delete(bucket, key) {
    this.calls.push(["delete", bucket, key]);
    this.#bucket(bucket, key).delete(key);
  }

  exists(bucket, key) {
    this.calls.push(["exists", bucket, key]);
    return this.#bucket(bucket, key).has(key);
  }

  increment(bucket, key, delta) {
    this.calls.push(["increment", bucket, key, delta]);
    const values = this.#bucket(bucket, key);
    const now = values.get(key) ?? 0n;
    if (typeof now !== "bigint") throw other(`${JSON.stringify(key)} holds a value that set wrote, not a counter`);
    if (now + delta > U64_MAX) throw other(`counter ${JSON.stringify(key)} would pass 2^64 - 1`);
    values.set(key, now + delta);
    return now + delta;
  }

  setIfAbsent(bucket, key, value) {
    this.calls.push(["setIfAbsent", bucket, key, value]);
    const values = this.#bucket(bucket, key);
    const bytes = checked(value);
    if (values.has(key)) return false;
    values.set(key, bytes);
    return true;
  }

  compareAndSet(bucket, key, expected, value) {
    this.calls.push(["compareAndSet", bucket, key, expected, value]);
    const values = this.#bucket(bucket, key);
    const bytes = checked(value);
    if (!values.has(key) || !same(read(values.get(key)), expected)) return false;
    values.set(key, bytes);
    return true;
  }

  getMany(bucket, keys) {
    this.calls.push(["getMany", bucket, keys]);
    const values = this.#bucket(bucket, ...keys);
    return keys.map((k) => (values.has(k) ? [k, read(values.get(k))] : undefined));
  }

  setMany(bucket, entries) {
    this.calls.push(["setMany", bucket, entries]);
    const values = this.#bucket(bucket, ...entries.map(([k]) => k));
    const ok = entries.map(([k, v]) => [k, checked(v)]);
    for (const [k, v] of ok) values.set(k, v);
  }

  deleteMany(bucket, keys) {
    this.calls.push(["deleteMany", bucket, keys]);
    const values = this.#bucket(bucket, ...keys);
    for (const k of keys) values.delete(k);
  }

  #fail() {
    if (this.error !== undefined && this.error !== null) throw other(String(this.error));
  }

  #values(bucket) {
    let values = this.data.get(bucket);
    if (values === undefined) this.data.set(bucket, (values = new Map()));
    return values;
  }

  #bucket(bucket, ...keys) {
    this.#fail();
    this.check(bucket);
    if (keys.length > MANY_MAX) throw other(`${keys.length} keys in one call: at most ${MANY_MAX}`);
    for (const key of keys) {
      const size = encoder.encode(key).length;
      if (size > KEY_MAX) throw other(`a key of ${size} bytes: the most is ${KEY_MAX} (1 KiB)`);
    }
    return this.#values(bucket);
  }
}

function checked(value) {
  if (!(value instanceof Uint8Array)) throw new TypeError(`the bindings take a value as a Uint8Array, got ${typeof value}`);
  if (value.length > VALUE_MAX) throw other(`a value of ${value.length} bytes: the most is ${VALUE_MAX} (350 KiB)`);
  return value.slice();
}

function read(value) {
  if (value === undefined || value instanceof Uint8Array) return value;
  return encoder.encode(String(value));
}

function same(a, b) {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}
