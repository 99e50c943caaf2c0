#!/usr/bin/env bash
# Runs every test binary (and, for a directory argument, its node:test suite)
# from the repository root, then prints one summary line.
set -u
cd "$(dirname "$0")/.."
passed=0 failed=0 skipped=0 failed_names=()
for t in "$@"; do
    name=$(basename "$t")
    case "$t" in *.sh) name=$(basename "$(dirname "$t")") ;; esac
    echo "=== $name"
    if [ -d "$t" ]; then
        # a node new enough for the packages' engines first on PATH (fetched when the
        # system's is older: Debian 12's is 18), for npm and the tests alike
        if ! nodebin=$(tests/node-for-tests.sh "$t/package-lock.json"); then
            failed=$((failed + 1))
            failed_names+=("$name")
            continue
        fi
        export PATH="$nodebin:$PATH"
        if ! tests/npm-deps.sh "$t"; then
            failed=$((failed + 1))
            failed_names+=("$name")
            continue
        fi
        # the files, not the directory: node 22 takes --test arguments as patterns only
        cmd=(node --test --test-concurrency=1 "$t"/*.test.mjs)
    else
        cmd=("$t")
    fi
    "${cmd[@]}"
    rc=$?
    if [ "$rc" -eq 0 ]; then
        passed=$((passed + 1))
    elif [ "$rc" -eq 77 ]; then
        skipped=$((skipped + 1)) # the test said why
    else
        failed=$((failed + 1))
        failed_names+=("$name")
    fi
done
if [ "$failed" -gt 0 ]; then
    echo "failed: ${failed_names[*]}"
fi
echo "tests: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
