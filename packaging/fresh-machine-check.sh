#!/usr/bin/env bash
# The README's two commands on a fresh Debian 12 (a debootstrap chroot with only git and
# make, and sudo for its one user), from a clean clone of this checkout: line 1 must
# install the build packages, build and serve the demo model (a chat request answers),
# line 2 must install the test packages and pass `make -j2 test`. Needs root and
# Debian's mirror; takes about an hour on 2 busy cores. Not part of `make test`.
#   sudo packaging/fresh-machine-check.sh [WORKDIR]    (default /tmp/splash-fresh)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
work=${1:-/tmp/splash-fresh}
root=$work/root
mkdir -p "$work"
if [ ! -x "$root/usr/bin/git" ]; then
    command -v debootstrap >/dev/null || { echo "needs debootstrap (apt-get install debootstrap)" >&2; exit 1; }
    debootstrap --variant=minbase --include=git,make bookworm "$root" http://deb.debian.org/debian
fi

# the clean clone, owned by the chroot's user (uid 1000)
rm -rf "$work/src"
git clone -q "$repo" "$work/src"
chown -R 1000:1000 "$work/src"

mounts=()
cleanup() {
    for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do umount -R "${mounts[i]}" 2>/dev/null || true; done
}
trap cleanup EXIT
bind() { # bind SRC DEST [ro]
    mkdir -p "$2"
    mount --rbind "$1" "$2"
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
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

cat >"$root/root/fresh-check.sh" <<'INNER'
set -euo pipefail
apt-get install -y -qq --no-install-recommends sudo >/dev/null
id fresh >/dev/null 2>&1 || useradd -m -u 1000 -s /bin/bash fresh
echo 'fresh ALL=(ALL) NOPASSWD: ALL' >/etc/sudoers.d/fresh
mkdir -p /work && chown fresh /work && rm -rf /work/splash
su - fresh -c 'git clone -q /src /work/splash'
su - fresh -c "SPLASH_PORT=$PORT bash -s" <<'USER'
set -euo pipefail
cd /work/splash
# README line 1 (SPLASH_PORT keeps it off a port in use on the host)
(make deps && make -j2 && exec build/splash serve --demo) >/tmp/line1.log 2>&1 &
serve=$!
until [ -x build/splash ] && build/splash wait-ready --timeout 0 2>/dev/null; do
    kill -0 "$serve" 2>/dev/null || { tail -30 /tmp/line1.log; echo "line 1 FAILED"; exit 1; }
    sleep 2
done
exec 3<>"/dev/tcp/127.0.0.1/$SPLASH_PORT"
body='{"messages":[{"role":"user","content":"Once upon a time"}],"max_tokens":16}'
printf 'POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s' \
    "${#body}" "$body" >&3
answer=$(cat <&3)
exec 3<&-
kill "$serve"
wait "$serve" || true
grep -q '"chat.completion"' <<<"$answer" || { echo "$answer"; echo "line 1 FAILED: no answer"; exit 1; }
echo "line 1 ok: $(grep -o '"content":"[^"]*"' <<<"$answer" | head -1)"
# README line 2
make test-deps && make -j2 test
echo "line 2 ok"
USER
INNER
chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root PORT="$port" \
    bash /root/fresh-check.sh
