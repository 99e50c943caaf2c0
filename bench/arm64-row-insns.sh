#!/usr/bin/env bash
# Static instruction counts of arm64 kernel rows (a perf-free estimate for the docs, as
# nothing here runs arm64 natively): for each function, its instruction count and each
# loop (a backward branch: its target to the branch) with the instructions in its body and,
# in parentheses, how many of them are integer dot products (sdot, smmla, smull, smull2).
# Reads the cross-built plugin objects (make CROSS=aarch64-linux-gnu).
#   bench/arm64-row-insns.sh [BUILD_DIR] FUNCTION...
set -eu
cd "$(dirname "$0")/.."
build=build-aarch64-linux-gnu
if [ $# -gt 0 ] && [ -d "$1" ]; then
    build=$1
    shift
fi
objdump=${OBJDUMP:-aarch64-linux-gnu-objdump}
objs=$(find "$build/pobj/formats" "$build/obj/kernels" -name '*.o' | sort)
for fn in "$@"; do
    found=0
    for o in $objs; do
        body=$("$objdump" -d --no-show-raw-insn "$o" | awk -v f="<$fn>:" '$2 == f {on = 1; next} on && /^$/ {exit} on')
        [ -n "$body" ] || continue
        found=1
        echo "$body" | awk -v fn="$fn" -v obj="$(basename "$o")" '
            function hex(s,    v, k, c) {
                v = 0
                for (k = 1; k <= length(s); k++) {
                    c = index("0123456789abcdef", substr(s, k, 1))
                    v = v * 16 + c - 1
                }
                return v
            }
            { line[NR] = $0; a = $1; sub(/:$/, "", a); pc[NR] = hex(a); n = NR }
            END {
                loops = ""
                for (i = 1; i <= n; i++) {
                    if (line[i] !~ /\t(b|b\.[a-z]+|cbz|cbnz|tbz|tbnz)\t/) continue
                    m = split(line[i], w, /[ \t]+/)
                    t = -1
                    for (k = 1; k <= m; k++) if (w[k] ~ /^[0-9a-f]+$/ && k > 2) t = hex(w[k])
                    if (t < 0 || t > pc[i]) continue
                    size = (pc[i] - t) / 4 + 1
                    dots = 0
                    for (k = 1; k <= n; k++)
                        if (pc[k] >= t && pc[k] <= pc[i] && line[k] ~ /\t(sdot|smmla|smull2?)\t/) dots++
                    loops = loops sprintf(" %d(%d)", size, dots)
                }
                printf "%-34s %-24s %4d insns; loops (dot insns):%s\n", fn, obj, n, loops
            }'
        break
    done
    [ "$found" = 1 ] || echo "$fn: not found in $build" >&2
done
