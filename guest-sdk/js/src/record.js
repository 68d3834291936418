// The records a handler receives and where they come from.

import { DecodeError, parseStrictJson, utf8ValidUpTo } from "./json.js";

const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });
const encoder = new TextEncoder();

/**
 * One Kinesis record, as the host delivered it.
 *
 * Numbers are JavaScript numbers: `arrivalMillis` is a u64 on the wire and exact up to 2^53
 * milliseconds (the year 287396). `new Record({...})` builds one for unit tests of a handler.
 */
export class Record {
  /** The partition key the producer gave the record. @type {string} */
  partitionKey;
  /** The record's sequence number in its shard (a decimal string, as Kinesis writes it). @type {string} */
  sequenceNumber;
  /** The position of this user record inside a KPL aggregate; 0 for a plain record. @type {number} */
  subSequenceNumber;
  /** When Kinesis accepted the record, in milliseconds since the Unix epoch (approximate). @type {number} */
  arrivalMillis;
  /** Which delivery this is: 1 the first time; 2, 3, ... for copies under a retry cap. @type {number} */
  attempt;
  /** The record's data, as the producer put it. @type {Uint8Array} */
  data;

  /**
   * A record for a unit test; handlers get theirs from the host.
   * @param {{ partitionKey?: string, sequenceNumber?: string, data?: Uint8Array | string,
   *   subSequenceNumber?: number, arrivalMillis?: number, attempt?: number }} [fields]
   *   `data` as a string is encoded as UTF-8.
   */
  constructor({
    partitionKey = "",
    sequenceNumber = "",
    data = new Uint8Array(0),
    subSequenceNumber = 0,
    arrivalMillis = 0,
    attempt = 1,
  } = {}) {
    this.partitionKey = partitionKey;
    this.sequenceNumber = sequenceNumber;
    this.subSequenceNumber = subSequenceNumber;
    this.arrivalMillis = arrivalMillis;
    this.attempt = attempt;
    this.data = typeof data === "string" ? encoder.encode(data) : data;
  }

  /**
   * The data as UTF-8 text. A byte order mark is kept, as the Rust SDK keeps it.
   * @returns {string}
   * @throws {DecodeError} kind "not-utf8" when the data is not UTF-8.
   */
  text() {
    try {
      return utf8.decode(this.data);
    } catch (e) {
      const offset = utf8ValidUpTo(this.data);
      throw new DecodeError(
        "not-utf8",
        `record data is not UTF-8 text (invalid byte at offset ${offset})`,
        { cause: e, offset },
      );
    }
  }

  /**
   * The data decoded as JSON under the rule every shardhost SDK follows (guest-sdk/JSON.md;
   * the SDK's README.md, "The JSON rule"): UTF-8 text holding exactly one JSON value; no byte order
   * mark; anywhere in it, no key twice in one object, no unpaired surrogate escape, no number
   * beyond a double's range, no nesting deeper than 128. Integers past +-(2^53 - 1) (within
   * [-2^63, 2^64)) come out as BigInts; read integer fields with `integer(value, key)`, which
   * refuses floats such as `1.0`. What shape the value has is the handler's to check.
   * @returns {any}
   * @throws {DecodeError} kind "not-utf8" or "not-json".
   */
  json() {
    let text;
    try {
      text = utf8.decode(this.data);
    } catch {
      text = this.text(); // throws the DecodeError
    }
    return parseStrictJson(text);
  }

  /**
   * For JSON.stringify (and so console.log): the fields, with `data` as text when it is UTF-8,
   * else `dataBase64` (the shapes `shardhost invoke` record files take).
   */
  toJSON() {
    const out = {
      partitionKey: this.partitionKey,
      sequenceNumber: this.sequenceNumber,
      subSequenceNumber: this.subSequenceNumber,
      arrivalMillis: this.arrivalMillis,
      attempt: this.attempt,
    };
    try {
      out.data = utf8.decode(this.data);
    } catch {
      out.dataBase64 = base64(this.data);
    }
    return out;
  }
}

/** Where a batch comes from, and which delivery it is. */
export class BatchInfo {
  /** The stream the records were read from. @type {string} */
  stream;
  /** The shard the records were read from. @type {string} */
  shardId;
  /** How far the reader is behind the tip of the shard, when Kinesis said so. @type {number | undefined} */
  millisBehindLatest;
  /** 1 for a first delivery; higher for a copy published under a retry cap. @type {number} */
  attempt;

  /**
   * Batch information for a unit test; handlers get theirs from the host.
   * @param {{ stream?: string, shardId?: string, millisBehindLatest?: number, attempt?: number }} [fields]
   */
  constructor({ stream = "", shardId = "", millisBehindLatest = undefined, attempt = 1 } = {}) {
    this.stream = stream;
    this.shardId = shardId;
    this.millisBehindLatest = millisBehindLatest;
    this.attempt = attempt;
  }
}

// ---- from the host's shapes (internal) ----

/** A Record from a WIT `kinesis-record` (its u64 as a bigint), without copying the data. */
export function recordFromHost(r, attempt) {
  return new HostRecord(r, attempt);
}

/**
 * A Record made from the host's shape: a constructor that assigns every field in order lets
 * the engine lay the object out once (cheaper than Object.create and six additions, in the
 * interpreter guest JavaScript runs in). Its instances are Records (same prototype).
 */
export function HostRecord(r, attempt) {
  this.partitionKey = r.partitionKey;
  this.sequenceNumber = r.sequenceNumber;
  this.subSequenceNumber = r.subSequenceNumber;
  this.arrivalMillis = Number(r.approximateArrivalTimestamp);
  this.attempt = attempt;
  this.data = r.data;
}
HostRecord.prototype = Record.prototype;

export function batchInfoFromHost(info) {
  const out = Object.create(BatchInfo.prototype);
  out.stream = info.stream;
  out.shardId = info.shardId;
  const lag = info.millisBehindLatest;
  out.millisBehindLatest = lag === undefined || lag === null ? undefined : Number(lag);
  out.attempt = info.attempt;
  return out;
}

const ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

function base64(bytes) {
  let out = "";
  let i = 0;
  for (; i + 2 < bytes.length; i += 3) {
    const v = (bytes[i] << 16) | (bytes[i + 1] << 8) | bytes[i + 2];
    out += ALPHABET[v >> 18] + ALPHABET[(v >> 12) & 63] + ALPHABET[(v >> 6) & 63] + ALPHABET[v & 63];
  }
  if (i < bytes.length) {
    const two = i + 1 < bytes.length;
    const v = (bytes[i] << 16) | (two ? bytes[i + 1] << 8 : 0);
    out += ALPHABET[v >> 18] + ALPHABET[(v >> 12) & 63] + (two ? ALPHABET[(v >> 6) & 63] : "=") + "=";
  }
  return out;
}
