// Type declarations of `shardhost` (src/index.js): write shardhost Kinesis handlers in
// JavaScript or TypeScript. README.md says what each does; these say what each takes and gives.
//
//   import { handler, ack, drop, retry } from "shardhost";
//   export const handle = handler((record) => (record.data.length ? ack : drop));
//
// HTTP is the global `fetch` (lib "dom" declares it); state is `state`. Bytes the SDK gives are
// `Uint8Array<ArrayBuffer>`: TypeScript 5.7 or later.

// ---- handlers ----

/**
 * The component's `handle` export, made by {@link handler} or {@link batchHandler}: export it
 * as `handle` (`export const handle = handler(ship)`). The host calls it; tests call the
 * handler function itself, or go through `shardhost/testing`.
 */
export type Handle = (info: object, records: object[]) => unknown;

/** What a per-record handler answers: an outcome, or a Promise of one. */
export type RecordAnswer = Outcome | PromiseLike<Outcome>;

/** What a per-batch handler answers: one outcome for every record, or one per record in order (or a Promise of either). */
export type BatchAnswer = Outcome | readonly Outcome[] | PromiseLike<Outcome | readonly Outcome[]>;

/**
 * Makes a per-record handler, `(record) => outcome`, into the component's `handle` export:
 * `export const handle = handler(ship);`. It is called once per record, in shard order; it may
 * be async (the records are then still handled one after another).
 */
export declare function handler(fn: (record: Record) => RecordAnswer): Handle;

/**
 * Makes a per-batch handler, `(info, records) => outcome | outcome[]`, into the component's
 * `handle` export: one outcome for the whole batch, or an array of exactly one per record, in
 * order. It may be async.
 */
export declare function batchHandler(fn: (info: BatchInfo, records: Record[]) => BatchAnswer): Handle;

// ---- outcomes ----

/** The kinds of outcome. */
export type OutcomeKind = "ack" | "drop" | "retry" | "retryAfter";

/**
 * What becomes of one record: {@link ack}, {@link drop}, {@link retry} or {@link retryAfter}.
 * Instances are frozen; there is no other way to make one.
 */
export declare class Outcome {
  private constructor();
  readonly kind: OutcomeKind;
  /** For `retryAfter`: the delay in whole milliseconds; otherwise undefined. */
  readonly delayMs: number | undefined;
  /** Whether the outcome settles the record (ack or drop): the checkpoint may move past it. */
  readonly settles: boolean;
  toString(): string;
  toJSON(): string;
}

/** Handled: the shard's checkpoint may move past the record. */
export declare const ack: Outcome;
/** Retired without handling, because it can never succeed: settles like ack. */
export declare const drop: Outcome;
/** Not handled now: held (without a retry cap), or sent again (under one). */
export declare const retry: Outcome;
/**
 * As {@link retry}, after at least `ms` milliseconds. Fractions round up; `Infinity` (or
 * anything past 2^64 - 1) means the longest delay there is.
 */
export declare function retryAfter(ms: number | bigint): Outcome;

// ---- records ----

/** The fields of `new Record({...})`, for tests (`data` as a string is encoded as UTF-8). */
export interface RecordFields {
  partitionKey?: string;
  sequenceNumber?: string;
  data?: Uint8Array | string;
  subSequenceNumber?: number;
  arrivalMillis?: number;
  attempt?: number;
}

/** What `record.toJSON()` (and so `JSON.stringify`, `console.log`) gives. */
export interface RecordJSON {
  partitionKey: string;
  sequenceNumber: string;
  subSequenceNumber: number;
  arrivalMillis: number;
  attempt: number;
  /** The data as text, when it is UTF-8. */
  data?: string;
  /** The data in base64, when it is not UTF-8. */
  dataBase64?: string;
}

/** One Kinesis record, as the host delivered it. `new Record({...})` builds one for a test. */
export declare class Record {
  constructor(fields?: RecordFields);
  /** The partition key the producer gave the record. */
  readonly partitionKey: string;
  /** The record's sequence number in its shard (a decimal string). */
  readonly sequenceNumber: string;
  /** The position of this user record inside a KPL aggregate; 0 for a plain record. */
  readonly subSequenceNumber: number;
  /** When Kinesis accepted the record, in milliseconds since the Unix epoch (approximate). */
  readonly arrivalMillis: number;
  /** Which delivery this is: 1 the first time; 2, 3, ... for copies under a retry cap. */
  readonly attempt: number;
  /** The record's data, as the producer put it (not copied). */
  readonly data: Uint8Array<ArrayBuffer>;
  /** The data as UTF-8 text; throws a {@link DecodeError} ("not-utf8") when it is not. */
  text(): string;
  /**
   * The data as JSON, by the rule every shardhost SDK follows (README "The JSON rule"):
   * integers past 2^53 - 1 come out as bigints (read integer fields with {@link integer});
   * throws a {@link DecodeError}. The shape is the handler's to check: the answer is `any`, as
   * `JSON.parse`'s is.
   */
  json(): any;
  toJSON(): RecordJSON;
}

/** The fields of `new BatchInfo({...})`, for tests. */
export interface BatchInfoFields {
  stream?: string;
  shardId?: string;
  millisBehindLatest?: number;
  attempt?: number;
}

/** Where a batch comes from, and which delivery it is. */
export declare class BatchInfo {
  constructor(fields?: BatchInfoFields);
  /** The stream the records were read from. */
  readonly stream: string;
  /** The shard the records were read from. */
  readonly shardId: string;
  /** How far the reader is behind the tip of the shard, when Kinesis said so. */
  readonly millisBehindLatest: number | undefined;
  /** 1 for a first delivery; higher for a copy published under a retry cap. */
  readonly attempt: number;
}

// ---- JSON ----

/** Why `record.text()` or `record.json()` could not decode a record. */
export type DecodeErrorKind = "not-utf8" | "not-json";

/** Thrown by `record.text()` and `record.json()`. */
export declare class DecodeError extends Error {
  constructor(kind: DecodeErrorKind, message: string, details?: { cause?: unknown; offset?: number; line?: number; column?: number });
  readonly kind: DecodeErrorKind;
  /** "not-utf8": the byte offset of the first invalid byte. */
  readonly offset?: number;
  /** "not-json", when known: where the problem is (1-based). */
  readonly line?: number;
  readonly column?: number;
}

/**
 * The integer field `container[key]` of a value `json()` answered: a number, or a bigint past
 * 2^53 - 1. Throws a TypeError for a float (`1.0` and `1e3` included), a missing field or
 * anything but a number.
 */
export declare function integer(container: unknown, key: string | number): number | bigint;

// ---- logging ----

/** The host's log levels, least severe first. */
export type Level = "trace" | "debug" | "info" | "warn" | "error";

/** The levels, least severe first. */
export declare const LEVELS: readonly Level[];

/**
 * Writes lines to the host's log. Each function takes what console.log takes (printf-style
 * `%s %d %i %f %j %o %O` in a first string argument, then any values) and formats it only when
 * the host records that level. `console` goes to the same log.
 */
export interface Log {
  trace(...args: unknown[]): void;
  debug(...args: unknown[]): void;
  info(...args: unknown[]): void;
  warn(...args: unknown[]): void;
  error(...args: unknown[]): void;
  /** `log.at("warn", ...)` */
  at(level: Level, ...args: unknown[]): void;
  /** Whether the host records lines of this level now. */
  enabled(level: Level): boolean;
}

export declare const log: Log;

// ---- the host: publish, seek ----

/** Bytes to send or store: a string is taken as UTF-8. */
export type Bytes = Uint8Array | ArrayBuffer | ArrayBufferView | string;

/** The host refused a call (publish, seek); `message` is the host's reason. */
export declare class HostError extends Error {
  constructor(message?: string, options?: ErrorOptions);
}

/**
 * Puts a record into a Kinesis stream through the host (the subscription lists it in
 * `publish_to`) and answers its sequence number; throws a {@link HostError}.
 */
export declare function publish(stream: string, partitionKey: string, data: Bytes): string;

/**
 * Asks the host to restart reading of the calling shard at this sequence number when the call
 * returns; throws a {@link HostError} when refused.
 */
export declare function seek(sequenceNumber: string | bigint): void;

// ---- configuration ----

/** The subscription's `[subscription.config]` values. */
export interface Config {
  /** The value of `name`, or undefined when the subscription's config has none. */
  get(name: string): string | undefined;
  /** Every value, by name. */
  all(): { [name: string]: string };
}

export declare const config: Config;

// ---- HTTP (the global fetch) ----

/** Why a fetch got no response. */
export type HttpErrorKind = "denied" | "timeout" | "connect" | "body-too-large" | "too-many-redirects" | "invalid-url" | "other";

/**
 * What a `fetch` without a response rejects with (a TypeError, as fetch's network errors are).
 * `new HttpError(kind, url, { origin, reason })` makes one, for a test's fake answers.
 */
export declare class HttpError extends TypeError {
  constructor(kind: HttpErrorKind, url?: string, details?: { origin?: string; reason?: string; cause?: unknown });
  readonly kind: HttpErrorKind;
  /** The request's URL (the redirect's, when one failed). */
  readonly url: string | undefined;
  /** The request's origin ("denied": the one the subscription does not allow). */
  readonly origin: string | undefined;
  readonly reason: string;
  /** Whether trying again later may succeed ("timeout", "connect"). */
  readonly transient: boolean;
}

/** The most redirects one fetch follows. */
export declare const MAX_REDIRECTS: number;

// ---- state ----

/** A value to store: bytes, or a string (stored as UTF-8). */
export type Value = Uint8Array | ArrayBuffer | ArrayBufferView | string;

/** What `setMany` takes: [key, value] pairs (any iterable), a Map, or an object. */
export type Entries = Iterable<readonly [string, Value]> | Map<string, Value> | { [key: string]: Value };

/** The operations of a bucket (README "State"; guest-sdk/STATE.md). Each throws a {@link StateError}. */
export interface StateOperations {
  /** The value of `key`, or undefined when it holds none (a counter reads as its decimal text). */
  get(key: string): Uint8Array<ArrayBuffer> | undefined;
  /** Sets `key` to `value`, whatever it held. */
  set(key: string, value: Value): void;
  /** Removes `key`. */
  delete(key: string): void;
  /** Whether `key` holds a value. */
  exists(key: string): boolean;
  /**
   * Adds `delta` (0 to 2^64 - 1; by default 1) to the counter `key`, made at 0; answers the new
   * value: a number, or a bigint past `Number.MAX_SAFE_INTEGER`.
   */
  increment(key: string, delta?: number | bigint): number | bigint;
  /** Sets `key` only if it holds no value; answers whether it did. */
  setIfAbsent(key: string, value: Value): boolean;
  /** Sets `key` only if it still holds exactly `expected`; answers whether it did. */
  compareAndSet(key: string, expected: Value, value: Value): boolean;
  /** The values of `keys`, in their order (undefined for a key without one). */
  getMany(keys: Iterable<string>): Array<Uint8Array<ArrayBuffer> | undefined>;
  /** Sets several keys (not atomic). */
  setMany(entries: Entries): void;
  /** Removes several keys (not atomic). */
  deleteMany(keys: Iterable<string>): void;
  /**
   * Runs `effect()` unless `key` is marked done, and marks it when `effect` returns; answers
   * whether the effect ran now. An effect that returns a Promise makes `once` answer a Promise.
   */
  once(key: string, effect: () => PromiseLike<unknown>): Promise<boolean>;
  once(key: string, effect: () => unknown): boolean;
}

/** A bucket of the store other than `default`: `state.bucket(name)`. */
export interface Bucket extends StateOperations {
  readonly name: string;
}

/** State: operations in the bucket `default`, and `bucket(name)` for another granted bucket. */
export interface State extends StateOperations {
  /** The bucket `name` (the same object for the same name), opened on its first operation. */
  bucket(name: string): Bucket;
}

export declare const state: State;

/** Why a state operation failed: the `wasi:keyvalue` error's case. */
export type StateErrorKind = "no-such-store" | "access-denied" | "other";

/** What a failed state operation throws. `new StateError(kind, message, { bucket })` makes one, for a test. */
export declare class StateError extends Error {
  constructor(kind: StateErrorKind, message?: string, details?: { bucket?: string; cause?: unknown });
  readonly kind: StateErrorKind;
  /** The bucket's name, when known. */
  readonly bucket: string | undefined;
}
