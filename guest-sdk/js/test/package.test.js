import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { sdk } from "../testing/sdk-tests.js";

test("the public API, and no binding shapes in it", () => {
  assert.deepEqual(Object.keys(sdk).sort(), [
    "BatchInfo", "DecodeError", "HostError", "LEVELS", "Outcome", "Record", "ack", "batchHandler",
    "drop", "handler", "integer", "log", "publish", "retry", "retryAfter", "seek",
  ]);
});

test("the packaged WIT is the repository's", (t) => {
  const repo = new URL("../../../wit/handler.wit", import.meta.url);
  if (!existsSync(repo)) return t.skip("not inside the shardhost repository");
  const packaged = readFileSync(new URL("../wit/handler.wit", import.meta.url), "utf8");
  assert.equal(packaged, readFileSync(repo, "utf8"), "copy wit/handler.wit into guest-sdk/js/wit/");
});

test("the build tool: componentize --help, and its tools pinned exactly", () => {
  const help = execFileSync(fileURLToPath(new URL("../componentize", import.meta.url)), ["--help"], { encoding: "utf8" });
  assert.match(help, /^usage: componentize \[--no-aot\] APP\.js OUT\.wasm$/m);
  const pkg = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8"));
  for (const [name, version] of Object.entries(pkg.devDependencies)) {
    assert.match(version, /^\d+\.\d+\.\d+$/, `${name} pinned to one version`);
  }
  const lock = JSON.parse(readFileSync(new URL("../package-lock.json", import.meta.url), "utf8"));
  assert.deepEqual(lock.packages[""].devDependencies, pkg.devDependencies, "package-lock.json is current");
});
