#!/usr/bin/env bash
# The packages and what they install: the .deb builds, and unpacked (dpkg -x) its splash
# runs and loads plugins from its own /usr/lib/splash only; world-writable plugin places
# are refused; the systemd units pass systemd-analyze verify; the completions load and
# complete in bash and fish; the man page renders; make deps installs only what is
# missing, through sudo only when not root. Run by `make test` (SPLASH_BUILD = build dir).
set -uo pipefail
cd "$(dirname "$0")/../.."
build=${SPLASH_BUILD:-$PWD/build}
failures=0
ok() { echo "ok - $*"; }
fail() {
    echo "FAIL - $*"
    failures=$((failures + 1))
}
check() { # check DESCRIPTION COMMAND...: passes when the command succeeds
    local what=$1
    shift
    if "$@"; then ok "$what"; else fail "$what"; fi
}

if [ ! -x "$build/splash" ]; then
    echo "packaging: $build/splash is not built (make)" >&2
    exit 1
fi
tmp=$(mktemp -d)
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
version=$(sed -n 's/^VERSION *:= *//p' Makefile)
n_plugins=$(find "$build/lib/splash" -name 'libsplash-*.so' | wc -l)

# ---- the build tree's binary reads the build tree -------------------------------
out=$(env -u SPLASH_PLUGIN_PATH "$build/splash" plugins)
check "build/splash loads the build tree's $n_plugins plugins" \
    test "$(grep -c "  $build/lib/splash/libsplash-" <<<"$out")" -eq "$n_plugins"

# ---- the .deb --------------------------------------------------------------------
if ! command -v dpkg-deb >/dev/null 2>&1; then
    echo "packaging: SKIP the .deb checks: no dpkg-deb on this system"
else
    # the release's xz takes half a minute on a busy machine; gzip -1 makes the same files
    deb=$(SPLASH_DEB_COMPRESS="-Zgzip -z1" packaging/build-deb.sh "$(realpath --relative-to=. "$build")" "$tmp/deb" \
        2>"$tmp/deb.err")
    if [ ! -f "$deb" ]; then
        fail "make deb: $(cat "$tmp/deb.err")"
    else
        ok "the .deb builds: $deb ($(du -h "$deb" | cut -f1))"
        dpkg-deb -c "$deb" | awk '{ print $6 }' | sed 's|^\./|/|' >"$tmp/contents"
        for f in /usr/bin/splash /usr/lib/libsplash.so /usr/include/splash/plugin.h \
            /usr/lib/pkgconfig/splash-plugin.pc /usr/share/man/man1/splash.1.gz \
            /usr/share/bash-completion/completions/splash /usr/share/zsh/vendor-completions/_splash \
            /usr/share/fish/vendor_completions.d/splash.fish /usr/lib/systemd/system/splash.service \
            /usr/lib/systemd/user/splash.service /etc/default/splash; do
            check "the .deb holds $f" grep -qx "$f" "$tmp/contents"
        done
        check "the .deb holds $n_plugins plugins in /usr/lib/splash" \
            test "$(grep -c '^/usr/lib/splash/libsplash-.*\.so$' "$tmp/contents")" -eq "$n_plugins"
        depends=$(dpkg-deb -f "$deb" Depends)
        check "its Depends names the libraries it links ($depends)" \
            grep -q 'libjansson4.*libmicrohttpd12\|libmicrohttpd12.*libjansson4' <<<"$depends"

        root=$tmp/root
        dpkg-deb -x "$deb" "$root"
        check "the unpacked splash --version says $version" \
            test "$(env -u SPLASH_PLUGIN_PATH "$root/usr/bin/splash" --version)" = "splash $version"
        out=$(env -u SPLASH_PLUGIN_PATH "$root/usr/bin/splash" plugins 2>&1)
        loaded=$(grep -E '^  [a-z0-9_-]+ +(format|family|draft) ' <<<"$out" | awk '{ print $NF }')
        check "the unpacked splash loads its $n_plugins plugins" \
            test "$(grep -c . <<<"$loaded")" -eq "$n_plugins"
        check "... from its own /usr/lib/splash only, never the build tree" \
            test -z "$(grep -v "^$root/usr/lib/splash/" <<<"$loaded")"

        # a world-writable place is never loaded from
        mkdir -m 755 "$tmp/open" "$tmp/fine"
        one=$(ls "$build"/lib/splash/libsplash-*.so | head -1)
        cp "$one" "$tmp/open/libsplash-format-zz-open.so"
        chmod 777 "$tmp/open"
        cp "$one" "$tmp/fine/libsplash-format-zz-fine.so"
        chmod 666 "$tmp/fine/libsplash-format-zz-fine.so"
        out=$(SPLASH_PLUGIN_PATH="$tmp/open:$tmp/fine" "$root/usr/bin/splash" plugins 2>/dev/null)
        check "a world-writable plugin directory is refused" \
            grep -q "^  $tmp/open: directory is world-writable" <<<"$out"
        check "a world-writable plugin file is refused" \
            grep -q "^  $tmp/fine/libsplash-format-zz-fine.so: file is world-writable" <<<"$out"
        check "... and nothing from either loads" \
            test -z "$(grep -E "^  [a-z0-9_-]+ +(format|family) .* $tmp/(open|fine)/" <<<"$out")"

        # --plugin-dir reaches the engine serve starts: the unpacked splash with its plugins
        # moved elsewhere serves the demo model from them
        mv "$root/usr/lib/splash" "$tmp/moved-plugins"
        port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
        env -u SPLASH_PLUGIN_PATH XDG_DATA_HOME="$tmp/serve-data" "$root/usr/bin/splash" serve --demo \
            --threads 1 --port "$port" --plugin-dir "$tmp/moved-plugins" >"$tmp/serve.log" 2>&1 &
        serve_pid=$!
        if "$root/usr/bin/splash" wait-ready --port "$port" --timeout 60 2>>"$tmp/serve.log"; then
            ok "serve --plugin-dir: the engine loads the model with those plugins"
        else
            fail "serve --plugin-dir: the engine did not become ready: $(tail -3 "$tmp/serve.log")"
        fi
        kill "$serve_pid" 2>/dev/null
        wait "$serve_pid" 2>/dev/null
        mv "$tmp/moved-plugins" "$root/usr/lib/splash"

        # the man page: every command has its section, and it renders without warnings
        zcat "$root/usr/share/man/man1/splash.1.gz" >"$tmp/splash.1"
        n_commands=$("$build/splash" --list-commands | grep -c .)
        check "the man page has a section for each of the $n_commands commands" \
            test "$(grep -c '^\.SS "splash ' "$tmp/splash.1")" -eq "$n_commands"
        if command -v groff >/dev/null 2>&1; then
            groff -man -Tutf8 -ww -z "$tmp/splash.1" 2>"$tmp/groff.err"
            check "the man page renders without warnings$(sed 's/^/: /' "$tmp/groff.err" | head -3)" \
                test ! -s "$tmp/groff.err"
        fi

        # the systemd units as installed, but naming the unpacked binary: verify checks
        # that ExecStart's program exists; it exits 0 on warnings, so any output fails
        if command -v systemd-analyze >/dev/null 2>&1; then
            mkdir -p "$tmp/units/system" "$tmp/units/user" "$tmp/runtime"
            chmod 700 "$tmp/runtime"
            for scope in system user; do
                sed "s|/usr/bin/splash|$root/usr/bin/splash|g" \
                    "$root/usr/lib/systemd/$scope/splash.service" >"$tmp/units/$scope/splash.service"
                flag=()
                [ "$scope" = user ] && flag=(--user)
                XDG_RUNTIME_DIR=$tmp/runtime systemd-analyze --man=no "${flag[@]}" verify \
                    "$tmp/units/$scope/splash.service" >"$tmp/verify" 2>&1
                rc=$?
                if [ "$rc" -eq 0 ] && [ ! -s "$tmp/verify" ]; then
                    ok "systemd-analyze verify accepts the $scope unit"
                else
                    fail "systemd-analyze verify, $scope unit (exit $rc): $(cat "$tmp/verify")"
                fi
            done
            unit=$root/usr/lib/systemd/system/splash.service
            for line in Restart=on-failure ProtectSystem=strict PrivateTmp=yes NoNewPrivileges=yes \
                EnvironmentFile=-/etc/default/splash 'ExecStart=/usr/bin/splash serve --host ${SPLASH_HOST}' \
                'ExecStartPost=/usr/bin/splash wait-ready'; do
                check "the system unit has $line" grep -qF -- "$line" "$unit"
            done
        else
            echo "packaging: SKIP systemd-analyze verify: systemd-analyze is not installed (make test-deps)"
        fi
    fi
fi

# ---- completions -------------------------------------------------------------------
models=$tmp/data/splash/models
# an installation as the installer leaves it (server/hub/install.h): NAME/COMMIT/model.json
# and target/ links, NAME/current naming COMMIT; MODEL "" makes a local preparation
install_fixture() { # NAME MODEL REPOSITORY
    local commit=0123456789abcdef0123456789abcdef01234567
    mkdir -p "$models/$1/$commit/target"
    printf 'GGUF' >"$tmp/weights-$1"
    ln -s "$tmp/weights-$1" "$models/$1/$commit/target/m.gguf"
    printf '{"model": "%s", "repository": "%s", "commit": "%s", "target": "target/m.gguf",
             "format": "gguf", "files": [{"path": "m.gguf", "link": "target/m.gguf",
             "size": 4}]}\n' "$2" "$3" "$commit" >"$models/$1/$commit/model.json"
    ln -s "$commit" "$models/$1/current"
}
mkdir -p "$models/Qwen--Half-Installed" "$tmp/paths/model-dir-here"
install_fixture Qwen--Qwen3.5-0.8B-GGUF--Q4_K_M Qwen/Qwen3.5-0.8B-GGUF:Q4_K_M Qwen/Qwen3.5-0.8B-GGUF
install_fixture Qwen--Qwen3.6-4B Qwen/Qwen3.6-4B Qwen/Qwen3.6-4B
install_fixture Qwen--Qwen3.6-4B@v2+language-only Qwen/Qwen3.6-4B Qwen/Qwen3.6-4B
install_fixture Qwen--Damaged-GGUF--Q8_0 Qwen/Damaged-GGUF:Q8_0 Qwen/Damaged-GGUF
rm "$tmp/weights-Qwen--Damaged-GGUF--Q8_0"
install_fixture local--m.gguf--0badcafe /models/m.gguf ""
expected_models=$'Qwen/Qwen3.5-0.8B-GGUF:Q4_K_M\nQwen/Qwen3.6-4B'
check "splash --list-models lists installed models once (not half-installed, damaged or local ones)" \
    test "$(XDG_DATA_HOME=$tmp/data "$build/splash" --list-models)" = "$expected_models"
check "splash models reads the same installations" \
    test "$(XDG_DATA_HOME=$tmp/data "$build/splash" models --json | grep -c '"commit"')" = 4

# bash: COMPREPLY for the words typed so far (the last is the one being completed)
bash_complete() {
    XDG_DATA_HOME=$tmp/data PATH="$build:$PATH" bash --norc --noprofile -c '
        source packaging/completions/splash.bash || exit 1
        COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _splash
        printf "%s\n" "${COMPREPLY[@]}"' bash "$@"
}
check "bash: the completion loads (complete -p splash)" \
    bash --norc --noprofile -c 'source packaging/completions/splash.bash && complete -p splash' >/dev/null
check "bash: 'splash se' completes the subcommand serve" test "$(bash_complete splash se)" = serve
check "bash: every subcommand of splash --list-commands completes" \
    test "$(bash_complete splash '' | grep -v '^--' | sort)" = \
    "$("$build/splash" --list-commands | cut -f1 | sort)"
check "bash: 'splash serve --kv-f' completes the option" \
    test "$(bash_complete splash serve --kv-f)" = --kv-format
check "bash: 'splash serve --kv-format ' offers its choices" \
    test "$(bash_complete splash serve --kv-format '' | sort | paste -sd' ')" = "bf16 int8"
check "bash: '--model-dir' completes local paths" \
    test "$(bash_complete splash serve --model-dir "$tmp/paths/model-")" = "$tmp/paths/model-dir-here"
check "bash: '--mmproj' and '--draft-model' complete local paths" \
    test "$(bash_complete splash serve --mmproj "$tmp/paths/mo")$(bash_complete splash serve \
        --draft-model "$tmp/paths/mo")" = "$tmp/paths/model-dir-here$tmp/paths/model-dir-here"
check "bash: '--model' completes installed models" \
    test "$(bash_complete splash serve --model Qwen/Qwen3.5)" = "Qwen/Qwen3.5-0.8B-GGUF:Q4_K_M"

if command -v fish >/dev/null 2>&1; then
    fish_complete() {
        XDG_DATA_HOME=$tmp/data PATH="$build:$PATH" fish --no-config -c \
            "source packaging/completions/splash.fish; complete -C '$1'" | cut -f1
    }
    check "fish: 'splash se' completes the subcommand serve" test "$(fish_complete 'splash se')" = serve
    check "fish: 'splash serve --kv-f' completes the option" \
        test "$(fish_complete 'splash serve --kv-f')" = --kv-format
    check "fish: 'splash serve --kv-format ' offers its choices" \
        test "$(fish_complete 'splash serve --kv-format ' | sort | paste -sd' ')" = "bf16 int8"
    check "fish: '--model-dir' completes local paths" \
        test "$(fish_complete "splash serve --model-dir $tmp/paths/model-")" = "$tmp/paths/model-dir-here/"
    check "fish: '--model' completes installed models" \
        test "$(fish_complete 'splash serve --model Qwen/Qwen3.6')" = "Qwen/Qwen3.6-4B"
else
    echo "packaging: SKIP the fish completion checks: fish is not installed (make test-deps)"
fi
if command -v zsh >/dev/null 2>&1; then
    check "zsh: the completion parses (zsh -n)" zsh -n packaging/completions/_splash
    # _splash with the completion system's builtins standing in: each prints its offers
    zsh_complete() {
        XDG_DATA_HOME=$tmp/data PATH="$build:$PATH" zsh -f -c '
            compadd() {
                while [[ $1 == -* ]]; do [[ $1 == -- ]] && { shift; break }; shift; done
                print -l -- "$@"
            }
            _describe() { print -l -- ${(P)2%%:*} }
            _files() { print -- "<files>" }
            source packaging/completions/_splash >/dev/null 2>&1
            words=("$@"); CURRENT=$#; PREFIX=${words[CURRENT]}
            _splash | grep -- "^$PREFIX"' zsh "$@"
    }
    check "zsh: 'splash se' completes the subcommand serve" test "$(zsh_complete splash se)" = serve
    check "zsh: 'splash serve --kv-f' completes the option" \
        test "$(zsh_complete splash serve --kv-f)" = --kv-format
    check "zsh: 'splash serve --kv-format ' offers its choices" \
        test "$(zsh_complete splash serve --kv-format '' | sort | paste -sd' ')" = "bf16 int8"
    check "zsh: '--model-dir', '--mmproj', '--draft-model' complete files" \
        test "$(zsh_complete splash serve --model-dir '')$(zsh_complete splash serve --mmproj '')$(
            zsh_complete splash serve --draft-model '')" = "<files><files><files>"
    check "zsh: '--model' completes installed models" \
        test "$(zsh_complete splash serve --model Qwen/Qwen3.6)" = "Qwen/Qwen3.6-4B"
fi

# ---- launchers: completions and the man page never run one ------------------------
# A stand-in splash with a command tagged passes-arguments (as the agent launchers are)
# that records being run: completing its arguments and writing the man page must not.
fake=$tmp/fake
mkdir -p "$fake"
cat >"$fake/splash" <<FAKE
#!/bin/sh
case "\$1" in
    --version) echo "splash 0.0.0" ;;
    --list-commands) printf 'serve\tserve a model\nlaunch\trun a client\tpasses-arguments\n' ;;
    --list-models) ;;
    serve) printf 'usage: splash serve [options]\n  --port N  the port\n' ;;
    launch) echo "launch \$*" >>"$tmp/launched" ;;
esac
FAKE
chmod +x "$fake/splash"
: >"$tmp/launched"
out=$(PATH="$fake:$PATH" bash --norc --noprofile -c '
    source packaging/completions/splash.bash
    for line in "splash la" "splash launch --" "splash launch --x "; do
        read -r -a COMP_WORDS <<<"$line"
        [[ $line == *" " ]] && COMP_WORDS+=("")
        COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
        _splash
        printf "%s\n" "${COMPREPLY[@]}"
    done')
check "bash: a launcher completes as a command" grep -qx launch <<<"$out"
if command -v fish >/dev/null 2>&1; then
    PATH="$fake:$PATH" fish --no-config -c "source packaging/completions/splash.fish
        complete -C 'splash la'; complete -C 'splash launch --'" >"$tmp/fish.out"
    check "fish: a launcher completes as a command, its tag left out" \
        grep -qx "launch"$'\t'"run a client" "$tmp/fish.out"
fi
if command -v zsh >/dev/null 2>&1; then
    PATH="$fake:$PATH" zsh -f -c '
        compadd() { : }; _describe() { : }; _files() { : }
        source packaging/completions/_splash >/dev/null 2>&1
        words=(splash launch --); CURRENT=3; PREFIX=--; _splash' >/dev/null 2>&1
fi
packaging/gen-man.sh "$fake/splash" >"$tmp/fake.1"
check "the man page names a launcher by its summary" grep -q "^run a client" "$tmp/fake.1"
check "completions and the man page never ran the launcher" test ! -s "$tmp/launched"

# ---- make deps -----------------------------------------------------------------------
# A fake apt-get system: dpkg-query says installed unless the name is in $MISSING;
# apt-cache knows every package but those in $UNAVAILABLE; apt-get and sudo record their
# calls; id -u answers $FAKE_UID.
stubs=$tmp/stubs
mkdir -p "$stubs"
cat >"$stubs/dpkg-query" <<'EOF'
#!/bin/sh
for p; do :; done
case " $MISSING " in *" $p "*) exit 1 ;; esac
# a name in $TWICE is installed for two architectures: one line per instance
case " ${TWICE:-} " in *" $p "*) printf 'installed\ninstalled\n'; exit 0 ;; esac
printf installed
EOF
printf '#!/bin/sh\necho "apt-get $*" >>"$CALLS"\n' >"$stubs/apt-get"
printf '#!/bin/sh\necho "dpkg $*" >>"$CALLS"\n' >"$stubs/dpkg"
cat >"$stubs/apt-cache" <<'EOF'
#!/bin/sh
for p; do :; done
case " $UNAVAILABLE " in *" $p "*) exit 0 ;; esac
echo "Package: $p"
EOF
printf '#!/bin/sh\necho "sudo $1" >>"$CALLS"\nexec "$@"\n' >"$stubs/sudo"
printf '#!/bin/sh\n[ "$1" = -u ] && echo "$FAKE_UID"\n' >"$stubs/id"
chmod +x "$stubs"/*
deps() { # deps UID MISSING GROUP...: the calls packaging/deps.sh made
    local uid=$1 missing=$2
    shift 2
    : >"$tmp/calls"
    # the only programs on PATH: the stubs, a shell and the tools the script uses
    mkdir -p "$tmp/tools"
    for t in bash sh env cat dirname sed awk grep cut; do ln -sf "$(command -v $t)" "$tmp/tools/$t"; done
    CALLS=$tmp/calls MISSING=$missing FAKE_UID=$uid UNAVAILABLE=${UNAVAILABLE:-} TWICE=${TWICE:-} \
        PATH="${STUBS:-$stubs}:$tmp/tools" ${ON_TTY:+python3_on_tty} bash packaging/deps.sh "$@" \
        >"$tmp/deps.out" 2>&1 </dev/null
    cat "$tmp/calls"
}
# ON_TTY=1: deps.sh runs at a terminal (a pseudo-terminal of Python's pty module)
# (the interpreter itself: PATH holds only the stubs then, and a shim would not run)
python3=$(python3 -c 'import sys; print(sys.executable)' 2>/dev/null || true)
python3_on_tty() {
    "$python3" -c 'import pty, sys; sys.exit(pty.spawn(sys.argv[1:]) >> 8)' "$@"
}
# A machine without sudo but with su (a Debian installed with a root password): su
# records its call and runs the command as root.
nosudo=$tmp/stubs-nosudo
mkdir -p "$nosudo"
for f in "$stubs"/*; do [ "$(basename "$f")" = sudo ] || ln -sf "$f" "$nosudo/"; done
printf '#!/bin/sh\necho "su $1 $2" >>"$CALLS"\nFAKE_UID=0 exec bash -c "$3"\n' >"$nosudo/su"
chmod +x "$nosudo/su"
check "make deps: nothing runs when every package is present" test -z "$(deps 1000 '' build)"
check "make deps: ... and it says so" grep -q "all .* installed" "$tmp/deps.out"
check "make deps: a package installed for two architectures (:arm64 too) counts as installed" \
    test -z "$(TWICE=libjansson-dev deps 1000 '' build)"
calls=$(deps 1000 "libjansson-dev libcmocka-dev" build)
check "make deps: a user gets sudo apt-get install of the missing build package only" \
    grep -qx "apt-get install -y -qq --no-install-recommends libjansson-dev" <<<"$calls"
check "make deps: ... through sudo" grep -q "^sudo " <<<"$calls"
check "make deps: ... after saying what it installs" grep -q "installing with apt.*: libjansson-dev" "$tmp/deps.out"
calls=$(deps 0 "libjansson-dev" build)
check "make deps: root installs without sudo" \
    test -n "$calls" -a -z "$(grep '^sudo ' <<<"$calls")"
calls=$(STUBS=$nosudo deps 1000 "libjansson-dev" build)
check "make deps: without sudo and not at a terminal, a user is told to run it as root" \
    grep -q "needs root (no sudo here): libjansson-dev; run as root: su -c '.*deps.sh build'" "$tmp/deps.out"
check "make deps: ... and nothing runs" test -z "$calls"
if [ -n "$python3" ]; then
    calls=$(ON_TTY=1 STUBS=$nosudo deps 1000 "libjansson-dev" build)
    check "make deps: without sudo, at a terminal, it runs itself again as root through su" \
        grep -q "^su root -c$" <<<"$calls"
    check "make deps: ... which installs the missing package, without sudo" \
        grep -qx "apt-get install -y -qq --no-install-recommends libjansson-dev" <<<"$calls"
else
    echo "packaging: SKIP the su check: python3 is not installed (make test-deps)"
fi
calls=$(deps 1000 "python3-jinja2" build test)
check "make test-deps: installs the test packages too" grep -q "install .*python3-jinja2" <<<"$calls"
calls=$(UNAVAILABLE=chromium deps 1000 "chromium python3-jinja2" build test)
check "make test-deps: a test package the release lacks is left out with a note" \
    grep -q "chromium (test) is not in this system's apt sources: left out" "$tmp/deps.out"
check "make test-deps: ... the rest installs" \
    grep -qx "apt-get install -y -qq --no-install-recommends python3-jinja2" <<<"$calls"
UNAVAILABLE=libjansson-dev deps 1000 "libjansson-dev" build >/dev/null
check "make deps: a build package the release lacks stops it" \
    grep -q "libjansson-dev is not in this system's apt sources" "$tmp/deps.out"
calls=$(deps 0 "gcc-aarch64-linux-gnu libjansson-dev:arm64" arm64)
check "deps.sh arm64: adds dpkg's arm64 architecture, then updates, then installs" \
    grep -Pzq 'dpkg --add-architecture arm64\napt-get update -qq\napt-get install [^\n]*libjansson-dev:arm64' <<<"$calls"
check "deps.sh arm64: ... the cross compiler too" grep -q "install .*gcc-aarch64-linux-gnu" <<<"$calls"

echo "packaging: $failures failed"
[ "$failures" -eq 0 ]
