// The SDK ships type declarations for its public API (`shardhost`, `shardhost/testing`,
// `shardhost/testing/host`), found through package.json: TypeScript (pinned in devDependencies)
// checks a typed handler and its test against the package as npm would install it (the files
// package.json lists), with checkJs and strict; wrong uses fail to type-check.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

const SDK = fileURLToPath(new URL("..", import.meta.url));
const TSC = join(SDK, "node_modules", "typescript", "bin", "tsc");

const TSCONFIG = {
  compilerOptions: {
    module: "nodenext",
    moduleResolution: "nodenext",
    target: "es2022",
    lib: ["es2022", "dom"],
    allowJs: true,
    checkJs: true,
    strict: true,
    noEmit: true,
    skipLibCheck: false, // the SDK's declarations are checked too
    types: [],
  },
};

// A handler using most of the API, with its types written out where a wrong declaration would
// show; and, marked @ts-expect-error, wrong uses that must not type-check.
const APP = `
import {
  handler, batchHandler, ack, drop, retry, retryAfter, Outcome, Record, BatchInfo, DecodeError,
  integer, log, LEVELS, publish, seek, HostError, config, HttpError, MAX_REDIRECTS, state, StateError,
} from "shardhost";

/**
 * @param {Record} record
 * @returns {Outcome}
 */
export function ship(record) {
  /** @type {any} */
  let shipment;
  try {
    shipment = record.json();
  } catch (e) {
    if (e instanceof DecodeError && (e.kind === "not-utf8" || e.kind === "not-json")) return drop;
    throw e;
  }
  /** @type {number | bigint} */
  const id = integer(shipment, "id");
  /** @type {string | undefined} */
  const url = config.get("carrier_url");
  /** @type {{ [name: string]: string }} */
  const all = config.all();
  /** @type {number | bigint} */
  const seen = state.increment(\`seen:\${record.partitionKey}\`);
  const orders = state.bucket("orders");
  /** @type {string} */
  const name = orders.name;
  /** @type {boolean} */
  const fresh = orders.setIfAbsent(String(id), record.data);
  /** @type {Array<Uint8Array | undefined>} */
  const many = state.getMany(["a", "b"]);
  state.setMany({ a: "1", b: new Uint8Array(1) });
  state.setMany([["a", "1"]]);
  /** @type {boolean} */
  const done = state.once("k", () => undefined);
  if (log.enabled("debug")) log.debug("%s %d %o", name, seen, all, many, LEVELS[0], MAX_REDIRECTS);
  log.at("warn", "x");
  console.info("booked %d", id);
  /** @type {string} */
  const text = record.text();
  /** @type {Uint8Array} */
  const data = record.data;
  /** @type {number} */
  const arrived = record.arrivalMillis + record.attempt + record.subSequenceNumber;
  /** @type {string} */
  const seq = record.sequenceNumber;
  if (!url || !fresh || !done) return retryAfter(1000n);
  /** @type {"ack" | "drop" | "retry" | "retryAfter"} */
  const kind = ack.kind;
  /** @type {boolean} */
  const settles = drop.settles;
  return text && data && arrived && seq && kind && settles ? ack : retry;
}

export const handle = handler(ship);

export const asyncHandle = handler(async (record) => {
  const response = await fetch("https://carrier.example/book", { method: "POST", body: record.data });
  return response.ok ? ack : retryAfter(500);
});

export const batch = batchHandler(async (info, records) => {
  /** @type {string} */
  const shard = info.shardId + info.stream;
  /** @type {number | undefined} */
  const behind = info.millisBehindLatest;
  /** @type {boolean} */
  const booked = await state.once("booked", async () => fetch("https://carrier.example/" + shard));
  try {
    /** @type {string} */
    const sequence = publish("out", "pk", records[0].data);
    seek(sequence);
  } catch (e) {
    if (e instanceof HostError) return retry;
    if (e instanceof HttpError && e.kind === "denied" && e.transient === false) return drop;
    if (e instanceof StateError && e.kind === "access-denied" && e.bucket === "orders") return drop;
    throw e;
  }
  return records.map(() => (booked && behind !== 0 ? ack : drop));
});

export const one = batchHandler(() => ack);

export const made = [new Record({ partitionKey: "p", data: "x" }), new BatchInfo({ shardId: "s" }),
  new HttpError("timeout", "https://x.example/"), new StateError("other", "m", { bucket: "b" }),
  new DecodeError("not-json", "m", { line: 1, column: 2 })];

// @ts-expect-error: an outcome is an Outcome, not a string
handler(() => "ack");
// @ts-expect-error: a batch handler answers outcomes
batchHandler(() => [1, 2]);
// @ts-expect-error: retryAfter takes milliseconds (a number or a bigint)
retryAfter("5");
// @ts-expect-error: a record's data is bytes
handler((record) => (record.data.toUpperCase() ? ack : drop));
// @ts-expect-error: config values are strings or undefined
config.get("x").toUpperCase();
// @ts-expect-error: state.get answers bytes or undefined
state.get("k").length;
// @ts-expect-error: log levels are named
log.at("loud", "x");
// @ts-expect-error: outcomes are not constructed
new Outcome("ack");
// @ts-expect-error: no such export
import("shardhost").then((sdk) => sdk.nack);
`;

// A test of the handler, typed: the testing entry points.
const APP_TEST = `
import "shardhost/testing";
import { state, calls, reset, MemoryStore, hostError } from "shardhost/testing/host";
import { Record, HttpError, ack } from "shardhost";
import { ship } from "./app.js";

reset();
state.echo = false;
state.maxLevel = "info";
state.config = { carrier_url: "https://carrier.example/book" };
state.store = new MemoryStore({ buckets: ["orders"] });
state.http = { "https://carrier.example/book": 201, "https://carrier.example/x": new HttpError("timeout") };
state.http = (request) => (request.method === "POST" && request.text() ? { status: 201, body: "ok" } : 404);
state.publish = (stream, partitionKey, data) => \`\${stream}\${partitionKey}\${data.length}\`;
state.seek = () => {
  throw hostError("no");
};
/** @type {boolean} */
const acked = ship(new Record({ partitionKey: "order-1", sequenceNumber: "1", data: '{"id":1}' })) === ack;
/** @type {string | undefined} */
const text = state.store.text("1", "orders");
/** @type {{ [key: string]: string }} */
const texts = state.store.texts("orders");
state.store.put("n", 5n);
state.store.error = "throttled";
/** @type {string[]} */
const lines = calls.log.map(([level, message]) => level + message);
/** @type {string[]} */
const urls = calls.http.map((r) => r.url + r.headers.get("content-type"));
export const seen = [acked, text, texts, lines, urls, calls.publish.length, calls.seek.length];

// @ts-expect-error: config values are given as an object
state.config = "carrier_url=x";
// @ts-expect-error: a MemoryStore's buckets are names
new MemoryStore({ buckets: "orders" });
`;

// A wrong use, on its own: must fail, naming the line.
const WRONG = `
import { handler, ack } from "shardhost";
export const handle = handler((record) => (record.partitionKey.length > 0 ? "ack" : ack));
`;

/** The SDK as npm installs it: package.json and the files it lists, in node_modules/shardhost. */
function install(dir) {
  const pkg = JSON.parse(readFileSync(join(SDK, "package.json"), "utf8"));
  const target = join(dir, "node_modules", "shardhost");
  mkdirSync(target, { recursive: true });
  for (const file of ["package.json", ...pkg.files]) {
    // wit/ is the repository's, which npm pack copies in (pack-wit.mjs)
    const from = file === "wit/" ? join(SDK, "..", "..", "wit") : join(SDK, file);
    cpSync(from, join(target, file), { recursive: true });
  }
}

function tsc(dir, files) {
  writeFileSync(join(dir, "tsconfig.json"), JSON.stringify({ ...TSCONFIG, files }, null, 2));
  const run = spawnSync(process.execPath, [TSC, "-p", dir, "--pretty", "false"], { encoding: "utf8", timeout: 120_000 });
  return { status: run.status, output: `${run.stdout}${run.stderr}` };
}

test("the type declarations check a typed handler and its test (tsc, checkJs, strict)", (t) => {
  if (!existsSync(TSC)) return t.skip("typescript is not installed (npm ci in guest-sdk/js)");
  const dir = mkdtempSync(join(tmpdir(), "shardhost-types-"));
  try {
    install(dir);
    writeFileSync(join(dir, "package.json"), JSON.stringify({ type: "module", private: true }));
    writeFileSync(join(dir, "app.js"), APP);
    writeFileSync(join(dir, "app.test.js"), APP_TEST);
    const good = tsc(dir, ["app.js", "app.test.js"]);
    assert.equal(good.status, 0, `tsc found errors:\n${good.output}`);
    writeFileSync(join(dir, "wrong.js"), WRONG);
    const wrong = tsc(dir, ["wrong.js"]);
    assert.notEqual(wrong.status, 0, "a handler answering a string type-checks");
    assert.match(wrong.output, /wrong\.js\(3,\d+\): error TS\d+: .*"ack".* is not assignable/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("package.json names the declarations of each entry point", () => {
  const pkg = JSON.parse(readFileSync(join(SDK, "package.json"), "utf8"));
  for (const entry of [".", "./testing", "./testing/host"]) {
    const types = pkg.exports[entry]?.types;
    assert.ok(types, `exports["${entry}"].types`);
    assert.ok(existsSync(join(SDK, types)), types);
    assert.ok(pkg.files.some((f) => types.startsWith(`./${f}`) || types === `./${f}`), `${types} is in "files"`);
  }
  assert.equal(pkg.types, pkg.exports["."].types);
});
