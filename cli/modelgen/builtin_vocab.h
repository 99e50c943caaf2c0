/* The built-in tokenizer and chat template of generated (random-weight) models:
 * a byte-level BPE vocabulary in the GPT-2 byte alphabet with a few hundred
 * merges trained at build time on a list of common English pieces, the Qwen
 * special tokens, reserved fillers up to the model's vocabulary size, and a
 * ChatML template of our own. Part of make-model (cli/modelgen/model_writer.c). */
#ifndef SPLASH_MODELGEN_BUILTIN_VOCAB_H
#define SPLASH_MODELGEN_BUILTIN_VOCAB_H

#include <stdint.h>

#include "core/gguf_write.h"
#include "splash/status.h"

/* Fewest tokens a built-in vocabulary holds: 256 bytes and the special tokens. */
int64_t splash_builtin_vocab_min_size(void);

/* Sets the tokenizer.* keys of a vocabulary of exactly n_vocab tokens on w:
 * tokenizer.ggml.model "gpt2", .pre "qwen2", .tokens, .token_type, .merges,
 * bos/eos/padding ids, add_bos_token false, and tokenizer.chat_template. Merges
 * are dropped (highest rank first) when n_vocab is too small to hold them all. */
enum splash_status splash_builtin_vocab_write(struct splash_gguf_writer *w, int64_t n_vocab,
                                              struct splash_err *err);

struct splash_builtin_vocab_opts {
    int harmony;               /* add OpenAI's harmony tokens (gpt-oss); EOS <|return|> */
    /* add Flint's chat tokens (roles, stops, GLM-4.7's argument tags, all control), the
     * flint pre-tokenizer, EOS <|end_of_text|> and, unless chat_template says otherwise,
     * splash_builtin_flint_template */
    int flint;
    const char *chat_template; /* NULL: the built-in ChatML template (Flint's for flint) */
};

/* splash_builtin_vocab_write with harmony tokens and another template. */
enum splash_status splash_builtin_vocab_write_opts(struct splash_gguf_writer *w, int64_t n_vocab,
                                                   const struct splash_builtin_vocab_opts *o,
                                                   struct splash_err *err);

/* The ChatML template written as tokenizer.chat_template (Jinja, NUL-terminated). */
extern const char splash_builtin_chat_template[];
/* A Flint vocabulary's template (models.md "Chat formats", FLINT): <|system|>, <|user|>,
 * <|assistant|> and <|observation|> turns, the tools block, each assistant turn's
 * reasoning and GLM-4.7 argument-tag calls; the generation prompt is <|assistant|> alone. */
extern const char splash_builtin_flint_template[];

#endif
