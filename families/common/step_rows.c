/* The lane bookkeeping of a family's forward step (step_rows.h). */
#include <string.h>

#include "families/common/step_rows.h"

enum splash_status step_rows_check_lane(const struct splash_lane *ln, int32_t l,
                                        int64_t seq_tokens, int64_t max_context, int64_t n_vocab,
                                        struct splash_err *err)
{
    if (!ln->seq || ln->n_tokens < 0 || (ln->n_tokens && !ln->tokens))
        return splash_err_set(err, SPLASH_ERR_INVALID, "lane %d: no sequence or tokens", l);
    if (ln->pos0 != seq_tokens)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "lane %d: position %d, the sequence holds %lld tokens", l, ln->pos0,
                              (long long)seq_tokens);
    if ((int64_t)ln->pos0 + ln->n_tokens > max_context)
        return splash_err_set(err, SPLASH_ERR_NOMEM,
                              "lane %d: %lld tokens exceed the context of %lld", l,
                              (long long)ln->pos0 + ln->n_tokens, (long long)max_context);
    for (int32_t i = 0; i < ln->n_tokens; i++)
        if (ln->tokens[i] < 0 || ln->tokens[i] >= n_vocab)
            return splash_err_set(err, SPLASH_ERR_INVALID, "lane %d: token %d out of range", l,
                                  ln->tokens[i]);
    return SPLASH_OK;
}

enum splash_status step_rows_check_runs(const struct splash_lane *ln,
                                        const struct splash_lane_runs *ru, int32_t l,
                                        struct splash_err *err)
{
    if (!ru || ru->n == 0)
        return SPLASH_OK;
    if (ru->n < 0 || !ru->ends || (ru->fork && !ru->forks))
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "lane %d: %d runs without their ends or fork slots", l, ru->n);
    for (int32_t k = 0; k < ru->n; k++)
        if (ru->ends[k] <= (k ? ru->ends[k - 1] : 0) ||
            (k == ru->n - 1 && ru->ends[k] != ln->n_tokens))
            return splash_err_set(err, SPLASH_ERR_INVALID,
                                  "lane %d: run %d ends at %d (runs must grow and end at the "
                                  "lane's %d tokens)",
                                  l, k, ru->ends[k], ln->n_tokens);
    if (ru->fork)
        for (int32_t k = 0; k < ru->n; k++)
            ru->forks[k] = NULL;
    return SPLASH_OK;
}

enum splash_status step_rows_check_lanes(const struct splash_lane *lanes,
                                         const struct splash_lane_runs *runs, int32_t n_lanes,
                                         int64_t (*seq_tokens)(const void *seq),
                                         int64_t max_context, int64_t n_vocab, int64_t *n_rows,
                                         struct splash_err *err)
{
    int64_t n = 0;
    for (int32_t l = 0; l < n_lanes; l++) {
        const struct splash_lane *ln = &lanes[l];
        enum splash_status st = step_rows_check_lane(ln, l, ln->seq ? seq_tokens(ln->seq) : 0,
                                                     max_context, n_vocab, err);
        if (st || (st = step_rows_check_runs(ln, runs ? &runs[l] : NULL, l, err)))
            return st;
        for (int32_t j = 0; j < l; j++)
            if (lanes[j].seq == ln->seq && ln->n_tokens && lanes[j].n_tokens)
                return splash_err_set(err, SPLASH_ERR_INVALID,
                                      "lanes %d and %d extend the same sequence", j, l);
        n += ln->n_tokens;
    }
    *n_rows = n;
    return SPLASH_OK;
}

int64_t step_rows_offsets(const struct splash_lane *lanes, int32_t n_lanes, int64_t *row0)
{
    int64_t r = 0;
    for (int32_t l = 0; l < n_lanes; l++) {
        row0[l] = r;
        r += lanes[l].n_tokens;
    }
    return r;
}

void step_rows_embed(const struct splash_kernels *k, const struct splash_tensor_ref *tok_embd,
                     const struct splash_lane *lanes, int32_t n_lanes, const int64_t *row0,
                     int64_t n_embd, float *x)
{
    int64_t n = 0;
    for (int32_t l = 0; l < n_lanes; l++) {
        k->embed_rows(tok_embd->t, lanes[l].tokens, lanes[l].n_tokens, x + row0[l] * n_embd);
        n += lanes[l].n_tokens;
    }
    if (tok_embd->scale != 1.0f)
        for (int64_t i = 0; i < n * n_embd; i++)
            x[i] *= tok_embd->scale;
}

struct add_task {
    float *x;
    const float *y;
};

static void add_range(void *ctx, int64_t begin, int64_t end, int thread)
{
    const struct add_task *t = ctx;
    for (int64_t i = begin; i < end; i++)
        t->x[i] += t->y[i];
}

void step_rows_add(const struct splash_host *host, struct splash_pool *pool, float *x,
                   const float *y, int64_t n)
{
    struct add_task t = {.x = x, .y = y};
    host->parallel_for(pool, n, 8192, add_range, &t);
}

/* A lane of no tokens has no row to give logits from: its buffer is left as it was. */
static int wants_logits(const struct splash_lane *ln)
{
    return ln->logits && ln->n_tokens > 0;
}

int64_t step_rows_logit_rows(const struct splash_lane *lanes, int32_t n_lanes,
                             int32_t *n_lanes_with)
{
    int64_t m = 0;
    *n_lanes_with = 0;
    for (int32_t l = 0; l < n_lanes; l++)
        if (wants_logits(&lanes[l])) {
            m += lanes[l].logits_all ? lanes[l].n_tokens : 1;
            (*n_lanes_with)++;
        }
    return m;
}

void step_rows_logits(const struct step_rows_head *h, const struct splash_lane *lanes,
                      int32_t n_lanes, const int64_t *row0, const float *x, float *xs,
                      float *tmp)
{
    int64_t E = h->n_embd, V = h->n_vocab;
    int32_t with;
    int64_t m = step_rows_logit_rows(lanes, n_lanes, &with);
    if (!m)
        return;
    /* the rows asked for, in lane order */
    int64_t r = 0;
    for (int32_t l = 0; l < n_lanes; l++) {
        const struct splash_lane *ln = &lanes[l];
        if (!wants_logits(ln))
            continue;
        for (int64_t i = ln->logits_all ? 0 : ln->n_tokens - 1; i < ln->n_tokens; i++, r++)
            memcpy(xs + r * E, x + (row0[l] + i) * E, (size_t)E * sizeof(float));
    }
    h->k->rmsnorm(h->pool, xs, E, h->norm, xs, E, m, E, h->eps);
    if (with == 1) {
        /* straight into the lane's buffer */
        for (int32_t l = 0; l < n_lanes; l++)
            if (wants_logits(&lanes[l]))
                h->k->matmul(h->pool, h->output, xs, m, lanes[l].logits);
        return;
    }
    h->k->matmul(h->pool, h->output, xs, m, tmp);
    r = 0;
    for (int32_t l = 0; l < n_lanes; l++) {
        const struct splash_lane *ln = &lanes[l];
        if (!wants_logits(ln))
            continue;
        int64_t rows = ln->logits_all ? ln->n_tokens : 1;
        memcpy(ln->logits, tmp + r * V, (size_t)(rows * V) * sizeof(float));
        r += rows;
    }
}

int64_t step_rows_grain(int64_t width)
{
    int64_t g = 16384 / (width > 0 ? width : 1);
    return g < 1 ? 1 : g;
}

enum splash_status step_rows_check_taps(const struct splash_taps *taps, int64_t n_layers,
                                        struct splash_err *err)
{
    if (taps->size < sizeof *taps || taps->n_layers <= 0 || !taps->layers || !taps->rows)
        return splash_err_set(err, SPLASH_ERR_INVALID, "taps: no layers or rows");
    for (int32_t i = 0; i < taps->n_layers; i++)
        if (taps->layers[i] < 0 || taps->layers[i] >= n_layers ||
            (i && taps->layers[i] <= taps->layers[i - 1]))
            return splash_err_set(err, SPLASH_ERR_INVALID,
                                  "taps: layer %d is not one of %lld layers in ascending order",
                                  taps->layers[i], (long long)n_layers);
    return SPLASH_OK;
}

void step_rows_write_taps(const struct splash_taps *taps, const struct splash_lane *lanes,
                          int32_t n_lanes, const int64_t *row0, const float *x, int64_t n_embd,
                          int64_t il)
{
    int32_t slot = 0;
    while (slot < taps->n_layers && taps->layers[slot] != il)
        slot++;
    if (slot == taps->n_layers)
        return;
    int64_t width = (int64_t)taps->n_layers * n_embd;
    for (int32_t l = 0; l < n_lanes; l++) {
        float *rows = taps->rows[l];
        if (!rows)
            continue;
        for (int32_t i = 0; i < lanes[l].n_tokens; i++)
            memcpy(rows + i * width + (int64_t)slot * n_embd, x + (row0[l] + i) * n_embd,
                   (size_t)n_embd * sizeof(float));
    }
}

enum splash_status step_rows_pieces(void *model, step_rows_step_fn step,
                                    const struct splash_lane *lanes,
                                    const struct splash_lane_runs *runs, int32_t n_lanes,
                                    const struct splash_taps *taps, int32_t ubatch,
                                    int64_t n_vocab, int64_t n_embd, struct splash_err *err)
{
    int64_t tap_width = taps ? (int64_t)taps->n_layers * n_embd : 0;
    for (int32_t l = 0; l < n_lanes; l++) {
        const struct splash_lane *ln = &lanes[l];
        const struct splash_lane_runs *ru = runs && runs[l].n ? &runs[l] : NULL;
        for (int32_t r = 0, from = 0; r < (ru ? ru->n : 1); r++) {
            int32_t to = ru ? ru->ends[r] : ln->n_tokens;
            for (int32_t off = from; off < to; off += ubatch) {
                int32_t len = to - off < ubatch ? to - off : ubatch;
                int last = off + len == ln->n_tokens;
                struct splash_lane sub = {.seq = ln->seq,
                                          .tokens = ln->tokens + off,
                                          .n_tokens = len,
                                          .pos0 = ln->pos0 + off,
                                          .logits_all = ln->logits_all};
                if (ln->logits && ln->logits_all)
                    sub.logits = ln->logits + (size_t)off * (size_t)n_vocab;
                else if (ln->logits && last)
                    sub.logits = ln->logits;
                /* this piece's rows of the lane's taps */
                float *tap_rows =
                    taps && taps->rows[l] ? taps->rows[l] + (int64_t)off * tap_width : NULL;
                const struct splash_taps sub_taps = {.size = sizeof sub_taps,
                                                     .n_layers = taps ? taps->n_layers : 0,
                                                     .layers = taps ? taps->layers : NULL,
                                                     .rows = &tap_rows};
                /* the run's restore point, if asked for, at its last piece's end */
                const uint8_t want = 1;
                struct splash_lane_runs point = {.n = 1, .ends = &len, .fork = &want,
                                                 .forks = ru && ru->fork ? &ru->forks[r] : NULL};
                int at_end = off + len == to && ru && ru->fork && ru->fork[r];
                enum splash_status st = step(model, &sub, at_end ? &point : NULL, 1,
                                             taps ? &sub_taps : NULL, err);
                if (st)
                    return st;
            }
            from = to;
        }
    }
    return SPLASH_OK;
}

size_t step_rows_points_bytes(const struct splash_lane_runs *runs, int32_t n_lanes)
{
    size_t n = 0;
    for (int32_t l = 0; runs && l < n_lanes; l++)
        n += runs[l].fork ? (size_t)runs[l].n : 0;
    return ((size_t)n_lanes + n) * sizeof(void *);
}

void step_rows_points_begin(struct step_rows_points *pt, const struct splash_lane *lanes,
                            const struct splash_lane_runs *runs, int32_t n_lanes, void *mem)
{
    void ***slots = mem;
    void **all = (void **)(slots + n_lanes);
    pt->forks = NULL;
    for (int32_t l = 0; l < n_lanes; l++) {
        const struct splash_lane_runs *ru = runs ? &runs[l] : NULL;
        slots[l] = NULL;
        if (!ru || !ru->fork)
            continue;
        slots[l] = all;
        for (int32_t r = 0; r < ru->n; r++)
            all[r] = ru->fork[r] ? pt->share(pt->model, lanes[l].seq,
                                             (int64_t)lanes[l].pos0 + ru->ends[r])
                                 : NULL;
        all += ru->n;
        pt->forks = slots;
    }
}

void step_rows_points_end(struct step_rows_points *pt, const struct splash_lane_runs *runs,
                          int32_t n_lanes, int ok)
{
    for (int32_t l = 0; pt->forks && l < n_lanes; l++) {
        if (!pt->forks[l])
            continue;
        for (int32_t r = 0; r < runs[l].n; r++) {
            void *point = pt->forks[l][r];
            if (ok && point && pt->keep)
                pt->keep(pt->model, point);
            if (!ok && point)
                pt->destroy(pt->model, point);
            runs[l].forks[r] = ok ? point : NULL;
        }
    }
}
