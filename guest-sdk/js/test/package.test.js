import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { test } from "node:test";
import { sdk } from "../testing/sdk-tests.js";

test("the public API, and no binding shapes in it", () => {
  assert.deepEqual(Object.keys(sdk).sort(), [
    "BatchInfo", "DecodeError", "HostError", "LEVELS", "Outcome", "Record", "ack", "batchHandler",
    "drop", "handler", "log", "publish", "retry", "retryAfter", "seek",
  ]);
});

test("the packaged WIT is the repository's", (t) => {
  const repo = new URL("../../../wit/handler.wit", import.meta.url);
  if (!existsSync(repo)) return t.skip("not inside the shardhost repository");
  const packaged = readFileSync(new URL("../wit/handler.wit", import.meta.url), "utf8");
  assert.equal(packaged, readFileSync(repo, "utf8"), "copy wit/handler.wit into guest-sdk/js/wit/");
});
