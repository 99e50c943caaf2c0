#!/usr/bin/env bash
# Runs arm64 unit tests (cross-built by `make test-arm64`) under qemu-aarch64-static, the
# arm64 libraries from /usr/aarch64-linux-gnu and the multiarch dirs, every SIMD row required
# (qemu's default CPU has NEON, the dot product, i8mm and bf16), then one summary line.
#   tests/run-arm64.sh BUILD_DIR TEST...
set -u
cd "$(dirname "$0")/.."
build=$1
shift
qemu=$(command -v qemu-aarch64-static || command -v qemu-aarch64 || true)
if [ -z "$qemu" ]; then
    echo "run-arm64.sh: no qemu-aarch64-static (Debian: qemu-user-static)" >&2
    exit 1
fi
export QEMU_LD_PREFIX=/usr/aarch64-linux-gnu
export LD_LIBRARY_PATH=/usr/lib/aarch64-linux-gnu:/lib/aarch64-linux-gnu
export SPLASH_TEST_REQUIRE_ISA=1
passed=0 failed=0 failed_names=()
for t in "$@"; do
    echo "=== $t (arm64, qemu)"
    start=$(date +%s)
    if "$qemu" "$build/tests/$t"; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
        failed_names+=("$t")
    fi
    echo "    $t: $(($(date +%s) - start)) s"
done
# SPLASH_FORCE_ISA is honoured: the reported features narrow to what was asked
for isa in scalar neon dotprod; do
    got=$(SPLASH_FORCE_ISA=$isa "$qemu" "$build/splash" plugins 2>&1 | head -1)
    echo "SPLASH_FORCE_ISA=$isa: $got"
done
if [ "$failed" -gt 0 ]; then
    echo "failed (arm64): ${failed_names[*]}"
fi
echo "arm64 tests: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
