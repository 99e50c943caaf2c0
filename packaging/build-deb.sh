#!/usr/bin/env bash
# Builds a Debian package of Splash into build/deb/ (dpkg-deb, no network).
set -euo pipefail
cd "$(dirname "$0")/.."
version=$(sed -n 's/^VERSION *:= *//p' Makefile)
arch=$(dpkg --print-architecture)
root=build/deb/splash_${version}_${arch}
rm -rf "$root"
make -j2 install PREFIX=/usr DESTDIR="$PWD/$root"
install -Dm644 packaging/splash.service "$root/lib/systemd/system/splash.service"
install -Dm644 packaging/completions/splash.bash "$root/usr/share/bash-completion/completions/splash"
install -Dm644 packaging/completions/_splash "$root/usr/share/zsh/vendor-completions/_splash"
install -Dm644 packaging/completions/splash.fish "$root/usr/share/fish/vendor_completions.d/splash.fish"
mkdir -p "$root/DEBIAN"
cat > "$root/DEBIAN/control" <<CONTROL
Package: splash
Version: $version
Architecture: $arch
Maintainer: Splash developers <dev@splash.local>
Depends: libjansson4, libcurl4, libssl3, zlib1g, libpcre2-8-0, libutf8proc2, libmicrohttpd12
Section: misc
Priority: optional
Description: local LLM inference engine and API server for quantized Qwen-family models
CONTROL
dpkg-deb --root-owner-group --build "$root" >/dev/null
echo "$root.deb"
