import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { sdk } from "../testing/sdk-tests.js";

test("the public API, and no binding shapes in it", () => {
  assert.deepEqual(Object.keys(sdk).sort(), [
    "BatchInfo", "DecodeError", "HostError", "HttpError", "LEVELS", "MAX_REDIRECTS", "Outcome", "Record",
    "StateError", "ack", "batchHandler", "config", "drop", "handler", "integer", "log", "publish", "retry",
    "retryAfter", "seek", "state",
  ]);
});

/** { relative path: text } of every file under a directory. */
function tree(dir) {
  const files = {};
  for (const name of readdirSync(dir, { recursive: true })) {
    const path = join(dir, name);
    if (statSync(path).isFile()) files[name] = readFileSync(path, "utf8");
  }
  return files;
}

test("the package ships the repository's WIT (handler.wit and deps/), copied only while it is packed", (t) => {
  const repo = fileURLToPath(new URL("../../../wit", import.meta.url));
  if (!existsSync(join(repo, "handler.wit"))) return t.skip("not inside the shardhost repository");
  const sdkDir = fileURLToPath(new URL("..", import.meta.url));
  const out = execFileSync("npm", ["pack", "--dry-run", "--json", "--ignore-scripts=false"], { cwd: sdkDir, encoding: "utf8" });
  const packed = JSON.parse(out.slice(out.indexOf("[")))[0].files.map((f) => f.path).filter((p) => p.startsWith("wit/"));
  assert.deepEqual(packed.sort(), Object.keys(tree(repo)).map((p) => `wit/${p}`).sort());
  assert.ok(!existsSync(join(sdkDir, "wit")), "the copy is removed after the pack (the checkout keeps one wit/)");
});

test("the build tool: componentize --help, and its tools pinned exactly", () => {
  const help = execFileSync(fileURLToPath(new URL("../componentize", import.meta.url)), ["--help"], { encoding: "utf8" });
  assert.match(help, /^usage: componentize \[-v\] \[--no-aot\] \[--http \| --no-http\] \[--state \| --no-state\] APP\.js OUT\.wasm$/m);
  const pkg = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8"));
  for (const [name, version] of Object.entries(pkg.devDependencies)) {
    assert.match(version, /^\d+\.\d+\.\d+$/, `${name} pinned to one version`);
  }
  const lock = JSON.parse(readFileSync(new URL("../package-lock.json", import.meta.url), "utf8"));
  assert.deepEqual(lock.packages[""].devDependencies, pkg.devDependencies, "package-lock.json is current");
});

test("the world follows what the bundle keeps of the SDK's state (componentize --world)", (t) => {
  const tool = fileURLToPath(new URL("../componentize", import.meta.url));
  if (!existsSync(new URL("../node_modules/.bin/esbuild", import.meta.url))) return t.skip("the build tools are not installed (npm ci)");
  const dir = mkdtempSync(join(tmpdir(), "shardhost-world-"));
  const app = (imports, body) => `import { handler, ack, ${imports} } from "shardhost";\nexport const handle = handler(${body});\n`;
  const world = (source, flags = []) => {
    writeFileSync(join(dir, "app.js"), source);
    return execFileSync(tool, ["--world", ...flags, join(dir, "app.js"), join(dir, "app.wasm")], { encoding: "utf8" }).trim();
  };
  try {
    const apps = {
      [app("state", '() => (state.increment("n"), ack)')]: "handler+state",
      [app("state", 'async () => { await state.once("k", async () => fetch("http://h/")); return ack; }')]: "handler+http+state",
      [app("state", "() => ack")]: "handler", // imported, never used: the bundler drops it
      [app("StateError", "(r) => (r instanceof StateError ? ack : ack)")]: "handler",
      'import * as sdk from "shardhost";\nexport const handle = sdk.handler(() => (sdk.state.get("k"), sdk.ack));\n': "handler+state",
      'import * as sdk from "shardhost";\nexport const handle = sdk.handler(() => sdk.ack);\n': "handler",
      'import { handler, ack, state } from "shardhost";\nconst orders = state.bucket("orders");\nexport const handle = handler(() => (orders.get("k"), ack));\n': "handler+state",
    };
    for (const [source, expected] of Object.entries(apps)) assert.equal(world(source), expected, source);
    const both = app("state", 'async () => { await fetch("http://h/"); state.get("k"); return ack; }');
    for (const [flags, expected] of [[["--no-state"], "handler+http"], [["--no-http"], "handler+state"],
      [["--no-http", "--no-state"], "handler"], [["--state"], "handler+http+state"]]) {
      assert.equal(world(both, flags), expected, String(flags));
    }
    const none = app("", "() => ack");
    for (const [flags, expected] of [[["--state"], "handler+state"], [["--http", "--state"], "handler+http+state"],
      [["--http"], "handler+http"], [["--no-state"], "handler"]]) {
      assert.equal(world(none, flags), expected, String(flags));
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("the world follows the bundle's calls of fetch (componentize --world)", (t) => {
  const tool = fileURLToPath(new URL("../componentize", import.meta.url));
  if (!existsSync(new URL("../node_modules/.bin/esbuild", import.meta.url))) return t.skip("the build tools are not installed (npm ci)");
  const dir = mkdtempSync(join(tmpdir(), "shardhost-world-"));
  try {
    const apps = {
      'import { handler, ack } from "shardhost";\nexport const handle = handler(() => ack);\n': "handler",
      'import { handler, ack } from "shardhost";\nexport const handle = handler(async (r) => { await fetch("http://h/"); return ack; });\n': "handler+http",
      'import { handler, ack } from "shardhost";\nexport const handle = handler(async () => { await globalThis.fetch("http://h/"); return ack; });\n': "handler+http",
      'import { handler, ack } from "shardhost";\nconst prefetch = 1;\nexport const handle = handler(() => ack);\n': "handler",
    };
    for (const [source, world] of Object.entries(apps)) {
      writeFileSync(join(dir, "app.js"), source);
      for (const [flags, expected] of [[[], world], [["--http"], "handler+http"], [["--no-http"], "handler"]]) {
        const got = execFileSync(tool, ["--world", ...flags, join(dir, "app.js"), join(dir, "app.wasm")], { encoding: "utf8" }).trim();
        assert.equal(got, expected, `${source} ${flags}`);
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
