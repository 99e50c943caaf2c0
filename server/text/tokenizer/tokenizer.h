/* Byte-level BPE tokenizer (GPT-2 byte alphabet, merge ranks) with the
 * pre-tokenizer profiles models.md names ("Tokenizer and chat templates").
 *
 * A tokenizer is built from a struct splash_vocab_spec, which two loaders fill:
 * GGUF metadata through the host's metadata API (tokenizer.ggml.*), and a
 * Hugging Face tokenizer.json + tokenizer_config.json. Once created it is
 * immutable: encode and decode may run on any number of threads at once. */
#ifndef SPLASH_TEXT_TOKENIZER_H
#define SPLASH_TEXT_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "splash/host.h"
#include "splash/status.h"

/* GGUF tokenizer.ggml.token_type values. */
enum splash_token_type {
    SPLASH_TOKEN_NORMAL = 1,
    SPLASH_TOKEN_UNKNOWN = 2,
    SPLASH_TOKEN_CONTROL = 3,
    SPLASH_TOKEN_USER_DEFINED = 4,
    SPLASH_TOKEN_UNUSED = 5,
    SPLASH_TOKEN_BYTE = 6,
};

/* Where a spec came from: messages name GGUF keys or tokenizer.json paths. */
enum splash_vocab_origin {
    SPLASH_VOCAB_GGUF = 0,
    SPLASH_VOCAB_HF = 1,
};

/* A vocabulary as the model files state it; the loaders fill it and
 * splash_tokenizer_create copies what it keeps, so the strings need only live
 * until then. NORMAL tokens and merges are spelled in the GPT-2 byte alphabet
 * ("Ġthe"); the other token types are raw UTF-8 ("<|im_end|>"). */
struct splash_vocab_spec {
    const char *source;             /* file named in messages */
    const char *model;              /* "gpt2" */
    const char *pre;                /* profile: "qwen2", "qwen35", "flint" */
    size_t n_tokens;
    const char *const *tokens;      /* n_tokens strings, index = id */
    const int32_t *types;           /* n_tokens enum splash_token_type */
    size_t n_merges;
    const char *const *merges;      /* "left right", index = rank */
    int32_t bos, eos, pad;          /* ids, -1 when the files name none */
    int add_bos, add_eos;           /* automatic insertion: refused when set */
    enum splash_vocab_origin origin; /* picks the key names messages use */
    void *owned[3];                 /* loader allocations, freed by splash_vocab_spec_free */
};

/* Fills spec from GGUF metadata (tokenizer.ggml.model, .pre, .tokens, .token_type,
 * .merges, .bos/eos/padding_token_id, .add_bos_token/.add_eos_token). The strings
 * are the metadata's own: keep m open until splash_tokenizer_create returns.
 * Malformed or missing keys are refused with the key named. */
enum splash_status splash_vocab_spec_from_meta(struct splash_vocab_spec *spec,
                                               const struct splash_meta_api *api,
                                               const struct splash_meta *m,
                                               struct splash_err *err);
/* Frees the arrays a loader allocated (not the metadata's strings). */
void splash_vocab_spec_free(struct splash_vocab_spec *spec);

struct splash_tokenizer;

/* Validates spec (profile, model, token types, byte alphabet, merges, ids) and
 * builds a tokenizer. Refuses add_bos/add_eos, unknown profiles and malformed
 * vocabularies with the key named. */
enum splash_status splash_tokenizer_create(const struct splash_vocab_spec *spec,
                                           struct splash_tokenizer **out, struct splash_err *err);
/* A directory holding tokenizer.json (and optionally tokenizer_config.json). */
enum splash_status splash_tokenizer_load_hf(const char *dir, struct splash_tokenizer **out,
                                            struct splash_err *err);
/* The vocabulary embedded in a GGUF file (only its header is read). */
enum splash_status splash_tokenizer_load_gguf(const char *path, struct splash_tokenizer **out,
                                              struct splash_err *err);
/* PATH as --model-dir names it: a GGUF file, or a directory with tokenizer.json. */
enum splash_status splash_tokenizer_load(const char *path, struct splash_tokenizer **out,
                                         struct splash_err *err);
void splash_tokenizer_destroy(struct splash_tokenizer *tok);

size_t splash_tokenizer_n_tokens(const struct splash_tokenizer *tok);
int32_t splash_tokenizer_bos(const struct splash_tokenizer *tok); /* -1 when none */
int32_t splash_tokenizer_eos(const struct splash_tokenizer *tok);
int32_t splash_tokenizer_pad(const struct splash_tokenizer *tok);
const char *splash_tokenizer_pre(const struct splash_tokenizer *tok); /* profile name */
/* enum splash_token_type of id (after control-looking promotion), 0 when out of range. */
int splash_tokenizer_token_type(const struct splash_tokenizer *tok, int32_t id);
/* The id of an added (control or user-defined) token spelled exactly text, else -1. */
int32_t splash_tokenizer_find_special(const struct splash_tokenizer *tok, const char *text);

/* A growable id list; zero-initialise, append with encode, free with
 * splash_token_buf_free. */
struct splash_token_buf {
    int32_t *ids;
    size_t n, cap;
};
void splash_token_buf_free(struct splash_token_buf *buf);

/* Added tokens spelled in the text become their ids: user-defined ones
 * always (<think>, <tool_call>: as llama.cpp and HF tokenizers both do),
 * control ones only with this flag (chat-template markup, never user content).
 * Without it a control token's text is tokenized as ordinary text. A
 * user-defined token spelled <|...|> (Qwen's FIM tokens) counts as control. */
#define SPLASH_TOKENIZE_PARSE_SPECIAL 1u

/* Appends the ids of text[0..len) to out. text must be valid UTF-8 (refused
 * otherwise, with the byte offset). Adds no BOS/EOS. Thread-safe. */
enum splash_status splash_tokenizer_encode(const struct splash_tokenizer *tok, const char *text,
                                           size_t len, unsigned flags,
                                           struct splash_token_buf *out, struct splash_err *err);

/* A growable byte string, always NUL-terminated after a successful append. */
struct splash_tok_bytes {
    char *data;
    size_t len, cap;
};
void splash_tok_bytes_free(struct splash_tok_bytes *b);

/* Control (and unknown) tokens render their text; without it they render nothing. */
#define SPLASH_DETOK_SPECIAL 1u

/* The bytes of one token: byte-level tokens as their bytes, added tokens as
 * their text, control tokens as "" without SPLASH_DETOK_SPECIAL, unused "".
 * NULL (and *len 0) for an id out of range. */
const char *splash_tokenizer_piece(const struct splash_tokenizer *tok, int32_t id,
                                   unsigned flags, size_t *len);
/* Appends the bytes of ids to out (raw: may end inside a UTF-8 character).
 * An id out of range is refused. */
enum splash_status splash_tokenizer_decode(const struct splash_tokenizer *tok, const int32_t *ids,
                                           size_t n, unsigned flags, struct splash_tok_bytes *out,
                                           struct splash_err *err);

/* Streaming decode for generation: each push appends the text that is now
 * complete, holding back the bytes of a UTF-8 character a token ends inside
 * until a later token completes it. Bytes that can no longer complete a
 * character are passed through as they are. */
struct splash_detok_stream {
    const struct splash_tokenizer *tok;
    unsigned flags;
    unsigned char held[4];
    size_t n_held;
};
void splash_detok_stream_init(struct splash_detok_stream *s, const struct splash_tokenizer *tok,
                              unsigned flags);
enum splash_status splash_detok_stream_push(struct splash_detok_stream *s, int32_t id,
                                            struct splash_tok_bytes *out, struct splash_err *err);
/* Appends whatever is held (an incomplete character at the end of output). */
enum splash_status splash_detok_stream_flush(struct splash_detok_stream *s,
                                             struct splash_tok_bytes *out, struct splash_err *err);

#endif
