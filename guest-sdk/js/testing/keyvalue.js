// Stands in for the wasi:keyvalue (store, atomics, batch) and shardhost:handler/conditional
// imports under Node (see ./hooks.js): answers from `state.store` of ./host.js, a MemoryStore
// (./store.js), the store in place when each operation runs. Shaped as the generated bindings
// are: `open(name)` gives a `Bucket` resource, the other interfaces' functions take one, and an
// error is thrown with the wasi:keyvalue `error` as its `payload`.
import { state } from "./host.js";

function current() {
  return state.store;
}

export class Bucket {
  #name;

  /** @internal (made by open) */
  constructor(name, key) {
    if (key !== OPEN) throw new TypeError("a Bucket is made by open()");
    this.#name = name;
  }

  /** The bucket's name, checked against the store in place. @internal */
  granted() {
    current().check(this.#name);
    return this.#name;
  }

  get(key) {
    return current().get(this.granted(), text(key));
  }

  set(key, value) {
    current().set(this.granted(), text(key), value);
  }

  delete(key) {
    current().delete(this.granted(), text(key));
  }

  exists(key) {
    return current().exists(this.granted(), text(key));
  }

  listKeys() {
    throw new Error("the SDK does not list keys");
  }
}

const OPEN = Symbol("open");

function text(key) {
  if (typeof key !== "string") throw new TypeError(`the bindings take a key as a string, got ${typeof key}`);
  return key;
}

function bucketOf(bucket) {
  if (!(bucket instanceof Bucket)) throw new TypeError("the bindings take a Bucket (made by open)");
  return bucket.granted();
}

export function open(name) {
  current().open(text(name));
  return new Bucket(name, OPEN);
}

export function increment(bucket, key, delta) {
  if (typeof delta !== "bigint") throw new TypeError(`the bindings take a u64 as a bigint, got ${typeof delta}`);
  return current().increment(bucketOf(bucket), text(key), delta);
}

export function getMany(bucket, keys) {
  return current().getMany(bucketOf(bucket), keys.map(text));
}

export function setMany(bucket, entries) {
  return current().setMany(bucketOf(bucket), entries.map(([k, v]) => [text(k), v]));
}

export function deleteMany(bucket, keys) {
  return current().deleteMany(bucketOf(bucket), keys.map(text));
}

export function setIfAbsent(bucket, key, value) {
  return current().setIfAbsent(bucketOf(bucket), text(key), value);
}

export function compareAndSet(bucket, key, expected, value) {
  return current().compareAndSet(bucketOf(bucket), text(key), expected, value);
}
