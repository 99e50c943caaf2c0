#!/usr/bin/env bash
# Installs DIR's npm packages as its package-lock.json pins them when its node_modules is missing or was installed from another
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
echo "$dir: node_modules $why: npm install (from package-lock.json)"
# Not `npm ci`: opencode-ai names an optional binary package per platform and the
# registry this runs against serves only some of them, so the lock cannot list them all
# and `npm ci` refuses it; `npm install` takes the locked versions and skips the absent
# optional ones (it leaves the lock as it is).
(cd "$dir" && npm install --no-audit --no-fund --loglevel=error)
echo "$want" >"$stamp"
