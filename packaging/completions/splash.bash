# bash completion for splash
_splash()
{
    local cur prev words cword
    _init_completion || return
    local commands="serve model-check plugins run bench tokenize detokenize logits template make-model"
    if [[ $cword -eq 1 ]]; then
        COMPREPLY=($(compgen -W "$commands --help --version" -- "$cur"))
        return
    fi
    case "$prev" in
        --model-dir|--draft-model|--mmproj|--cache-dir|--plugin-dir|--out|--template|--request)
            _filedir
            return ;;
        --kv-format) COMPREPLY=($(compgen -W "int8 bf16" -- "$cur")); return ;;
        --state-format) COMPREPLY=($(compgen -W "fp32 bf16" -- "$cur")); return ;;
        --activations) COMPREPLY=($(compgen -W "auto bf16" -- "$cur")); return ;;
        --verify-rows) COMPREPLY=($(compgen -W "auto all" -- "$cur")); return ;;
        --default-reasoning-effort)
            COMPREPLY=($(compgen -W "none minimal low medium high xhigh max" -- "$cur")); return ;;
    esac
    if [[ $cur == -* ]]; then
        local opts
        opts=$(splash "${words[1]}" --help 2>/dev/null | grep -oE '^\s+--[a-z-]+' | tr -d ' ')
        COMPREPLY=($(compgen -W "$opts" -- "$cur"))
    else
        _filedir
    fi
}
complete -F _splash splash
