#!/usr/bin/env bash
# Installs the packages packaging/dependencies.tsv lists for the given groups (build,
# test, fuzz, arm64) with the system's package manager: apt-get (Debian, Ubuntu), dnf (Fedora),
# pacman (Arch) or brew (macOS). Says what it will install; runs nothing, and asks for no
# sudo, when every package is present; uses sudo only when not root, and without sudo
# runs itself again as root through su (root's password) when asked at a terminal. It
# needs only bash: line 1 of the README runs it before make is installed.
#   packaging/deps.sh [--check] GROUP...
# --check lists what is missing and exits 1 if anything is, installing nothing.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
list="$here/dependencies.tsv"

check=0
groups=()
for a in "$@"; do
    case "$a" in
        --check) check=1 ;;
        build|test|fuzz|arm64) groups+=("$a") ;;
        *) echo "deps.sh: unknown argument '$a' (groups: build test fuzz arm64; option: --check)" >&2
           exit 2 ;;
    esac
done
[ "${#groups[@]}" -gt 0 ] || groups=(build)

# The package manager: the first one present, in the order of the list's columns.
if command -v apt-get >/dev/null 2>&1 && command -v dpkg-query >/dev/null 2>&1; then
    manager=apt column=3
elif command -v dnf >/dev/null 2>&1; then
    manager=dnf column=4
elif command -v pacman >/dev/null 2>&1; then
    manager=pacman column=5
elif command -v brew >/dev/null 2>&1; then
    manager=brew column=6
else
    echo "deps.sh: no apt-get, dnf, pacman or brew here; install by hand the packages" \
         "$list lists for: ${groups[*]}" >&2
    exit 1
fi

installed() {
    case "$manager" in
        # one line per installed instance: a -dev package installed for the machine and
        # as :arm64 for the cross build is two
        apt) dpkg-query -W -f='${db:Status-Status}\n' "$1" 2>/dev/null | grep -qx installed ;;
        dnf) rpm -q --whatprovides "$1" >/dev/null 2>&1 ;;
        pacman) pacman -Qq "$1" >/dev/null 2>&1 ;;
        brew) [ -n "$(brew list --versions "$1" 2>/dev/null)" ] ;;
    esac
}

wanted=() wanted_group=()
satisfied=0
while IFS=$'\t' read -r group command apt dnf pacman brew; do
    case "$group" in ''|'#'*) continue ;; esac
    case " ${groups[*]} " in *" $group "*) ;; *) continue ;; esac
    cells=("$apt" "$dnf" "$pacman" "$brew")
    cell=${cells[$((column - 3))]}
    [ "$cell" = - ] && continue
    # a program from elsewhere (nodesource's node carries npm) satisfies its line
    if [ "$command" != - ] && command -v "$command" >/dev/null 2>&1; then
        satisfied=$((satisfied + 1))
        continue
    fi
    IFS=, read -r -a names <<<"$cell"
    for n in "${names[@]}"; do
        wanted+=("$n")
        wanted_group+=("$group")
    done
done <"$list"

missing=() missing_group=()
for i in ${wanted[@]+"${!wanted[@]}"}; do
    installed "${wanted[i]}" || { missing+=("${wanted[i]}"); missing_group+=("${wanted_group[i]}"); }
done

if [ "${#missing[@]}" -eq 0 ]; then
    echo "deps: all $((${#wanted[@]} + satisfied)) packages for ${groups[*]} are installed ($manager)"
    exit 0
fi
if [ "$check" -eq 1 ]; then
    echo "deps: missing for ${groups[*]} ($manager): ${missing[*]}"
    exit 1
fi

sudo=()
if [ "$manager" != brew ] && [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        sudo=(sudo)
    elif command -v su >/dev/null 2>&1 && [ -t 0 ]; then
        # a Debian installed with a root password has no sudo: this script again as
        # root, through su (it asks for root's password once)
        echo "deps: missing: ${missing[*]}; installing them needs root (no sudo here): su asks for root's password"
        exec su root -c "$(printf '%q ' "$here/deps.sh" "${groups[@]}")"
    else
        echo "deps: these packages are missing and installing them needs root (no sudo here):" \
             "${missing[*]}; run as root: su -c '$here/deps.sh ${groups[*]}'" >&2
        exit 1
    fi
fi
echo "deps: installing with $manager${sudo:+ (through sudo)}: ${missing[*]}"
case "$manager" in
    apt)
        # the :arm64 packages of the cross build need dpkg to accept that architecture
        case " ${missing[*]}" in *:arm64*)
            dpkg --print-foreign-architectures | grep -qx arm64 ||
                "${sudo[@]}" dpkg --add-architecture arm64 ;;
        esac
        "${sudo[@]}" apt-get update -qq
        # a test or fuzz package this release lacks (Ubuntu ships chromium as a snap)
        # is left out with a note, and its tests skip; a build package must exist
        available=()
        for i in "${!missing[@]}"; do
            if [ -n "$(apt-cache show --no-all-versions "${missing[i]}" 2>/dev/null)" ]; then
                available+=("${missing[i]}")
            elif [ "${missing_group[i]}" = build ]; then
                echo "deps: ${missing[i]} is not in this system's apt sources" >&2
                exit 1
            else
                echo "deps: ${missing[i]} (${missing_group[i]}) is not in this system's apt sources: left out"
            fi
        done
        [ "${#available[@]}" -eq 0 ] && exit 0
        "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
            apt-get install -y -qq --no-install-recommends "${available[@]}" ;;
    dnf) "${sudo[@]}" dnf install -y "${missing[@]}" ;;
    pacman) "${sudo[@]}" pacman -S --needed --noconfirm "${missing[@]}" ;;
    brew) brew install "${missing[@]}" ;;
esac
