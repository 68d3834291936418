// The package's wit/ (package.json's "files" and "exports"): the repository's wit/, copied here
// by `npm pack` and `npm publish` (the prepack script) and removed after (postpack). Nothing
// else makes it: the checkout keeps one WIT, at its root, which componentize reads.
//
//   node pack-wit.mjs copy | remove
import { cpSync, existsSync, rmSync } from "node:fs";
import { fileURLToPath } from "node:url";

const repo = fileURLToPath(new URL("../../wit", import.meta.url));
const here = fileURLToPath(new URL("./wit", import.meta.url));

const command = process.argv[2];
if (command === "copy") {
  if (!existsSync(`${repo}/handler.wit`)) {
    console.error(`pack-wit: no ${repo}/handler.wit: pack the SDK from a shardhost checkout`);
    process.exit(1);
  }
  rmSync(here, { recursive: true, force: true });
  cpSync(repo, here, { recursive: true });
} else if (command === "remove") {
  rmSync(here, { recursive: true, force: true });
} else {
  console.error("usage: node pack-wit.mjs copy | remove");
  process.exit(2);
}
