#!/usr/bin/env bash
# Builds the Debian package build/deb/splash_<version>_<arch>.deb with dpkg-deb (no
# network, no root): `make install PREFIX=/usr` into a staging root, then the Debian
# places for the zsh completion, the man page and the systemd environment file, and
# Depends from the libraries the binary and plugins link (dpkg -S).
#   packaging/build-deb.sh [BUILD [OUT]]    (make deb runs it; OUT defaults to BUILD/deb)
# SPLASH_DEB_COMPRESS sets dpkg-deb's compression (default -Zxz).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
out=${2:-$build/deb}
make=${MAKE:-make}
version=$(sed -n 's/^VERSION *:= *//p' Makefile)
arch=$(dpkg --print-architecture)
name=splash_${version}_${arch}
root=$out/$name
rm -rf "$root" "$out/$name.deb"
mkdir -p "$root"
root=$(cd "$root" && pwd)

"$make" --no-print-directory -s install BUILD="$build" PREFIX=/usr DESTDIR="$root" >/dev/null

# Debian's zsh reads vendor completions here; man pages are compressed
mkdir -p "$root/usr/share/zsh/vendor-completions"
mv "$root/usr/share/zsh/site-functions/_splash" "$root/usr/share/zsh/vendor-completions/_splash"
rmdir "$root/usr/share/zsh/site-functions"
gzip -9n "$root/usr/share/man/man1/splash.1"
install -Dm644 packaging/systemd/splash.env "$root/etc/default/splash"

# Depends: the package of each library the binary, libsplash and the plugins link
# directly (their NEEDED entries; ldd tells where each resolves)
files=$(find "$root/usr/bin" "$root/usr/lib" -type f \( -name splash -o -name '*.so' \))
needed=$(for f in $files; do objdump -p "$f" | awk '$1 == "NEEDED" { print $2 }'; done | sort -u)
resolved=$(ldd $files 2>/dev/null | awk '
    $2 == "=>" && $3 ~ /^\// { print $1, $3 }
    $1 ~ /^\// { name = $1; sub(/.*\//, "", name); print name, $1 }  # the dynamic loader' | sort -u)
paths=()
for soname in $needed; do
    lib=$(awk -v s="$soname" '$1 == s { print $2; exit }' <<<"$resolved")
    case "$lib" in "$root"/*) continue ;; esac # libsplash.so, in the package
    if [ -z "$lib" ]; then
        echo "build-deb: $soname (linked by splash) does not resolve" >&2
        exit 1
    fi
    paths+=("$lib")
done
# one dpkg query for all (each reads the whole database); a merged /usr knows a
# library by either path, so ask for both
owners=$(dpkg-query -S "${paths[@]}" $(readlink -f "${paths[@]}") 2>/dev/null || true)
depends=()
for lib in "${paths[@]}"; do
    real=$(readlink -f "$lib")
    pkg=$(awk -v a="$lib" -v b="$real" '$2 == a || $2 == b { sub(/:.*/, "", $1); print $1; exit }' \
              <<<"$owners")
    if [ -z "$pkg" ]; then
        echo "build-deb: no package owns $lib (linked by splash)" >&2
        exit 1
    fi
    depends+=("$pkg")
done
depends_line=$(printf '%s\n' "${depends[@]}" | sort -u | paste -sd, | sed 's/,/, /g')

mkdir -p "$root/DEBIAN"
cat >"$root/DEBIAN/control" <<CONTROL
Package: splash
Version: $version
Architecture: $arch
Maintainer: Splash developers <dev@splash.local>
Installed-Size: $(du -sk --exclude=DEBIAN "$root" | cut -f1)
Depends: $depends_line
Section: science
Priority: optional
Description: local LLM inference engine and API server
 Splash runs quantized Qwen-family checkpoints (GGUF, MLX safetensors, NVIDIA
 Model Optimizer, compressed-tensors) on the CPU and serves them over the OpenAI
 and Anthropic APIs, with a chat page. Family and format plugins live in
 /usr/lib/splash; headers and splash-plugin.pc build new ones. The systemd unit
 splash.service (system and user) reads /etc/default/splash.
CONTROL
echo /etc/default/splash >"$root/DEBIAN/conffiles"
for script in postinst postrm; do
    cat >"$root/DEBIAN/$script" <<'SCRIPT'
#!/bin/sh
# systemd learns of the installed or removed unit; nothing is enabled or started.
set -e
if [ -d /run/systemd/system ]; then
    systemctl daemon-reload >/dev/null 2>&1 || true
fi
SCRIPT
    chmod 755 "$root/DEBIAN/$script"
done
(cd "$root" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | sort -z |
    xargs -0 md5sum) >"$root/DEBIAN/md5sums"

# SPLASH_DEB_COMPRESS: dpkg-deb's compression options (the tests build a quick gzip -1 one)
dpkg-deb --root-owner-group ${SPLASH_DEB_COMPRESS:--Zxz} --build "$root" "$out/$name.deb" >/dev/null
echo "$out/$name.deb"
