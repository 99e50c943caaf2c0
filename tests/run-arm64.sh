#!/usr/bin/env bash
# Runs arm64 unit tests (cross-built by `make test-arm64`) under qemu-aarch64-static, the
# multiarch arm64 libraries (libc6:arm64 and the -dev:arm64 packages), then one summary line:
#  - each TEST on qemu's default CPU (max: NEON, the dot product, i8mm, bf16), every SIMD
#    row required (SPLASH_TEST_REQUIRE_ISA=1);
#  - the format tests on a Neoverse N1 (dot product, no i8mm) and a Cortex-A53 (Armv8.0
#    only), where the rows the CPU lacks are skipped: a row picked without its HWCAP bit
#    dies of SIGILL, and test_kquants_neon_dispatch_follows_hwcaps checks the pick;
#  - `test-qwen-hybrid hot-formats` (golden logits token by token on the Q4_K_M, Q8_0,
#    MXFP4 and IQ4_XS tiny models, the stories model's greedy text) with the NEON rows and
#    again with SPLASH_FORCE_ISA=scalar: the two greedy texts must be identical.
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
# The multiarch libc6:arm64 (the -dev:arm64 packages bring it): with the cross toolchain's
# copy in /usr/aarch64-linux-gnu, pthread_create never returns under Debian 12's qemu 7.2.
export QEMU_LD_PREFIX=/
export LD_LIBRARY_PATH=/usr/lib/aarch64-linux-gnu:/lib/aarch64-linux-gnu
export SPLASH_TEST_REQUIRE_ISA=1
passed=0 failed=0 failed_names=()
# run LABEL COMMAND...: one counted run, its time
run() {
    local label=$1 start
    shift
    echo "=== $label (arm64, qemu)"
    start=$(date +%s)
    if "$@"; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
        failed_names+=("$label")
    fi
    echo "    $label: $(($(date +%s) - start)) s"
}
for t in "$@"; do
    run "$t" "$qemu" "$build/tests/$t"
done
for cpu in neoverse-n1 cortex-a53; do
    for t in test-format-kquants test-format-fp4; do
        run "$t on $cpu" env SPLASH_TEST_REQUIRE_ISA=0 "$qemu" -cpu "$cpu" "$build/tests/$t"
    done
done
# the golden subset with the NEON rows, then the scalar ones; each run's greedy tokens
hot_neon=$(mktemp) hot_scalar=$(mktemp)
trap 'rm -f "$hot_neon" "$hot_scalar"' EXIT
run "test-qwen-hybrid hot-formats" \
    bash -o pipefail -c '"$0" "$1" hot-formats | tee "$2"' "$qemu" "$build/tests/test-qwen-hybrid" "$hot_neon"
run "test-qwen-hybrid hot-formats, SPLASH_FORCE_ISA=scalar" \
    bash -o pipefail -c 'SPLASH_FORCE_ISA=scalar "$0" "$1" hot-formats | tee "$2"' \
    "$qemu" "$build/tests/test-qwen-hybrid" "$hot_scalar"
neon_text=$(grep 'stories greedy' "$hot_neon")
scalar_text=$(grep 'stories greedy' "$hot_scalar")
if [ -n "$neon_text" ] && [ "$neon_text" = "$scalar_text" ]; then
    echo "stories greedy text: NEON and scalar identical"
    passed=$((passed + 1))
else
    echo "stories greedy text differs (or is missing): NEON"
    echo "$neon_text"
    echo "scalar:"
    echo "$scalar_text"
    failed=$((failed + 1))
    failed_names+=("greedy NEON vs scalar")
fi
# SPLASH_FORCE_ISA is honoured: the reported features narrow to what was asked
for isa in scalar neon dotprod; do
    got=$(SPLASH_FORCE_ISA=$isa "$qemu" "$build/splash" plugins 2>&1 | head -1)
    echo "SPLASH_FORCE_ISA=$isa: $got"
done
for cpu in max neoverse-n1 cortex-a53; do
    echo "qemu -cpu $cpu: $("$qemu" -cpu "$cpu" "$build/splash" plugins 2>&1 | head -1)"
done
if [ "$failed" -gt 0 ]; then
    echo "failed (arm64): ${failed_names[*]}"
fi
echo "arm64 tests: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
