/* `splash logits`: teacher-forced logits of a token list, for comparisons with
 * reference implementations. */
#ifndef SPLASH_CLI_LOGITS_H
#define SPLASH_CLI_LOGITS_H

/* splash logits --model-dir PATH --tokens "ID ID ..." --out FILE [--decode]
 *     [--kv-format int8|bf16] [--state-format fp32|bf16] [--threads N]
 * Writes float32 little-endian [n_tokens][n_vocab] to FILE and prints
 * "n_tokens n_vocab". Returns the process exit status. */
int splash_cmd_logits(int argc, char **argv);

#endif
