# bash completion for splash. Commands come from `splash --list-commands`, a command's
# options and the choices a value takes (`--kv-format int8|bf16`) from its --help, and
# installed models from `splash --list-models`, so new commands and options complete
# without editing this file. Options whose value is a PATH complete local paths.

# The splash being completed: the one typed (build/splash), else the one on PATH.
_splash_bin()
{
    local bin=${COMP_WORDS[0]}
    bin=${bin/#\~/$HOME}
    if [[ $bin == */* && -x $bin ]] || type -P "$bin" >/dev/null 2>&1; then
        printf '%s' "$bin"
    else
        printf splash
    fi
}

_splash_paths()
{
    compopt -o filenames 2>/dev/null
    mapfile -t COMPREPLY < <(compgen -f -- "$1")
}

_splash()
{
    local cur=${COMP_WORDS[COMP_CWORD]} prev=""
    ((COMP_CWORD > 0)) && prev=${COMP_WORDS[COMP_CWORD - 1]}
    # --option=value: bash splits at '='
    if [[ $cur == "=" ]]; then
        cur=""
    fi
    if [[ $prev == "=" ]] && ((COMP_CWORD > 1)); then
        prev=${COMP_WORDS[COMP_CWORD - 2]}
    fi
    local bin
    bin=$(_splash_bin)
    COMPREPLY=()
    if ((COMP_CWORD == 1)); then
        mapfile -t COMPREPLY < <(compgen -W "$("$bin" --list-commands 2>/dev/null | cut -f1)
            --help --version" -- "$cur")
        return
    fi
    case $prev in
        --model-dir | --draft-model | --mmproj)
            _splash_paths "$cur"
            return
            ;;
        --model)
            mapfile -t COMPREPLY < <(compgen -W "$("$bin" --list-models 2>/dev/null)" -- "$cur")
            return
            ;;
    esac
    # a launcher hands its arguments (--help too) to the client it starts: paths only
    if [[ $("$bin" --list-commands 2>/dev/null | awk -F'\t' -v c="${COMP_WORDS[1]}" \
        '$1 == c { print $3 }') == passes-arguments ]]; then
        _splash_paths "$cur"
        return
    fi
    local help
    help=$("$bin" "${COMP_WORDS[1]}" --help 2>/dev/null)
    if [[ $prev == --* ]]; then
        # the value an option's help line names: PATH, or choices in lower case
        local arg
        arg=$(awk -v o="$prev" '$1 == o { print $2; exit }' <<<"$help")
        if [[ $arg == PATH || $arg == FILE || $arg == DIR ]]; then
            _splash_paths "$cur"
            return
        fi
        # a metavar is upper case (N, SIZE) or a list of choices; else the line is a flag's
        if [[ $arg == *"|"* || $arg =~ ^[A-Z] ]]; then
            local w choices=()
            for w in ${arg//|/ }; do
                [[ $w =~ ^[a-z0-9_-]+$ ]] && choices+=("$w")
            done
            mapfile -t COMPREPLY < <(compgen -W "${choices[*]}" -- "$cur")
            return
        fi
    fi
    if [[ $cur == -* ]]; then
        mapfile -t COMPREPLY < <(compgen -W "$(grep -oE '^ +--[a-z0-9-]+' <<<"$help")" -- "$cur")
        return
    fi
    _splash_paths "$cur"
}
complete -F _splash splash
