#!/usr/bin/env bash
# Writes the man page splash(1) to stdout from the binary's own help: the command list
# (`splash --list-commands`) and each command's --help, so the page never drifts from
# the options the binary takes.  packaging/gen-man.sh build/splash > build/splash.1
set -euo pipefail
bin=$1
version=$("$bin" --version | awk '{ print $2 }')

# roff-safe text: backslashes, hyphens, and a leading dot or quote that would read as a request
esc() { sed -e 's/\\/\\e/g' -e 's/-/\\-/g' -e "s/^\([.']\)/\\\\\&\1/"; }

# One command's --help as roff: option lines ("  --opt ARG   what", indented two) become
# tagged paragraphs that take the deeper-indented lines after them; other indented lines
# (usage continuations, examples) stay literal, indented; top-level lines stay as written.
help_to_roff() {
    awk '
    function esc(s) {
        gsub(/\\/, "\\e", s); gsub(/-/, "\\-", s)
        if (s ~ /^[.\047]/) s = "\\&" s
        return s
    }
    function end_block() {
        if (literal) { print ".fi"; print ".RE" }
        if (plain) print ".fi"
        literal = 0; plain = 0; in_option = 0
    }
    /^[ \t]*$/ { end_block(); print ".PP"; next }
    /^  -[^ ]/ {
        end_block()
        line = substr($0, 3)
        if (match(line, /  +/)) { tag = substr(line, 1, RSTART - 1); text = substr(line, RSTART + RLENGTH) }
        else { tag = line; text = "" }
        print ".TP"; print ".B " esc(tag); if (text != "") print esc(text)
        in_option = 1
        next
    }
    /^   / && in_option { line = $0; sub(/^ +/, "", line); print esc(line); next }
    /^ / {
        if (!literal) { end_block(); print ".RS"; print ".nf"; literal = 1 }
        line = $0; sub(/^ +/, "", line); print esc(line); next
    }
    {
        if (!plain) { end_block(); print ".nf"; plain = 1 }
        print esc($0)
    }
    END { end_block() }'
}

cat <<EOF
.TH SPLASH 1 "" "splash $version" "User Commands"
.SH NAME
splash \\- local LLM inference engine and API server
.SH SYNOPSIS
.B splash
.I COMMAND
.RI [ OPTIONS ]
.br
.B splash
.RB [ \\-\\-version | \\-\\-help | \\-\\-list\\-commands | \\-\\-list\\-models ]
.SH DESCRIPTION
Splash runs quantized Qwen\\-family checkpoints (GGUF, MLX safetensors, NVIDIA Model
Optimizer, compressed\\-tensors) on the CPU and serves them over the OpenAI and Anthropic
APIs, with a chat page at /.
A small core loads family plugins (model architectures) and format plugins
(quantization formats) as shared objects.
.SH COMMANDS
EOF
"$bin" --list-commands | while IFS=$'\t' read -r name summary _; do
    printf '.TP\n.B %s\n%s\n' "$(esc <<<"$name")" "$(esc <<<"$summary")"
done
echo '.SH "COMMAND OPTIONS"'
"$bin" --list-commands | while IFS=$'\t' read -r name summary kind; do
    printf '.SS "splash %s"\n' "$name"
    # a launcher hands --help to the client it starts: its summary stands in
    if [ "$kind" = passes-arguments ]; then
        printf '%s\n' "$(esc <<<"$summary") Every argument goes to that program."
    else
        "$bin" "$name" --help </dev/null 2>&1 | help_to_roff
    fi
done
cat <<'EOF'
.SH ENVIRONMENT
.TP
.B SPLASH_PLUGIN_PATH
Colon\-separated directories searched for plugins after each \-\-plugin\-dir.
.TP
.B SPLASH_PORT, SPLASH_API_KEY
The default port and API key of splash serve (\-\-port, \-\-api\-key override them).
.TP
.B XDG_DATA_HOME, XDG_CACHE_HOME, XDG_STATE_HOME
Where Splash keeps installed models and runtime locks, its prefix cache, and crash
reports (each under splash/).
.TP
.B SPLASH_FORCE_ISA=scalar
Use the reference kernels.
.SH FILES
.TP
.I <exe>/../lib/splash
The plugins of an installed splash (/usr/lib/splash for the Debian package).
A splash run from its build tree loads that tree's lib/splash instead.
World\-writable directories and plugin files are never loaded.
.TP
.I ~/.local/share/splash
Installed models, the demonstration model and the locks of running servers.
.TP
.I /etc/default/splash, ~/.config/splash/serve.env
The environment of the systemd units (system, user): SPLASH_HOST, SPLASH_PORT,
SPLASH_API_KEY, SPLASH_ARGS.
.SH SEE ALSO
The README and docs/ of the source tree.
EOF
