/* The candidate selector walk: per proposal row, the top candidates of the softcapped
 * logits (the unary scores) plus a rank-256 pairwise term between the previous token's
 * predecessor code and each candidate's successor code, weighted by the row's projected
 * hidden state. The walk starts at the anchor and follows the chosen proposals. */
#include <math.h>
#include <string.h>

#include "families/drafts/dflash2/dflash2.h"

/* The k largest of x[0..n) (ties: the lower index first), best first. */
static void top_k(const float *x, int64_t n, int32_t k, int32_t *idx)
{
    int32_t have = 0;
    for (int64_t i = 0; i < n; i++) {
        if (have == k && !(x[i] > x[idx[k - 1]]))
            continue;
        int32_t j = have < k ? have++ : k - 1;
        while (j > 0 && x[i] > x[idx[j - 1]]) {
            idx[j] = idx[j - 1];
            j--;
        }
        idx[j] = (int32_t)i;
    }
}

enum splash_status dflash2_select(struct dflash2_model *m, const float *logits, const float *hn,
                                  int32_t n, const struct splash_draft_block *b,
                                  struct splash_err *err)
{
    const int64_t V = m->cfg.n_vocab;
    float hp[8 * DFLASH2_RANK]; /* up to 8 rows of rank floats */
    if (n > 8)
        return splash_err_set(err, SPLASH_ERR_INVALID, "draft block: %d rows", n);
    m->k->matmul(m->pool, m->sel_proj.w, hn, n, hp);
    int32_t prev = b->anchor;
    for (int32_t r = 0; r < n; r++) {
        const float *l = logits + (int64_t)r * V, *h = hp + r * DFLASH2_RANK;
        int32_t cand[DFLASH2_TOP_K];
        float score[DFLASH2_TOP_K], prob[DFLASH2_TOP_K];
        top_k(l, V, DFLASH2_TOP_K, cand);
        /* pred[prev] * hp, then its dot with each candidate's successor code */
        float ph[DFLASH2_RANK];
        const float *pred = m->pred_book + (int64_t)prev * DFLASH2_RANK;
        for (int i = 0; i < DFLASH2_RANK; i++)
            ph[i] = pred[i] * h[i];
        float best = -INFINITY;
        int32_t arg = 0;
        for (int j = 0; j < DFLASH2_TOP_K; j++) {
            const float *succ = m->succ_book + (int64_t)cand[j] * DFLASH2_RANK;
            float s = 0.0f;
            for (int i = 0; i < DFLASH2_RANK; i++)
                s += ph[i] * succ[i];
            score[j] = l[cand[j]] + s;
            if (score[j] > best) {
                best = score[j];
                arg = j;
            }
        }
        if (!isfinite(best))
            return splash_err_set(err, SPLASH_ERR_INVALID,
                                  "draft block: row %d's selector scores are not finite", r + 1);
        float sum = 0.0f;
        for (int j = 0; j < DFLASH2_TOP_K; j++)
            sum += prob[j] = expf(score[j] - best);
        for (int j = 0; j < DFLASH2_TOP_K; j++)
            prob[j] /= sum;
        /* candidates best first: by score */
        int32_t order[DFLASH2_TOP_K];
        top_k(score, DFLASH2_TOP_K, DFLASH2_TOP_K, order);
        int32_t pick = arg;
        if (b->uniforms) {
            float u = b->uniforms[r], acc = 0.0f;
            pick = order[DFLASH2_TOP_K - 1];
            for (int j = 0; j < DFLASH2_TOP_K; j++) {
                acc += prob[order[j]];
                if (u < acc) {
                    pick = order[j];
                    break;
                }
            }
        }
        b->tokens[r] = cand[pick];
        for (int j = 0; j < DFLASH2_TOP_K; j++) {
            if (b->cand_tokens)
                b->cand_tokens[r * DFLASH2_TOP_K + j] = cand[order[j]];
            if (b->cand_probs)
                b->cand_probs[r * DFLASH2_TOP_K + j] = prob[order[j]];
        }
        if (b->confidence)
            b->confidence[r] = prob[arg];
        prev = cand[pick];
    }
    return SPLASH_OK;
}
