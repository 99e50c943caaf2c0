/* Appending a depth-first trie node by node (the vocabulary, and the subtries of
 * the mask cache). */
#ifndef SPLASH_TEXT_GRAMMAR_TRIE_BUILD_H
#define SPLASH_TEXT_GRAMMAR_TRIE_BUILD_H

#include "server/text/grammar/internal.h"

struct trie_build {
    struct gram_trie t;
    uint32_t cap_byte, cap_depth, cap_off, cap_toks;
    uint32_t n_toks;
};

void trie_build_init(struct trie_build *tb);
void trie_build_free(struct trie_build *tb);
/* Appends a node; tokens added next end at it. -1 when out of memory. */
int trie_build_node(struct trie_build *tb, uint8_t byte, uint32_t depth);
int trie_build_token(struct trie_build *tb, int32_t id);
/* Computes the skips and moves the trie to out (tb is left empty). */
int trie_build_finish(struct trie_build *tb, struct gram_trie *out);

#endif
