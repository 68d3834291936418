// The store of the `state` API in a component: wasi:keyvalue (store, atomics, batch: the 0.2
// draft) and shardhost's `conditional` interface, the only module that names their bindings
// (bundled only into components built with state). Each operation is one call; the bindings'
// error (a thrown error whose `payload` is the wasi:keyvalue `error` variant) becomes a
// StateError. A bucket (a resource) is kept for the instance's life by ./state.js, never
// dropped.

import { open as openBucket } from "wasi:keyvalue/store@0.2.0-draft";
import { increment as incrementBy } from "wasi:keyvalue/atomics@0.2.0-draft";
import { getMany as getAll, setMany as setAll, deleteMany as deleteAll } from "wasi:keyvalue/batch@0.2.0-draft";
import { setIfAbsent as setAbsent, compareAndSet as compareSet } from "shardhost:handler/conditional@0.1.2";

import { StateError } from "./error.js";

/** The StateError of what the bindings threw (anything but a wasi:keyvalue error goes on). */
function failure(e, name) {
  const error = e !== null && typeof e === "object" ? e.payload : undefined;
  const tag = error?.tag;
  if (tag === "no-such-store" || tag === "access-denied") return new StateError(tag, undefined, { bucket: name });
  if (tag === "other") return new StateError("other", String(error.val), { bucket: name });
  return e;
}

function call(name, f) {
  try {
    return f();
  } catch (e) {
    throw failure(e, name);
  }
}

/** A handle: the bucket's name (for errors) and its resource. */
export function open(name) {
  return { name, bucket: call(name, () => openBucket(name)) };
}

export function get({ name, bucket }, key) {
  return call(name, () => bucket.get(key));
}

export function set({ name, bucket }, key, value) {
  call(name, () => bucket.set(key, value));
}

export function del({ name, bucket }, key) {
  call(name, () => bucket.delete(key));
}

export function exists({ name, bucket }, key) {
  return call(name, () => bucket.exists(key));
}

/** @param {bigint} delta @returns {bigint} */
export function increment({ name, bucket }, key, delta) {
  return call(name, () => incrementBy(bucket, key, delta));
}

export function setIfAbsent({ name, bucket }, key, value) {
  return call(name, () => setAbsent(bucket, key, value));
}

export function compareAndSet({ name, bucket }, key, expected, value) {
  return call(name, () => compareSet(bucket, key, expected, value));
}

/** @returns {Array<[string, Uint8Array] | undefined>} */
export function getMany({ name, bucket }, keys) {
  return call(name, () => getAll(bucket, keys));
}

/** @param {Array<[string, Uint8Array]>} entries */
export function setMany({ name, bucket }, entries) {
  call(name, () => setAll(bucket, entries));
}

export function deleteMany({ name, bucket }, keys) {
  call(name, () => deleteAll(bucket, keys));
}
