// Logging through the host: the `log` object, and `console` routed to it.

import * as host from "./bindings.js";

/** The levels, least severe first, as the host names them. */
export const LEVELS = Object.freeze(["trace", "debug", "info", "warn", "error"]);
const RANK = { trace: 0, debug: 1, info: 2, warn: 3, error: 4 };
const NONE = 5;

/** The rank of the least severe level the host records now (NONE: it records none). */
let threshold = 0;
let calls = 0;
/** Whether the host is there to call: false while the component is being built (wizer). */
let live = false;
/** Lines logged before the first call (module top level, at build time), sent at the first call. */
let early = [];
const EARLY_MAX = 64;

/**
 * Called by the export adapter at the start of every call: asks the host which levels it
 * records on the first call and every 64th after it (the answer only changes when the host's
 * filter is reloaded; the Rust SDK does the same).
 * @internal
 */
export function beginCall() {
  if (calls++ % 64 === 0) {
    const max = host.maxLogLevel();
    threshold = max === undefined || max === null ? NONE : RANK[max] ?? 0;
  }
  if (!live) {
    live = true;
    const lines = early;
    early = [];
    for (const [level, message] of lines) {
      if (RANK[level] >= threshold) send(level, `(at start-up) ${message}`);
    }
  }
}

/** Whether a call has begun: before it (module top level, run when the component is built) the
 * host cannot be called. @internal */
export function isLive() {
  return live;
}

/** Under Node (shardhost/testing): no component is being built, the stand-in host answers from
 * the start. @internal */
export function underTest() {
  if (!live) {
    live = true;
    early = [];
  }
}

/** Whether the host records lines of this level now; the log functions check it themselves. */
export function enabled(level) {
  return (RANK[level] ?? RANK.info) >= threshold;
}

function send(level, message) {
  if (!live) {
    if (early.length < EARLY_MAX) early.push([level, message]);
    return;
  }
  host.log(level, wellFormed(message));
}

/** Sends a line whatever the threshold (a handler's uncaught exception, before the trap). @internal */
export function logAlways(level, message) {
  send(level, message);
}

function write(level, args) {
  if ((RANK[level] ?? RANK.info) >= threshold) send(level, format(args));
}

/**
 * Writes lines to the host's log, tagged there with the subscription, shard and handler
 * version. Each function takes what console.log takes (printf-style `%s %d %i %f %j %o %O`
 * in a first string argument, then any values) and formats it only when the host records
 * that level.
 */
export const log = Object.freeze({
  trace: (...args) => write("trace", args),
  debug: (...args) => write("debug", args),
  info: (...args) => write("info", args),
  warn: (...args) => write("warn", args),
  error: (...args) => write("error", args),
  /** log.at("warn", ...) */
  at: (level, ...args) => {
    if (!(level in RANK)) throw new TypeError(`log.at: unknown level ${JSON.stringify(level)}; use one of ${LEVELS.join(", ")}`);
    write(level, args);
  },
  enabled,
});

/**
 * Routes `console` to the host's log: debug -> debug, log and info -> info, warn -> warn,
 * error -> error, trace -> trace; dir is info; assert logs at error when its condition fails.
 * (The host throws a guest's own stdout and stderr away.)
 */
export function routeConsole(target = globalThis.console) {
  if (!target) return;
  const route = (name, level) => {
    const rank = RANK[level];
    try {
      target[name] = (...args) => {
        if (rank >= threshold) send(level, format(args));
      };
    } catch {
      // a frozen console: leave it
    }
  };
  route("trace", "trace");
  route("debug", "debug");
  route("log", "info");
  route("info", "info");
  route("dir", "info");
  route("warn", "warn");
  route("error", "error");
  try {
    target.assert = (condition, ...args) => {
      if (!condition) write("error", args.length ? ["Assertion failed:", ...args] : ["Assertion failed"]);
    };
  } catch {
    // as above
  }
}

// ---- formatting ----

/** Formats console-style arguments into one line (Node's util.format, roughly). */
export function format(args) {
  if (args.length === 0) return "";
  const first = args[0];
  let next = 1;
  let out;
  if (typeof first !== "string") {
    out = show(first);
  } else if (first.indexOf("%") === -1) {
    out = first;
  } else {
    out = first.replace(/%([sdifjoOc%])/g, (whole, spec) => {
      if (spec === "%") return "%";
      if (next >= args.length) return whole;
      const a = args[next++];
      switch (spec) {
        case "s":
          return typeof a === "string" ? a : show(a);
        case "d":
        case "i": {
          if (typeof a === "bigint") return `${a}n`;
          const n = Number(a);
          return String(spec === "i" ? Math.trunc(n) : n);
        }
        case "f":
          return String(Number(a));
        case "c":
          return ""; // CSS: meaningless in a log line
        default: // j o O
          return show(a);
      }
    });
  }
  for (let i = next; i < args.length; i++) {
    const a = args[i];
    out += " " + (typeof a === "string" ? a : show(a));
  }
  return out;
}

/** One value as text: strings as they are, errors with their stack, the rest as JSON-like text. */
export function show(value) {
  switch (typeof value) {
    case "string":
      return value;
    case "bigint":
      return `${value}n`;
    case "symbol":
      return value.toString();
    case "function":
      return `[Function ${value.name || "(anonymous)"}]`;
    case "undefined":
      return "undefined";
    case "object":
      if (value === null) return "null";
      if (value instanceof Error) return showError(value);
      return stringify(value);
    default:
      return String(value);
  }
}

function showError(e) {
  const head = String(e);
  const stack = typeof e.stack === "string" ? e.stack.trimEnd() : "";
  // V8 starts the stack with the message; SpiderMonkey gives only the frames.
  let text = !stack ? head : stack.startsWith(head) ? stack : `${head}\n${stack}`;
  if (e.cause !== undefined) text += `\nCaused by: ${show(e.cause)}`;
  return text;
}

function stringify(value) {
  const seen = new Set();
  try {
    const text = JSON.stringify(value, function (key, v) {
      if (typeof v === "bigint") return `${v}n`;
      if (typeof v === "function") return `[Function ${v.name || "(anonymous)"}]`;
      if (typeof v === "symbol") return v.toString();
      if (typeof v === "object" && v !== null) {
        if (seen.has(v)) return "[Circular]";
        seen.add(v);
        if (v instanceof Error) return showError(v);
        if (v instanceof Map) return { Map: Object.fromEntries(v) };
        if (v instanceof Set) return { Set: [...v] };
        if (ArrayBuffer.isView(v) && !(v instanceof DataView)) {
          return `${v.constructor.name}(${v.length}) [${Array.prototype.slice.call(v, 0, 64).join(", ")}${v.length > 64 ? ", ..." : ""}]`;
        }
      }
      return v;
    });
    return text === undefined ? String(value) : text;
  } catch {
    return Object.prototype.toString.call(value);
  }
}

/** The host's `log` takes a string; a lone surrogate becomes U+FFFD rather than a failed call. */
function wellFormed(s) {
  if (typeof s.toWellFormed === "function") return s.toWellFormed();
  return s.replace(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g, "\uFFFD");
}
