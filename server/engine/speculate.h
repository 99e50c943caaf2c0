/* Speculative decoding: a proposer guesses the tokens that follow a lane, the target
 * verifies the anchor and the guesses as one lane of a batched step (its weights read once
 * for all rows), and the lane keeps the longest accepted prefix plus the target's own
 * token; the family drops the rest exactly (family ABI 1.3 seq_keep_rows). */
#ifndef SPLASH_ENGINE_SPECULATE_H
#define SPLASH_ENGINE_SPECULATE_H

#include <stdint.h>

/* --speculative (server.md): auto takes a draft, else the model's MTP layers, else
 * prompt lookup; the modes this build cannot serve are refused at startup. */
enum splash_spec_mode {
    SPLASH_SPEC_OFF = 0,
    SPLASH_SPEC_AUTO = 1,
    SPLASH_SPEC_NGRAM = 2,
    SPLASH_SPEC_MTP = 3,
    SPLASH_SPEC_DFLASH = 4,
};

/* The rows a cycle verifies: the anchor and at most 7 proposals (a draft block's 8). */
#define SPLASH_SPEC_MAX_ROWS 8

/* "off", "auto", ... -> the mode; -1 for another word. */
int splash_spec_mode_parse(const char *s);
const char *splash_spec_mode_name(int mode);

/* A proposer for one lane. history[0..n) is the lane's prompt and output, its last token
 * the anchor (the token the verify feeds first); propose writes up to max tokens that may
 * follow it into out and returns how many. Proposals are taken as deterministic: a sampled
 * lane accepts each with the probability the target gives it and otherwise draws from the
 * rest of the target's distribution, which keeps that distribution exact. */
struct splash_proposer {
    const char *name;
    int32_t (*propose)(struct splash_proposer *p, const int32_t *history, int32_t n, int32_t max,
                       int32_t *out);
    /* how many of the n_proposed the target accepted (the first rejection ends a cycle);
     * NULL for a proposer that keeps no state */
    void (*accepted)(struct splash_proposer *p, int32_t n_proposed, int32_t n_accepted);
    void (*destroy)(struct splash_proposer *p);
};

/* Prompt lookup: the continuation of the latest earlier occurrence of the history's last
 * 4, 3 or 2 tokens (the longest that occurs), as llama.cpp's lookup and vLLM's ngram
 * proposer do; nothing where the conversation does not repeat itself. */
struct splash_proposer *splash_ngram_proposer_create(void);

/* Exposed for the tests: the lookup itself. */
int32_t splash_ngram_lookup(const int32_t *history, int32_t n, int32_t n_max, int32_t n_min,
                            int32_t max, int32_t *out);

#endif
