#!/usr/bin/env bash
# Prints the directory of a Node.js new enough for the npm packages LOCK pins (the highest
# ">=" bound of their engines: Claude Code 2.1 wants 22, playwright-core 20), to put first
# on PATH for npm and the node tests. Debian 12's stock nodejs is 18: when the node on
# PATH is older, the matching release of the registry's node-<os>-<arch> package (the
# official binary) is fetched once with `npm pack` into a cache directory,
# $SPLASH_NODE_CACHE or ~/.cache/splash/node.
#   tests/node-for-tests.sh LOCK
set -euo pipefail
lock=$1
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    echo "node or npm is missing: run 'make test-deps' (packaging/deps.sh build test)" >&2
    exit 1
fi
# the highest lower bound, as MAJOR.MINOR.PATCH (node 18 runs this)
want=$(node -e '
const lock = require(require("path").resolve(process.argv[1]));
let best = [0, 0, 0];
for (const p of Object.values(lock.packages || {})) {
  const e = p.engines && p.engines.node;
  if (typeof e !== "string" || e.includes("||")) continue;
  const m = /^>=\s*v?(\d+)(?:\.(\d+))?(?:\.(\d+))?/.exec(e.trim());
  if (!m) continue;
  const v = [+m[1], +(m[2] || 0), +(m[3] || 0)];
  for (let i = 0; i < 3 && v[i] >= best[i]; i++)
    if (v[i] > best[i]) { best = v; break; }
}
console.log(best.join("."));' "$lock")

# 0 when version $1 (v22.3.1 or 22.3.1) is at least $want
new_enough() {
    local have=${1#v} i
    local -a h w
    IFS=. read -r -a h <<<"$have"
    IFS=. read -r -a w <<<"$want"
    for i in 0 1 2; do
        [[ ${h[i]:-0} =~ ^[0-9]+$ ]] || return 1
        ((${h[i]:-0} > ${w[i]})) && return 0
        ((${h[i]:-0} < ${w[i]})) && return 1
    done
    return 0
}

have=$(node --version)
if new_enough "$have"; then
    dirname "$(command -v node)"
    exit 0
fi

case "$(uname -s)" in
Linux) os=linux ;;
Darwin) os=darwin ;;
*) echo "node $have is older than $want and no node package is known for $(uname -s)" >&2; exit 1 ;;
esac
case "$(uname -m)" in
x86_64 | amd64) arch=x64 ;;
aarch64 | arm64) arch=arm64 ;;
*) echo "node $have is older than $want and no node package is known for $(uname -m)" >&2; exit 1 ;;
esac
major=${want%%.*}
cache=${SPLASH_NODE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/splash/node}
dir="$cache/node-$os-$arch-$major"
if [ -x "$dir/bin/node" ] && new_enough "$("$dir/bin/node" --version 2>/dev/null || echo 0)"; then
    echo "$dir/bin"
    exit 0
fi
echo "node $have is older than $want (the test clients' engines): fetching node-$os-$arch@$major" \
     "from the npm registry into $dir" >&2
mkdir -p "$cache"
tmp=$(mktemp -d "$cache/.fetch.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
if ! tgz=$(cd "$tmp" && npm pack --silent "node-$os-$arch@$major" | tail -n 1) || [ ! -f "$tmp/$tgz" ]; then
    echo "npm pack node-$os-$arch@$major failed: install Node.js $want or newer" >&2
    exit 1
fi
tar -xzf "$tmp/$tgz" -C "$tmp"
got=$("$tmp/package/bin/node" --version 2>/dev/null || echo "none")
if ! new_enough "$got"; then
    echo "node-$os-$arch@$major gave node $got, not $want or newer" >&2
    exit 1
fi
rm -rf "$dir"
mv "$tmp/package" "$dir"
echo "$dir/bin"
