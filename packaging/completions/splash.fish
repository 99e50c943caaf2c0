# fish completion for splash. Commands come from `splash --list-commands`, a command's
# options and the choices a value takes (`--kv-format int8|bf16`) from its --help, and
# installed models from `splash --list-models`, so new commands and options complete
# without editing this file. Options whose value is a PATH complete local paths.

# The splash being completed: the one typed (build/splash), else the one on PATH.
function __splash_bin
    set -l bin (commandline -opc)[1]
    if command -q -- $bin; or test -x "$bin"
        echo $bin
    else
        echo splash
    end
end

function __splash_commands
    set -l bin (__splash_bin)
    $bin --list-commands 2>/dev/null | string replace -r '\tpasses-arguments$' ''
end

function __splash_at_command
    test (count (commandline -opc)) -eq 1
end

# What fits the word after the command: a value for the previous option, an option, or a path.
function __splash_args
    set -l tokens (commandline -opc)
    set -l prev $tokens[-1]
    set -l cur (commandline -ct)
    set -l bin (__splash_bin)
    switch $prev
        case --model-dir --draft-model --mmproj
            __fish_complete_path $cur
            return
        case --model
            $bin --list-models 2>/dev/null
            return
    end
    # a launcher hands its arguments (--help too) to the client it starts: paths only
    if $bin --list-commands 2>/dev/null | string match -q -- "$tokens[2]	*	passes-arguments"
        __fish_complete_path $cur
        return
    end
    set -l help ($bin $tokens[2] --help 2>/dev/null)
    if string match -q -- '--*' $prev
        # the value an option's help line names: PATH, or choices in lower case
        set -l line (string match -r -- '^ +'(string escape --style=regex -- $prev)' +(\S+)' $help)
        set -l arg $line[2]
        if contains -- "$arg" PATH FILE DIR
            __fish_complete_path $cur
            return
        end
        if string match -q -r -- '\||^[A-Z]' "$arg"
            string split '|' -- $arg | string match -r -- '^[a-z0-9_-]+$'
            return
        end
    end
    if string match -q -- '-*' $cur
        string match -r -g -- '^ +(--[a-z0-9-]+)' $help
        return
    end
    __fish_complete_path $cur
end

complete -c splash -f -n __splash_at_command -a '(__splash_commands)'
complete -c splash -f -n 'not __splash_at_command' -a '(__splash_args)'
