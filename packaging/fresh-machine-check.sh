#!/usr/bin/env bash
# The README's two commands, as its first code block writes them, on a fresh Debian 12: a
# debootstrap minbase chroot with git added (to clone) and nothing else (no make, no
# compiler, no sudo, no ca-certificates), as its root, from a clean clone of this
# checkout. Line 1 must install the build packages, build and serve the demo model (the
# chat page and a chat request answer); line 2 must install the test packages, Node.js and
# the npm packages, and pass `make -j2 test`. Needs root and Debian's mirror; line 2 takes
# about an hour on 2 busy cores. Not part of `make test`.
#   sudo packaging/fresh-machine-check.sh [--line1] [WORKDIR]    (default /tmp/splash-fresh)
# --line1: stop after line 1. The host's local CA certificates
# (/usr/local/share/ca-certificates, a TLS-inspecting proxy's) are trusted inside too.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
only1=0
[ "${1:-}" = --line1 ] && { only1=1; shift; }
work=${1:-/tmp/splash-fresh}
root=$work/root
mkdir -p "$work"
if [ ! -x "$root/usr/bin/git" ]; then
    command -v debootstrap >/dev/null || { echo "needs debootstrap (apt-get install debootstrap)" >&2; exit 1; }
    debootstrap --variant=minbase --include=git bookworm "$root" http://deb.debian.org/debian
fi
for c in make cc sudo; do
    if chroot "$root" sh -c "command -v $c" >/dev/null; then
        echo "$root is not fresh: it has $c (remove $root to start over)" >&2
        exit 1
    fi
done

# the README's first code block: line 1 and line 2
mapfile -t lines < <(sed -n '/^```sh$/,/^```$/{/^```/!p;/^```$/q}' "$repo/README.md")
[ "${#lines[@]}" -eq 2 ] || { echo "README.md's first code block is not two lines" >&2; exit 1; }

# the clean clone
rm -rf "$work/src"
git clone -q "$repo" "$work/src"

mounts=()
cleanup() {
    for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do umount -R "${mounts[i]}" 2>/dev/null || true; done
}
trap cleanup EXIT
bind() { # bind SRC DEST [ro]
    mkdir -p "$2"
    mount --rbind "$1" "$2"
    mount --make-rslave "$2"
    mounts+=("$2")
    [ "${3:-}" = ro ] && mount -o remount,bind,ro "$2"
    return 0
}
mount -t proc proc "$root/proc" && mounts+=("$root/proc")
bind /sys "$root/sys"
bind /dev "$root/dev"
bind "$work/src" "$root/src" ro
# tests read the reference data at ../shared from the checkout
[ -d "$repo/../shared" ] && bind "$(cd "$repo/../shared" && pwd)" "$root/work/shared" ro
cp /etc/resolv.conf "$root/etc/resolv.conf"
extra_ca=
if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
    mkdir -p "$root/usr/local/share/ca-certificates"
    cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
    extra_ca=/etc/ssl/certs/ca-certificates.crt # built once ca-certificates is installed
fi
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

cat >"$root/root/fresh-check.sh" <<'INNER'
set -euo pipefail
rm -rf /work/splash
git clone -q /src /work/splash
cd /work/splash
# README line 1 (SPLASH_PORT keeps it off a port in use on the host)
echo "line 1: $LINE1"
set -m # the line in its own process group, to stop the server it leaves running
bash -c "$LINE1" >/tmp/line1.log 2>&1 &
serve=$!
set +m
until [ -x build/splash ] && build/splash wait-ready --timeout 0 2>/dev/null; do
    kill -0 "$serve" 2>/dev/null || { tail -30 /tmp/line1.log; echo "line 1 FAILED"; exit 1; }
    sleep 2
done
ask() { # ask METHOD PATH [BODY]: the answer, head and body
    exec 3<>"/dev/tcp/127.0.0.1/$SPLASH_PORT"
    printf '%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s' \
        "$1" "$2" "${#3}" "$3" >&3
    cat <&3
    exec 3<&-
}
page=$(ask GET / "")
answer=$(ask POST /v1/chat/completions \
    '{"messages":[{"role":"user","content":"Once upon a time"}],"max_tokens":16}')
kill -TERM -- "-$serve" 2>/dev/null || true
wait "$serve" || true
grep -q '<title>Splash</title>' <<<"$page" || { head -5 <<<"$page"; echo "line 1 FAILED: no chat page"; exit 1; }
grep -q '"chat.completion"' <<<"$answer" || { echo "$answer"; echo "line 1 FAILED: no answer"; exit 1; }
echo "line 1 ok: the chat page, and $(grep -o '"content":"[^"]*"' <<<"$answer" | head -1)"
[ "$ONLY1" = 1 ] && exit 0
echo "line 2: $LINE2"
bash -c "$LINE2"
echo "line 2 ok"
INNER
chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root TERM=dumb SPLASH_PORT="$port" \
    LINE1="${lines[0]}" LINE2="${lines[1]}" ONLY1="$only1" ${extra_ca:+NODE_EXTRA_CA_CERTS=$extra_ca} \
    bash /root/fresh-check.sh
