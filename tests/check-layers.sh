#!/usr/bin/env bash
# The layer rule (docs/architecture.md): an include may only point down or sideways
# within its own layer. Layers, bottom up:
#
#   include/splash/   the public plugin ABI
#   core/             the small plugin core
#   kernels/          the compute layer (uses core's runtime, never its registry or host)
#   server/text/      tokenizer and grammar
#   server/engine/    the batching engine
#   server/           the HTTP front
#   cli/              the binary
#
# Plugins (formats/<name>/, families/<name>/, families/drafts/<name>/) include only include/splash/ and their
# own folder; a family may also include the trunk it compiles in (families/common/).
# Every "..." include of every .c/.h is checked; one line per violation, exit 1.
set -u
cd "$(dirname "$0")/.."

layer_of() {
    case "$1" in
        include/splash/*) echo 0 ;;
        core/*) echo 1 ;;
        kernels/*) echo 2 ;;
        server/text/*) echo 3 ;;
        server/engine/*) echo 4 ;;
        server/*) echo 5 ;;
        cli/*) echo 6 ;;
        *) echo "" ;;
    esac
}

# An include "x/y.h" resolves against -Iinclude or -I. (the repository root).
resolve() {
    if [ -f "include/$1" ]; then
        echo "include/$1"
    else
        echo "$1"
    fi
}

violations=0
report() {
    echo "check-layers: $1: includes \"$2\": $3"
    violations=$((violations + 1))
}

files=$(find include core kernels server cli formats families -name '*.[ch]' | sort)
for f in $files; do
    while IFS= read -r inc; do
        target=$(resolve "$inc")
        case "$f" in
            formats/*/* | families/*/*)
                case "$f" in
                    families/drafts/*) own=$(echo "$f" | cut -d/ -f1-3)/ ;;
                    *) own=$(echo "$f" | cut -d/ -f1-2)/ ;;
                esac
                case "$target" in
                    include/splash/* | "$own"*) continue ;;
                    families/common/*) [ "${f#families/}" != "$f" ] && continue ;;
                esac
                report "$f" "$inc" "a plugin includes only include/splash/ and its own folder"
                continue ;;
        esac
        from=$(layer_of "$f")
        [ -n "$from" ] || continue
        case "$target" in
            formats/* | families/*)
                report "$f" "$inc" "only plugins include plugin sources"
                continue ;;
            tests/* | bench/* | examples/*)
                report "$f" "$inc" "the product never includes tests, benches or examples"
                continue ;;
        esac
        to=$(layer_of "$target")
        [ -n "$to" ] || continue # generated or system-relative headers
        if [ "$to" -gt "$from" ]; then
            report "$f" "$inc" "an include may not cross a layer upward"
        fi
        # kernels use core's runtime (threads, CPU, rows, mappings), never its registry,
        # host table or model files: formats come bound to each tensor.
        if [ "$from" = 2 ]; then
            case "$target" in
                core/registry.h | core/host.h | core/meta.h | core/model_*.h | core/family.h | core/draft.h)
                    report "$f" "$inc" "kernels use the format bound to each tensor, not the registry or host" ;;
            esac
        fi
    done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
done

if [ "$violations" -gt 0 ]; then
    echo "check-layers: $violations include(s) cross a layer"
    exit 1
fi
echo "check-layers: every include points down or within its layer"
