// The build tool, componentize: its arguments, messages and exit codes (the same as the Python
// SDK's), and "up to date" when only a test changed. Needs the pinned tools (npm ci here: the
// first build installs them); one test builds (componentize-js, --no-aot, twice: ~30 s).
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

const TOOL = fileURLToPath(new URL("../componentize", import.meta.url));
const INSTALLED = existsSync(new URL("../node_modules/.bin/componentize-js", import.meta.url));

function run(args, cwd) {
  const r = spawnSync(TOOL, args, { cwd, encoding: "utf8", timeout: 600_000 });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

function write(root, files) {
  for (const [name, text] of Object.entries(files)) {
    mkdirSync(dirname(join(root, name)), { recursive: true });
    writeFileSync(join(root, name), text);
  }
}

const sha12 = (path) => createHash("sha256").update(readFileSync(path)).digest("hex").slice(0, 12);

function withDir(t, files, body) {
  const dir = mkdtempSync(join(tmpdir(), "shardhost-componentize-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  write(dir, files);
  return body(dir);
}

const APP = {
  "app.js": 'import { handler, ack } from "shardhost";\nimport { pick } from "./lib/pick.js";\nexport const handle = handler((r) => (pick(r), ack));\n',
  "lib/pick.js": "export function pick(record) {\n  return record.data.length > 0;\n}\n",
  "lib/unused.js": "export const x = 1;\n",
  "test/app.test.js": 'import "../app.js";\n',
};

test("mistakes say what to type (exit 2, one line)", (t) => {
  withDir(t, APP, (dir) => {
    const cases = [
      [["app.js"], /^componentize: usage: componentize \[options\] APP\.js OUT\.wasm \(see --help\)$/],
      [["--nope", "app.js", "out.wasm"], /^componentize: unknown option --nope \(see --help\)$/],
      [["nosuch.js", "out.wasm"], /^componentize: nosuch\.js: no such file$/],
      [["app.js", "out"], /^componentize: out: the output should end in \.wasm$/],
      [["lib", "out.wasm"], /^componentize: lib is a directory: pass the handler's file, e\.g\. componentize lib\/pick\.js out\.wasm$/],
      [[".", "app", "out.wasm"], /^componentize: usage: componentize \[options\] APP\.js OUT\.wasm \(see --help\)$/],
    ];
    for (const [args, message] of cases) {
      const r = run(args, dir);
      assert.equal(r.status, 2, `${args}: ${r.stderr}`);
      assert.match(r.stderr.trim(), message);
      assert.equal(r.stderr.split("\n").length, 2, r.stderr);
    }
  });
});

test("componentize --help", () => {
  const r = run(["--help"], tmpdir());
  assert.equal(r.status, 0);
  assert.match(r.stdout, /^usage: componentize \[-v\] \[--no-aot\] \[--http \| --no-http\] \[--state \| --no-state\] APP\.js OUT\.wasm$/m);
});

test("a bundling failure names the file and line, without esbuild's own report; -v passes it through", (t) => {
  if (!INSTALLED) return t.skip("the build tools are not installed (npm ci)");
  withDir(t, { ...APP, "lib/pick.js": "export function pick(record) {\n  return record.data.length >;\n}\n" }, (dir) => {
    const r = run(["--no-aot", "app.js", "app.wasm"], dir);
    assert.equal(r.status, 1, r.stderr);
    const lines = r.stderr.split("\n");
    assert.equal(lines[0], 'componentize: lib/pick.js:2:30: Unexpected ";"');
    assert.equal(lines[1], "    return record.data.length >;");
    assert.equal(lines.at(-2), "(the full output: out/app/build.log; -v prints it)");
    assert.doesNotMatch(r.stderr, /\[ERROR\]/);
    const v = run(["-v", "--no-aot", "app.js", "app.wasm"], dir);
    assert.equal(v.status, 1, v.stderr);
    assert.match(v.stderr, /\[ERROR\] Unexpected ";"/);
    assert.match(v.stderr, /^componentize: lib\/pick\.js:2:30: Unexpected ";"$/m);
    write(dir, { "app.js": 'import "left-pad";\n' });
    const missing = run(["--no-aot", "app.js", "app.wasm"], dir);
    assert.equal(missing.status, 1, missing.stderr);
    assert.match(missing.stderr.split("\n")[0], /^componentize: app\.js:1:8: Could not resolve "left-pad"/);
  });
});

const BUILT = /^built (?<out>\S+) \((?<size>\d+\.\d) MB, version (?<version>[0-9a-f]{12}), world (?<world>[a-z+]+)\) in \d+\.\d s$/;

const STAGE = /^componentize: compiling app\.js into a component \(without ahead-of-time compilation: about \d+ s\)$/;

test("a build: what it compiles, then the built line; up to date when only a test changed; a build-time exception names the app's line", (t) => {
  if (!INSTALLED) return t.skip("the build tools are not installed (npm ci)");
  withDir(t, APP, (dir) => {
    const out = join(dir, "app.wasm");
    const first = run(["--no-aot", "app.js", "app.wasm"], dir);
    assert.equal(first.status, 0, first.stderr);
    const lines = first.stderr.split("\n").filter(Boolean);
    assert.equal(lines.length, 2, first.stderr);
    assert.match(lines[0], STAGE);
    const built = BUILT.exec(lines[1]);
    assert.ok(built, lines[1]);
    assert.equal(built.groups.out, "app.wasm");
    assert.equal(built.groups.version, sha12(out));
    assert.equal(built.groups.world, "handler");
    assert.ok(Math.abs(Number(built.groups.size) - statSync(out).size / 1e6) <= 0.051, built.groups.size);
    const version = built.groups.version;
    // The world it was built for: the repository's `handler`, and no capability.
    assert.match(readFileSync(join(dir, "out/app/wit/app.wit"), "utf8"), /\nworld app \{\n {2}include handler;\n\}\n/);

    const files = run(["--files", "app.js", "app.wasm"], dir);
    assert.deepEqual(files.stdout.split("\n").filter(Boolean).sort(), [join(dir, "app.js"), join(dir, "lib/pick.js")]);

    // A test changes, a new file appears: nothing to build.
    writeFileSync(join(dir, "test/app.test.js"), 'import "../app.js";\n// more\n');
    const later = Date.now() / 1000 + 5;
    utimesSync(join(dir, "test/app.test.js"), later, later);
    write(dir, { "test/more.test.js": 'import "../lib/pick.js";\n', "lib/new.js": "export const y = 2;\n" });
    for (const args of [["--no-aot", "app.js", "app.wasm"], ["--no-aot", join(dir, "app.js"), out]]) {
      const again = run(args, dir);
      assert.equal(again.status, 0, again.stderr);
      assert.equal(again.stderr, `${args.at(-1)} is up to date (version ${version}, world handler)\n`);
    }
    assert.equal(sha12(out), version);

    // The module's top level runs when the component is built: an exception there names the app's line.
    write(dir, { "lib/pick.js": 'const CARRIERS = JSON.parse("{");\nexport function pick(record) {\n  return CARRIERS[record.partitionKey];\n}\n' });
    const failed = run(["--no-aot", "app.js", "app.wasm"], dir);
    assert.equal(failed.status, 1, failed.stderr);
    const [stage, ...why] = failed.stderr.split("\n");
    assert.match(stage, STAGE);
    assert.match(why[0], /^componentize: lib\/pick\.js:1:\d+: SyntaxError: JSON\.parse: .* \(at the module's top level, which runs when the component is built\)$/);
    assert.equal(why[1], '    const CARRIERS = JSON.parse("{");');
    assert.equal(why.at(-2), "(the full output: out/app/build.log; -v prints it)");
    assert.doesNotMatch(failed.stderr, /componentize-js|wizer|node_modules/);
    assert.equal(sha12(out), version, "a failed build leaves the component as it was");
  });
});
