/* What the tokenizer's files share: the tokenizer struct, profiles, scratch. */
#ifndef SPLASH_TEXT_TOKENIZER_INTERNAL_H
#define SPLASH_TEXT_TOKENIZER_INTERNAL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "server/text/tokenizer/tokenizer.h"

#define SPLASH_TOK_MAX_SPLITS 3

/* A pre-tokenizer profile: the normalizer and the regex splits (each
 * "Isolated": matches and the text between them both become pieces) applied
 * in order before byte-level BPE. The patterns are the tokenizer.json texts,
 * which also select the profile when loading a tokenizer.json. */
struct splash_tok_profile {
    const char *name;
    int nfc;
    int n_splits;
    const char *patterns[SPLASH_TOK_MAX_SPLITS];
};

const struct splash_tok_profile *splash_tok_profile_find(const char *name);
/* The profile whose patterns are exactly these, or NULL. */
const struct splash_tok_profile *splash_tok_profile_match(int n, const char *const *patterns);
/* "qwen2, qwen35, flint" for messages. */
const char *splash_tok_profile_names(void);

/* An added token matched in the text before pre-tokenization. */
struct splash_tok_special {
    const char *text; /* in the tokenizer's arena */
    size_t len;
    int32_t id;
    int control;      /* matched only with SPLASH_TOKENIZE_PARSE_SPECIAL */
};

/* (left id, right id) -> merge rank and result, open addressing. */
struct splash_tok_pair {
    uint64_t key; /* left << 32 | right; SPLASH_TOK_PAIR_EMPTY when free */
    uint32_t rank;
    int32_t result;
};
#define SPLASH_TOK_PAIR_EMPTY UINT64_MAX

struct splash_tokenizer {
    char source[128];
    const struct splash_tok_profile *profile;
    pcre2_code *re[SPLASH_TOK_MAX_SPLITS];

    size_t n_tokens;
    char *arena;          /* token bytes */
    size_t *piece_off;    /* n_tokens + 1 offsets into arena */
    uint8_t *types;       /* enum splash_token_type, after promotion */
    int32_t byte_id[256]; /* the token of each single byte */

    struct splash_tok_pair *pairs;
    size_t pair_mask;

    /* Sorted by first byte, then longest first; first_start[b]..first_start[b+1]. */
    struct splash_tok_special *specials;
    size_t n_specials;
    uint32_t first_start[257];

    int32_t bos, eos, pad;
};

/* Finds the merge of (left, right); 0 when none. */
static inline int splash_tok_pair_find(const struct splash_tokenizer *tok, int32_t left,
                                       int32_t right, uint32_t *rank, int32_t *result)
{
    uint64_t key = (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
    uint64_t h = key * 0x9E3779B97F4A7C15ull;
    size_t i = (size_t)(h >> 32) & tok->pair_mask;
    for (;;) {
        const struct splash_tok_pair *p = &tok->pairs[i];
        if (p->key == key) {
            *rank = p->rank;
            *result = p->result;
            return 1;
        }
        if (p->key == SPLASH_TOK_PAIR_EMPTY)
            return 0;
        i = (i + 1) & tok->pair_mask;
    }
}

/* Compiles the profile's regexes into tok->re. */
enum splash_status splash_tok_regex_compile(struct splash_tokenizer *tok, struct splash_err *err);

/* A candidate merge of the symbols at pos and its successor. */
struct splash_tok_heap_item {
    uint32_t rank;
    int32_t pos;
    int32_t left, right, result;
};

/* Per-call working memory of encode (the tokenizer itself stays immutable). */
struct splash_tok_scratch {
    pcre2_match_data *md[SPLASH_TOK_MAX_SPLITS];
    pcre2_match_context *mctx;
    pcre2_jit_stack *jit_stack;
    /* BPE symbols and heap */
    int32_t *sym_id;
    int32_t *sym_prev, *sym_next;
    struct splash_tok_heap_item *heap;
    size_t sym_cap, heap_cap, heap_n;
};

typedef enum splash_status (*splash_tok_piece_fn)(void *ctx, const char *piece, size_t len,
                                                  struct splash_err *err);
/* Splits text (normalized already) by the profile's regexes, calling fn per pre-token. */
enum splash_status splash_tok_split(const struct splash_tokenizer *tok,
                                    struct splash_tok_scratch *s, const char *text, size_t len,
                                    splash_tok_piece_fn fn, void *ctx, struct splash_err *err);
/* Scratch for one call: match data for each split; free with splash_tok_scratch_free. */
enum splash_status splash_tok_scratch_init(const struct splash_tokenizer *tok,
                                           struct splash_tok_scratch *s, struct splash_err *err);
void splash_tok_scratch_free(struct splash_tok_scratch *s);

/* Splits text (one run between added tokens, already normalized) into
 * pre-tokens and appends the BPE ids of each to out. */
enum splash_status splash_tok_pretokenize_bpe(const struct splash_tokenizer *tok,
                                              struct splash_tok_scratch *s, const char *text,
                                              size_t len, struct splash_token_buf *out,
                                              struct splash_err *err);
/* BPE of one pre-token's bytes. */
enum splash_status splash_tok_bpe(const struct splash_tokenizer *tok, struct splash_tok_scratch *s,
                                  const unsigned char *bytes, size_t len,
                                  struct splash_token_buf *out, struct splash_err *err);

enum splash_status splash_tok_buf_push(struct splash_token_buf *buf, int32_t id,
                                       struct splash_err *err);

/* GPT-2 byte alphabet: the code point standing for each byte, and back. */
uint32_t splash_tok_byte_to_cp(unsigned char b);
/* The byte a code point stands for, or -1. */
int splash_tok_cp_to_byte(uint32_t cp);

/* Length of the valid UTF-8 sequence at s (1..4), or 0 when invalid/truncated. */
size_t splash_tok_utf8_seq(const unsigned char *s, size_t n, uint32_t *cp);

#endif
