// Calls into the host other than logging: publish and seek.

import * as host from "./bindings.js";
import { isLive } from "./log.js";

const encoder = new TextEncoder();

/** The host refused a call (publish, seek); `message` is the host's reason. */
export class HostError extends Error {
  constructor(message, options) {
    super(message, options);
    this.name = "HostError";
  }
}

/**
 * Puts a record into a Kinesis stream through the host, and answers its sequence number.
 * The subscription must list the stream in `publish_to`. Like every side effect of a handler,
 * a publish happens at least once: a replayed call publishes again.
 * @param {string} stream
 * @param {string} partitionKey
 * @param {Uint8Array | ArrayBuffer | ArrayBufferView | string} data a string is sent as UTF-8
 * @returns {string} the new record's sequence number
 * @throws {HostError} with the host's reason (no such stream, not allowed, throttled, ...)
 */
export function publish(stream, partitionKey, data) {
  text("publish: the stream", stream);
  text("publish: the partition key", partitionKey);
  return call(() => host.publish(stream, partitionKey, bytes(data)));
}

/**
 * Asks the host to restart reading of the calling shard at this sequence number when the call
 * returns, for example to read a held record (answered with `retry`) again without a restart.
 * @param {string} sequenceNumber
 * @throws {HostError} with the host's reason (not a sequence number this reader delivered, ...)
 */
export function seek(sequenceNumber) {
  if (typeof sequenceNumber === "bigint") sequenceNumber = sequenceNumber.toString();
  text("seek: the sequence number", sequenceNumber);
  call(() => host.seek(sequenceNumber));
}

function call(f) {
  if (!isLive()) {
    // Module top level runs once, when componentize-js builds the component (a snapshot).
    throw new Error("publish and seek can only be called while the host calls the handler, not at module top level");
  }
  try {
    return f();
  } catch (e) {
    // The bindings throw an error whose `payload` is the result's error string.
    if (e !== null && typeof e === "object" && typeof e.payload === "string") {
      throw new HostError(e.payload);
    }
    throw e;
  }
}

function text(what, value) {
  if (typeof value !== "string") {
    throw new TypeError(`${what} must be a string, got ${value === null ? "null" : typeof value}`);
  }
  if (typeof value.isWellFormed === "function" && !value.isWellFormed()) {
    throw new TypeError(`${what} contains a lone surrogate, which UTF-8 cannot carry`);
  }
}

function bytes(data) {
  if (data instanceof Uint8Array) return data;
  if (typeof data === "string") {
    if (typeof data.isWellFormed === "function" && !data.isWellFormed()) {
      throw new TypeError("publish: the data contains a lone surrogate, which UTF-8 cannot carry");
    }
    return encoder.encode(data);
  }
  if (data instanceof ArrayBuffer) return new Uint8Array(data);
  if (ArrayBuffer.isView(data)) return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  throw new TypeError(
    `publish: the data must be a Uint8Array, an ArrayBuffer or a string, got ${data === null ? "null" : typeof data} (JSON.stringify an object first)`,
  );
}
