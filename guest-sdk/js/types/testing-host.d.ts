// Type declarations of `shardhost/testing/host` (testing/host.js): the stand-in host a
// handler's tests run against under Node (after `shardhost/testing`). README.md, "Tests".
import type { HttpError, Level } from "./index.js";

/** A request the handler's fetch sent, as `state.http` sees it and `calls.http` keeps it. */
export interface SeenRequest {
  method: string;
  url: string;
  headers: Headers;
  body: Uint8Array<ArrayBuffer>;
  /** The body as UTF-8 text. */
  text(): string;
}

/** An answer to a request: a status, `{ status, headers, body }`, or an HttpError (returned or thrown). */
export type HttpAnswer =
  | number
  | { status: number; headers?: { [name: string]: string } | Array<[string, string]>; body?: string | Uint8Array }
  | HttpError;

/** What answers the handler's fetches: a function of the request, or an object of URL to answer (other URLs are denied). */
export type HttpAnswers =
  | ((request: SeenRequest) => HttpAnswer)
  | { [url: string]: HttpAnswer | ((request: SeenRequest) => HttpAnswer) };

/** Every call the SDK made, in order. */
export interface Calls {
  /** [level, message] per line logged. */
  log: Array<[Level, string]>;
  /** How often the SDK asked for the host's level. */
  maxLogLevel: number;
  /** [stream, partitionKey, data] per publish. */
  publish: Array<[string, string, Uint8Array<ArrayBuffer>]>;
  /** The sequence numbers seek was called with. */
  seek: string[];
  /** Every request fetch sent (a redirect is one more). */
  http: SeenRequest[];
}

export declare const calls: Calls;

/** What the stand-in answers; change it in a test (`reset()` restores the defaults). */
export interface HostState {
  /** What max-log-level answers: a level, or undefined for "none". Default "trace". */
  maxLevel: Level | undefined;
  /** Whether log lines are also written to standard error. Default true. */
  echo: boolean;
  /** Answers publish: a sequence number, or throw hostError(...). Default: refuses. */
  publish: (stream: string, partitionKey: string, data: Uint8Array<ArrayBuffer>) => string;
  /** Answers seek: throw hostError(...) to refuse. Default: refuses. */
  seek: (sequenceNumber: string) => void;
  /** The subscription's config values; undefined: from the environment (SHARDHOST_CONFIG_<NAME>). */
  config: { [name: string]: string | number | boolean } | undefined;
  /** What answers the handler's fetches; undefined: every fetch fails, as outside shardhost. */
  http: HttpAnswers | undefined;
  /** The store the SDK's `state` works on (a new one, bucket `default` only, after each reset()). */
  store: MemoryStore;
}

export declare const state: HostState;

/** Forgets the calls and restores the default answers. */
export declare function reset(): void;

/** The error the bindings throw for a refusal: throw it from `state.publish` / `state.seek`. */
export declare function hostError(reason: string): Error & { payload: string };

/** The error the wasi:keyvalue bindings throw. */
export declare function storeError(tag: "no-such-store" | "access-denied" | "other", val?: string): Error & {
  payload: { tag: string; val?: string };
};

/**
 * The host's store, in memory, with its rules: the bucket `default` and those in `buckets`
 * open (any other is "access-denied"), keys up to 1 KiB, values up to 350 KiB, counters. With
 * `error` set, every operation fails with "other" and that message (throttled, unreachable).
 */
export declare class MemoryStore {
  constructor(options?: { buckets?: string[]; error?: string });
  /** The buckets that open: `default`, then the others. */
  buckets: string[];
  /** When set: every operation fails with "other" and this message. */
  error: string | undefined;
  /** Every operation asked for, in order: [name, bucket, ...arguments]. */
  calls: Array<[string, ...unknown[]]>;
  /** What `get` answers for `key`. */
  value(key: string, bucket?: string): Uint8Array<ArrayBuffer> | undefined;
  /** `value` as text. */
  text(key: string, bucket?: string): string | undefined;
  /** Every key and value of a bucket. */
  items(bucket?: string): { [key: string]: Uint8Array<ArrayBuffer> };
  /** Every key and value of a bucket, as text. */
  texts(bucket?: string): { [key: string]: string };
  /** Writes without the handler: a string (UTF-8) or bytes, or a bigint for a counter. */
  put(key: string, value: string | Uint8Array | bigint, bucket?: string): void;
}
