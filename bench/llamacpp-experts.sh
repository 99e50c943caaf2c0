#!/usr/bin/env bash
# Streamed experts against llama.cpp's mmap at the same memory (issue 18). Both engines
# decode the same MoE GGUF inside one memory cgroup whose limit holds the weights other
# than the routed experts, a share of the routed experts and a fixed allowance; the
# model file's pages are dropped from the page cache before each run (dd iflag=nocache,
# posix_fadvise DONTNEED), so the file's cached pages llama.cpp's mmap reads through are
# charged to the group and reclaimed at its limit. Runs are interleaved: llama.cpp then
# Splash at each limit, -r rounds.
#
# llama.cpp: llama-bench -p 0 -n N -t THREADS -r 1 (default mmap; its own warm-up run).
# Splash: splash serve with --expert-memory auto (or -e SIZE) in the group, speculation
# off, a warm-up request, then two requests on distinct prompts of 1 and N+1 tokens:
# decode tok/s = N / (time of the second - time of the first). The random bench nets
# write tokens with no text, so a stream carries no per-token events to time; the end
# tokens get logit_bias -100 so every request decodes all it asks for.
#
# It never downloads or builds llama.cpp: build it yourself (CPU, Release), e.g.
#   cmake -B build -DGGML_NATIVE=ON -DLLAMA_CURL=OFF -DCMAKE_BUILD_TYPE=Release
#   cmake --build build -j2 --target llama-bench
# and pass that build directory. Needs root (it makes memory cgroups as children of its
# own: cgroup v2 memory.max or v1 memory.limit_in_bytes) and a built Splash (make).
#
# usage: bench/llamacpp-experts.sh LLAMA_BUILD_DIR [-m MODEL.gguf] [-n TOKENS]
#        [-r ROUNDS] [-s "SHARE..."] [-t THREADS] [-a ALLOWANCE_MIB] [-e auto|SIZE]
#   MODEL: build/bench-models/qwen35moe-35b-a3b-4l-Q4_K_M.gguf (make bench builds it)
#   TOKENS 128, ROUNDS 1, SHARES "100 75 50" (percent of the routed experts; 100 is no
#   limit at all), THREADS 2, ALLOWANCE 1280 MiB (Splash's plan keeps 1 GiB free, the
#   rest is the processes, KV and state).
set -u
cd "$(dirname "$0")/.." || exit 1

die() { echo "llamacpp-experts: $*" >&2; exit 1; }

[ $# -ge 1 ] || die "usage: $0 LLAMA_BUILD_DIR [-m MODEL.gguf] [-n TOKENS] [-r ROUNDS] [-s \"SHARE...\"] [-t THREADS] [-a ALLOWANCE_MIB] [-e auto|SIZE]"
llama_build=$1
shift
model=build/bench-models/qwen35moe-35b-a3b-4l-Q4_K_M.gguf
n=128 rounds=1 shares="100 75 50" threads=2 allowance_mib=1280 expert_memory=auto
while [ $# -gt 0 ]; do
    [ $# -ge 2 ] || die "$1 needs a value"
    case $1 in
    -m) model=$2 ;;
    -n) n=$2 ;;
    -r) rounds=$2 ;;
    -s) shares=$2 ;;
    -t) threads=$2 ;;
    -a) allowance_mib=$2 ;;
    -e) expert_memory=$2 ;;
    *) die "unknown option $1" ;;
    esac
    shift 2
done
for v in "$n" "$rounds" "$threads" "$allowance_mib"; do
    [[ $v =~ ^[1-9][0-9]*$ ]] || die "'$v' is not a positive integer"
done
for s in $shares; do
    if ! [[ $s =~ ^[1-9][0-9]*$ ]] || [ "$s" -gt 100 ]; then
        die "share '$s' is not a percentage from 1 to 100"
    fi
done

llama_bench=$llama_build/bin/llama-bench
splash=build/splash
[ -x "$llama_bench" ] || die "$llama_bench: not found or not executable (build llama-bench in $llama_build)"
[ -x "$splash" ] || die "$splash: not found (run make)"
[ -f "$model" ] || die "$model: no such model (make bench, or build/bench/bench-experts, writes it)"
[ "$(id -u)" = 0 ] || die "memory cgroups need root"

# The memory controller's hierarchy: a child of this shell's own group.
if v2=$(grep '^0::/' /proc/self/cgroup) && grep -qw memory /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
    own=/sys/fs/cgroup${v2#0::}
    limit_file=memory.max peak_file=memory.peak
elif v1=$(grep -E '^[0-9]+:([^:]*,)?memory(,[^:]*)?:' /proc/self/cgroup) &&
    [ -f /sys/fs/cgroup/memory/memory.limit_in_bytes ]; then
    own=/sys/fs/cgroup/memory${v1#*:*:}
    limit_file=memory.limit_in_bytes peak_file=memory.max_usage_in_bytes
else
    die "no memory cgroup: neither cgroup v2 with the memory controller nor v1's memory hierarchy"
fi

work=$(mktemp -d /tmp/llamacpp-experts.XXXXXX)
group=""
server_pid=""
cleanup() {
    [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
    [ -n "$group" ] && remove_group
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

make_group() { # $1: limit in bytes, or "" for none
    group=$own/llamacpp-experts-$$-$RANDOM
    mkdir "$group" || die "cannot make $group"
    [ -f "$group/$limit_file" ] || die "$group has no $limit_file: the memory controller is not enabled for $own's children"
    [ -z "$1" ] || echo "$1" >"$group/$limit_file" || die "cannot set $group/$limit_file to $1"
}

# A group empties a moment after its last process exits; any left after 10 s (a server
# slow to stop) are this script's own and are killed.
remove_group() {
    for i in $(seq 150); do
        rmdir "$group" 2>/dev/null && break
        [ "$i" = 100 ] && xargs -r kill -9 <"$group/cgroup.procs" 2>/dev/null
        sleep 0.1
    done
    [ -d "$group" ] && echo "llamacpp-experts: could not remove $group" >&2
    group=""
}

peak_mib() { echo $(($(cat "$group/$peak_file") / 1048576)); }

drop_cache() { dd if="$model" iflag=nocache count=0 status=none; }

# Runs "$@" in the group: a shell enters it, then execs the program.
in_group() { exec sh -c 'echo $$ > "$0/cgroup.procs" && exec "$@"' "$group" "$@"; }

run_llama() { # prints "tok/s peak_mib"
    drop_cache
    local out
    out=$(in_group nice -n "${NICE:-10}" "$llama_bench" -m "$model" -p 0 -n "$n" -t "$threads" \
        -r 1 -o json 2>"$work/llama.err") || { echo "failed: $(tail -1 "$work/llama.err")"; return; }
    local ts
    ts=$(printf '%s' "$out" | grep -o '"avg_ts": *[0-9.e+-]*' | head -1 | sed 's/.*: *//')
    [ -n "$ts" ] || { echo "failed: no avg_ts in llama-bench's output"; return; }
    printf '%.2f %s' "$ts" "$(peak_mib)"
}

free_port() {
    local p
    for _ in $(seq 50); do
        p=$((20000 + RANDOM % 20000))
        (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return; }
    done
    die "no free port"
}

# One completion's wall time in seconds; checks it decoded every token asked for.
request() { # $1 port, $2 prompt, $3 max_tokens
    local body out
    body=$(printf '{"model":"test/bench","prompt":"%s","max_tokens":%d,"temperature":0,"logit_bias":%s}' \
        "$2" "$3" "$bias")
    out=$(curl -s -w '\n%{time_total}' "http://127.0.0.1:$1/v1/completions" \
        -H 'content-type: application/json' -d "$body") || return 1
    printf '%s' "$out" | head -1 | grep -q "\"completion_tokens\":$3[,}]" || {
        echo "llamacpp-experts: a request for $3 tokens: $(printf '%s' "$out" | head -1 | cut -c1-300)" >&2
        return 1
    }
    printf '%s' "$out" | tail -1
}

run_splash() { # prints "tok/s peak_mib store"
    drop_cache
    local port log
    port=$(free_port)
    log=$work/serve.log
    in_group env XDG_DATA_HOME="$work/data" XDG_CACHE_HOME="$work/cache" nice -n "${NICE:-10}" \
        "$splash" serve --model test/bench --model-dir "$model" --port "$port" --threads "$threads" \
        --max-context 2K --max-cache-disk 0 --speculative off --expert-memory "$expert_memory" \
        >"$log" 2>&1 &
    server_pid=$!
    for _ in $(seq 1200); do
        grep -q 'Serving ·' "$log" && break
        kill -0 "$server_pid" 2>/dev/null || break
        sleep 0.5
    done
    local ts=""
    if grep -q 'Serving ·' "$log"; then
        local t1 t2
        if request "$port" "The little dog" 1 >/dev/null &&
            t1=$(request "$port" "Once upon a time" 1) &&
            t2=$(request "$port" "Hello there friend" $((n + 1))); then
            ts=$(awk -v n="$n" -v a="$t1" -v b="$t2" 'BEGIN { printf "%.2f", n / (b - a) }')
        fi
    fi
    local status store
    status=$(curl -s "http://127.0.0.1:$port/status")
    store=$(printf '%s' "$status" | grep -o '"cap_bytes":[0-9]*' | head -1 | grep -o '[0-9]*$')
    if [ -n "$store" ]; then
        store="store $((store / 1048576)) MiB"
    else
        store="all experts loaded"
    fi
    if [ -z "$ts" ]; then
        echo "llamacpp-experts: splash serve: $(grep -v '^Loading' "$log" | tail -3)" >&2
        ts=failed
    fi
    kill "$server_pid" 2>/dev/null
    wait "$server_pid" 2>/dev/null
    server_pid=""
    printf '%s %s %s' "$ts" "$(peak_mib)" "${store:-?}"
}

# The end tokens: the model's own (tokenizer.ggml.eos_token_id and friends), by name.
file_bytes=$(stat -c %s "$model")
drop_cache
make_group ""
probe_port=$(free_port)
in_group env XDG_DATA_HOME="$work/data" XDG_CACHE_HOME="$work/cache" "$splash" serve \
    --model test/bench --model-dir "$model" --port "$probe_port" --threads "$threads" \
    --max-context 2K --max-cache-disk 0 --expert-memory off >"$work/probe.log" 2>&1 &
server_pid=$!
for _ in $(seq 1200); do
    grep -q 'Serving ·' "$work/probe.log" && break
    kill -0 "$server_pid" 2>/dev/null || die "splash serve: $(tail -3 "$work/probe.log")"
    sleep 0.5
done
routed_mib=$(grep -o 'Experts · [0-9.]* MiB of routed experts' "$work/probe.log" | grep -o '[0-9.]*' | head -1)
[ -n "$routed_mib" ] || die "$model: splash serve reports no routed experts (not a MoE?): $(grep Experts "$work/probe.log")"
ends=$(curl -s "http://127.0.0.1:$probe_port/tokenize" -d '{"content":"<|im_end|><|endoftext|>"}' |
    grep -o '"tokens":\[[0-9,]*\]' | grep -o '[0-9][0-9]*')
bias="{$(for t in $ends; do printf '"%s":-100,' "$t"; done | sed 's/,$//')}"
kill "$server_pid"
wait "$server_pid" 2>/dev/null
server_pid=""
remove_group

routed=$(awk -v m="$routed_mib" 'BEGIN { printf "%.0f", m * 1048576 }')
echo "model $model: $((file_bytes / 1048576)) MiB, $routed_mib MiB of routed experts"
echo "decode $n tokens, $threads threads, allowance $allowance_mib MiB, Splash --expert-memory $expert_memory, load $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-10s %-9s %-22s %-60s\n' limit engine "decode tok/s" "peak MiB, store"
for r in $(seq "$rounds"); do
    for s in $shares; do
        if [ "$s" = 100 ]; then
            limit="" label="none"
        else
            limit=$(awk -v a="$allowance_mib" -v f="$file_bytes" -v r="$routed" -v s="$s" \
                'BEGIN { printf "%.0f", a * 1048576 + f - r * (100 - s) / 100 }')
            label="$((limit / 1048576))M($s%)"
        fi
        make_group "$limit"
        read -r lts lpeak <<<"$(run_llama)"
        remove_group
        printf '%-10s %-9s %-22s %s MiB   (round %d, load %s)\n' "$label" llama.cpp "$lts" "$lpeak" \
            "$r" "$(cut -d' ' -f1 /proc/loadavg)"
        make_group "$limit"
        read -r sts speak sstore <<<"$(run_splash)"
        remove_group
        printf '%-10s %-9s %-22s %s MiB, %s   (round %d, load %s)\n' "$label" splash "$sts" "$speak" \
            "$sstore" "$r" "$(cut -d' ' -f1 /proc/loadavg)"
    done
done
