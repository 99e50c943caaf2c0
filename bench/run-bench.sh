#!/usr/bin/env bash
# Runs every bench binary given as arguments, from the repository root, and
# reports which failed. Extra arguments for the binaries go in $BENCH_ARGS.
set -u
cd "$(dirname "$0")/.."
failed=()
for b in "$@"; do
    echo "=== $(basename "$b")"
    start=$(date +%s)
    # shellcheck disable=SC2086
    if ! "$b" ${BENCH_ARGS:-}; then
        failed+=("$(basename "$b")")
    fi
    echo "--- $(basename "$b"): $(( $(date +%s) - start )) s"
done
if [ "${#failed[@]}" -gt 0 ]; then
    echo "failed: ${failed[*]}"
    exit 1
fi
