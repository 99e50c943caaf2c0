#!/usr/bin/env bash
# Runs every test binary from the repository root and prints one summary line.
set -u
cd "$(dirname "$0")/.."
passed=0 failed=0 failed_names=()
for t in "$@"; do
    echo "=== $(basename "$t")"
    if "$t"; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
        failed_names+=("$(basename "$t")")
    fi
done
if [ "$failed" -gt 0 ]; then
    echo "failed: ${failed_names[*]}"
fi
echo "tests: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
