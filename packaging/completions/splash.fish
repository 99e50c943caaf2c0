# fish completion for splash
set -l commands serve model-check plugins run bench tokenize detokenize logits template make-model
complete -c splash -f -n "not __fish_seen_subcommand_from $commands" -a "$commands"
complete -c splash -n "__fish_seen_subcommand_from serve" -l model -d 'OWNER/REPO[:VARIANT]'
complete -c splash -n "__fish_seen_subcommand_from serve run bench logits model-check" -l model-dir -r -F
complete -c splash -n "__fish_seen_subcommand_from serve" -l kv-format -x -a 'int8 bf16'
complete -c splash -n "__fish_seen_subcommand_from serve" -l state-format -x -a 'fp32 bf16'
complete -c splash -n "__fish_seen_subcommand_from serve" -l port -x
complete -c splash -n "__fish_seen_subcommand_from serve" -l host -x
complete -c splash -n "__fish_seen_subcommand_from serve" -l api-key -x
complete -c splash -n "__fish_seen_subcommand_from serve" -l max-context -x
complete -c splash -n "__fish_seen_subcommand_from serve" -l default-reasoning-effort -x -a 'none minimal low medium high xhigh max'
complete -c splash -n "__fish_seen_subcommand_from serve" -l demo -d 'serve a random-weight demonstration model'
