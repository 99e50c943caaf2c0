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
echo "$dir: node_modules $why: npm ci (from package-lock.json)"
# The lock lists every optional platform package opencode-ai names; those the registry
# this runs against does not serve (other systems' binaries) carry their os, cpu and libc
# but no integrity, and npm skips them here by platform.
(cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
echo "$want" >"$stamp"
