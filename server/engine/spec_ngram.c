/* The prompt-lookup (n-gram) proposer: the conversation's own repetitions (code being
 * edited, a quoted passage, a list echoed back) predict its next tokens. */
#include <stdlib.h>
#include <string.h>

#include "server/engine/speculate.h"

#define NGRAM_MAX 4
#define NGRAM_MIN 2
#define NGRAM_WINDOW (1 << 16) /* tokens searched back: the lookup stays well under a step */

int32_t splash_ngram_lookup(const int32_t *history, int32_t n, int32_t n_max, int32_t n_min,
                            int32_t max, int32_t *out)
{
    if (max <= 0)
        return 0;
    int32_t first = n > NGRAM_WINDOW ? n - NGRAM_WINDOW : 0;
    for (int32_t m = n_max; m >= n_min; m--) {
        if (n < m + 1)
            continue;
        const int32_t *key = history + n - m;
        /* the latest earlier occurrence with at least one token after it */
        for (int32_t i = n - m - 1; i >= first; i--) {
            if (history[i] != key[0] || memcmp(history + i, key, (size_t)m * sizeof *key))
                continue;
            int32_t from = i + m, k = n - from < max ? n - from : max;
            memcpy(out, history + from, (size_t)k * sizeof *out);
            return k;
        }
    }
    return 0;
}

static int32_t ngram_propose(struct splash_proposer *p, const int32_t *history, int32_t n,
                             int32_t max, int32_t *out)
{
    (void)p;
    return splash_ngram_lookup(history, n, NGRAM_MAX, NGRAM_MIN, max, out);
}

static void ngram_destroy(struct splash_proposer *p)
{
    free(p);
}

struct splash_proposer *splash_ngram_proposer_create(void)
{
    struct splash_proposer *p = malloc(sizeof *p);
    if (p)
        *p = (struct splash_proposer){.name = "ngram",
                                      .propose = ngram_propose,
                                      .destroy = ngram_destroy};
    return p;
}

static const char *const mode_names[] = {"off", "auto", "ngram", "mtp", "dflash"};

int splash_spec_mode_parse(const char *s)
{
    for (int i = 0; i < (int)(sizeof mode_names / sizeof *mode_names); i++)
        if (s && !strcmp(s, mode_names[i]))
            return i;
    return -1;
}

const char *splash_spec_mode_name(int mode)
{
    return mode >= 0 && mode < (int)(sizeof mode_names / sizeof *mode_names) ? mode_names[mode]
                                                                             : "?";
}
