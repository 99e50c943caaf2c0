#!/usr/bin/env bash
# Runs `npm ci` in DIR when its node_modules is missing or was installed from another
# package-lock.json (a checksum of the lock is kept in node_modules/.splash-lock).
#   tests/npm-deps.sh DIR
set -euo pipefail
dir=$1
lock="$dir/package-lock.json"
stamp="$dir/node_modules/.splash-lock"
want=$(cksum <"$lock")
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
    echo "$dir: npm is missing: run 'make test-deps' (packaging/deps.sh build test)" >&2
    exit 1
fi
why="missing"
[ -d "$dir/node_modules" ] && why="installed from another package-lock.json"
echo "$dir: node_modules $why: npm ci"
(cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
echo "$want" >"$stamp"
