/* ISA-specific mask application (mask_avx2.c), chosen by splash_grammar_mask_apply. */
#ifndef SPLASH_TEXT_GRAMMAR_MASK_IMPL_H
#define SPLASH_TEXT_GRAMMAR_MASK_IMPL_H

#include <stddef.h>
#include <stdint.h>

#if defined(__x86_64__)
void gram_mask_apply_avx2(const uint32_t *mask, float *logits, size_t n_words);
#endif

#endif
