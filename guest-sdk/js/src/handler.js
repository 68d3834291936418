// The adapters that make a handler function the component's `handle` export.

import { beginCall, log, logAlways, show } from "./log.js";
import {
  HOST_ACK,
  HOST_DROP,
  HOST_RETRY,
  ack,
  drop,
  retry,
  toHostBatchOutcome,
  toHostOutcome,
} from "./outcome.js";
import { HostRecord, batchInfoFromHost, recordFromHost } from "./record.js";

/**
 * Makes a per-record handler, `(record) => outcome`, into the component's `handle` export:
 * `export const handle = handler(ship);`
 *
 * It is called once per record, in shard order, and the outcomes go back in the same order.
 * It may be async (return a Promise of an outcome); the records are then still handled one
 * after another.
 * @param {(record: import("./record.js").Record) => import("./outcome.js").Outcome
 *   | Promise<import("./outcome.js").Outcome>} fn
 */
export function handler(fn) {
  if (typeof fn !== "function") {
    throw new TypeError(`handler(fn): fn must be a function (record) => outcome, got ${typeof fn}`);
  }
  return function handle(info, records) {
    try {
      beginCall();
      const attempt = info.attempt;
      const out = new Array(records.length);
      for (let i = 0; i < records.length; i++) {
        const answer = fn(new HostRecord(records[i], attempt));
        // ack, drop and retry first: one comparison each, no lookups (an interpreter runs this)
        if (answer === ack) out[i] = HOST_ACK;
        else if (answer === drop) out[i] = HOST_DROP;
        else if (answer === retry) out[i] = HOST_RETRY;
        else if (isThenable(answer)) return finishAsync(fn, records, attempt, out, i, answer);
        else out[i] = toHostOutcome(answer, "the handler");
      }
      return { tag: "each", val: out };
    } catch (e) {
      throw reported(e);
    }
  };
}

async function finishAsync(fn, records, attempt, out, i, pending) {
  try {
    out[i] = toHostOutcome(await pending, "the handler");
    for (i++; i < records.length; i++) {
      out[i] = toHostOutcome(await fn(recordFromHost(records[i], attempt)), "the handler");
    }
    return { tag: "each", val: out };
  } catch (e) {
    throw reported(e);
  }
}

/**
 * Makes a per-batch handler, `(info, records) => outcome | outcome[]`, into the component's
 * `handle` export: `export const handle = batchHandler(count);`
 *
 * Return one outcome for the whole batch, or an array of exactly one outcome per record, in
 * the order given. It may be async.
 * @param {(info: import("./record.js").BatchInfo, records: import("./record.js").Record[]) =>
 *   any} fn
 */
export function batchHandler(fn) {
  if (typeof fn !== "function") {
    throw new TypeError(
      `batchHandler(fn): fn must be a function (info, records) => outcome or outcome[], got ${typeof fn}`,
    );
  }
  return function handle(info, records) {
    try {
      beginCall();
      const batchInfo = batchInfoFromHost(info);
      const list = new Array(records.length);
      for (let i = 0; i < records.length; i++) list[i] = recordFromHost(records[i], info.attempt);
      const answer = fn(batchInfo, list);
      if (isThenable(answer)) {
        return Promise.resolve(answer).then(
          (a) => {
            try {
              return toHostBatchOutcome(a, records.length);
            } catch (e) {
              throw reported(e);
            }
          },
          (e) => {
            throw reported(e);
          },
        );
      }
      return toHostBatchOutcome(answer, records.length);
    } catch (e) {
      throw reported(e);
    }
  };
}

function isThenable(x) {
  return x !== null && (typeof x === "object" || typeof x === "function") && typeof x.then === "function";
}

const REPORTED = new WeakSet();

/**
 * Logs what a handler threw at error level, whatever the threshold (the Rust SDK's panic hook
 * does the same): the host throws guest stderr away, and names the last error line in its
 * report of the failed call. The exception then fails the call, as a panic does.
 */
function reported(e) {
  if (e !== null && typeof e === "object") {
    if (REPORTED.has(e)) return e;
    REPORTED.add(e);
  }
  logAlways("error", `handler threw ${brief(e)}`);
  if (e instanceof Error && log.enabled("debug")) log.debug("%s", `the stack of ${show(e)}`);
  return e;
}

/**
 * One line for a thrown value: an Error's `String(e)` and the frame it was thrown in
 * (`at app.js:12:5 in pick`), as the Python SDK says it; anything else as `show` does.
 */
function brief(e) {
  if (!(e instanceof Error)) return show(e);
  const head = String(e).replace(/\n/g, " ");
  const frame = typeof e.stack === "string" ? firstFrame(e.stack) : null;
  return frame ? `${head} at ${frame}` : head;
}

/** `where in name` of a stack's first frame: V8's `at name (where)` or SpiderMonkey's `name@where`. */
function firstFrame(stack) {
  for (const raw of stack.split("\n")) {
    const line = raw.trim();
    let m = /^at (?:(.+?) \()?(\S+?:\d+:\d+)\)?$/.exec(line);
    if (!m) m = /^(.*?)@(\S+?:\d+:\d+)$/.exec(line);
    if (m) return m[1] ? `${m[2]} in ${m[1]}` : m[2];
  }
  return null;
}
