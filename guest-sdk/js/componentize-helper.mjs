// The parts of `componentize` (next to this file) that read JSON and logs. Not part of the SDK
// package; run by componentize only:
//
//   node componentize-helper.mjs inputs META          every file esbuild read (metafile META), one a line
//   node componentize-helper.mjs files META SDK       those not in the SDK's directory: the app's
//   node componentize-helper.mjs kept META MODULE     how many bytes of MODULE the bundle kept
//   node componentize-helper.mjs explain LOG BUNDLE APP  what went wrong, for people, from a failed
//                                                      build's log (BUNDLE.map maps the bundle's
//                                                      lines back to the app's files)
import { existsSync, readFileSync } from "node:fs";
import { dirname, relative, resolve, sep } from "node:path";

/** A path as people read it: relative to the working directory when inside it. */
function shown(path) {
  const here = process.cwd();
  return path.startsWith(here + sep) ? relative(here, path) : path;
}

function inputs(meta) {
  return Object.keys(JSON.parse(readFileSync(meta, "utf8")).inputs).map((p) => resolve(p)).sort();
}

function kept(meta, module) {
  let bytes = 0;
  for (const out of Object.values(JSON.parse(readFileSync(meta, "utf8")).outputs)) {
    for (const [p, input] of Object.entries(out.inputs)) if (resolve(p) === module) bytes += input.bytesInOutput;
  }
  return bytes;
}

// ---- source maps (version 3): the original place of a line and column of the bundle ----

const B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

function vlq(segment) {
  const values = [];
  let value = 0;
  let shift = 0;
  for (const ch of segment) {
    const digit = B64.indexOf(ch);
    value += (digit & 31) << shift;
    if (digit & 32) shift += 5;
    else {
      values.push(value & 1 ? -(value >>> 1) : value >>> 1);
      value = 0;
      shift = 0;
    }
  }
  return values;
}

/** { file, line, column } (1-based) of the bundle's `line`:`column` (1-based), or undefined. */
function original(mapFile, line, column) {
  if (!existsSync(mapFile)) return undefined;
  const map = JSON.parse(readFileSync(mapFile, "utf8"));
  let source = 0;
  let srcLine = 0;
  let srcColumn = 0;
  let best;
  const lines = map.mappings.split(";");
  for (let l = 0; l < lines.length && l < line; l++) {
    let genColumn = 0;
    for (const segment of lines[l].split(",")) {
      if (!segment) continue;
      const v = vlq(segment);
      genColumn += v[0];
      if (v.length >= 4) {
        source += v[1];
        srcLine += v[2];
        srcColumn += v[3];
        if (l === line - 1 && (best === undefined || genColumn <= column - 1)) {
          best = { source, line: srcLine, column: srcColumn };
        }
      }
    }
  }
  if (best === undefined) return undefined;
  const root = resolve(dirname(mapFile), map.sourceRoot ?? "");
  return { file: resolve(root, map.sources[best.source]), line: best.line + 1, column: best.column + 1 };
}

function sourceLine(file, line) {
  try {
    return readFileSync(file, "utf8").split("\n")[line - 1]?.trim();
  } catch {
    return undefined;
  }
}

// ---- what went wrong ----

/** esbuild's errors: "✘ [ERROR] message", then "    file:line:column:" and the code with a caret. */
function esbuildErrors(lines) {
  const out = [];
  for (let i = 0; i < lines.length; i++) {
    const m = /^(?:✘|X) \[ERROR\] (.*)$/.exec(lines[i]);
    if (!m) continue;
    let where = "";
    const code = [];
    let j = i + 1;
    while (j < lines.length && lines[j].trim() === "") j++;
    const at = /^ {4}(\S.*):(\d+):(\d+):$/.exec(lines[j] ?? "");
    if (at) {
      where = `${at[1]}:${at[2]}:${Number(at[3]) + 1}: `; // esbuild's columns count from 0
      const text = lines[j + 1] ?? "";
      const bar = text.indexOf("│ ");
      if (bar >= 0) {
        // the code without its indentation, and the marks under it
        const source = text.slice(bar + 2);
        const indent = source.length - source.trimStart().length;
        code.push(`    ${source.slice(indent)}`);
        const marks = lines[j + 2] ?? "";
        if (marks.length > bar + 2 + indent && /^\s*╵/.test(marks)) code.push(`    ${marks.slice(bar + 2 + indent)}`.trimEnd());
      }
    }
    let message = `componentize: ${where}${m[1]}`;
    if (/^Could not resolve "/.test(m[1])) {
      message += " (packages come from node_modules directories at and above the app: npm install it there)";
    }
    out.push(message, ...code);
    if (out.length >= 30) break;
  }
  return out;
}

function componentizeErrors(lines, bundle, entry) {
  const text = lines.join("\n");
  if (/does not export a "handle" function/.test(text)) {
    return [`componentize: ${entry} does not export handle: add export const handle = handler(fn) (or batchHandler(fn)), from "shardhost"`];
  }
  const top = text.indexOf("Exception while evaluating top-level script");
  if (top >= 0) {
    const after = text.slice(top).split("\n").slice(1);
    const at = /^(\S+?):(\d+):(\d+) (.*)$/.exec(after[0] ?? "");
    const note = "(at the module's top level, which runs when the component is built)";
    if (at) {
      const place = resolve(at[1]) === resolve(bundle) ? original(`${bundle}.map`, Number(at[2]), Number(at[3])) : undefined;
      if (place) {
        const code = sourceLine(place.file, place.line);
        return [`componentize: ${shown(place.file)}:${place.line}:${place.column}: ${at[4]} ${note}`, ...(code ? [`    ${code}`] : [])];
      }
      return [`componentize: ${entry}: ${at[4]} ${note}`];
    }
  }
  // Anything else: the error's own lines, without the stack.
  const first = lines.findIndex((l) => /^Error: /.test(l));
  if (first >= 0) {
    const rest = [];
    for (const l of lines.slice(first)) {
      if (/^\s+at /.test(l) || /^Node\.js v/.test(l)) break;
      if (l.trim()) rest.push(l);
    }
    return [`componentize: ${rest[0].replace(/^Error: /, "")}`, ...rest.slice(1, 10)];
  }
  return [];
}

function explain(log, bundle, entry) {
  const lines = readFileSync(log, "utf8").replace(/\r\n/g, "\n").split("\n");
  const out = esbuildErrors(lines);
  if (out.length) return out;
  return componentizeErrors(lines, bundle, entry);
}

const [command, ...args] = process.argv.slice(2);
switch (command) {
  case "inputs":
    for (const p of inputs(args[0])) console.log(p);
    break;
  case "files":
    for (const p of inputs(args[0])) if (!p.startsWith(resolve(args[1]) + sep)) console.log(p);
    break;
  case "kept":
    console.log(kept(args[0], resolve(args[1])));
    break;
  case "explain":
    for (const l of explain(args[0], args[1], args[2])) console.log(l);
    break;
  default:
    console.error(`componentize-helper.mjs: unknown command ${command}`);
    process.exit(2);
}
