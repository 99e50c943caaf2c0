/* A family's forward step lays its lanes' rows end to end in one activation buffer; these
 * helpers do what every family's step does with them: check a lane, give each lane its
 * first row, gather the token embeddings, add a residual, and hand out the logits of the
 * rows asked for. Family-neutral (the hybrid trunk and gpt_oss use them); names are
 * prefixed step_rows_ because the static plugin archive links every plugin together. */
#ifndef SPLASH_FAMILIES_STEP_ROWS_H
#define SPLASH_FAMILIES_STEP_ROWS_H

#include <stdint.h>

#include "splash/family.h"
#include "splash/host.h"
#include "splash/kernels.h"

/* What forward asks of lane l whatever the family: a sequence (seq_tokens: the tokens it
 * holds) continued at its end, within max_context, with tokens of the vocabulary. Errors
 * name the lane. */
enum splash_status step_rows_check_lane(const struct splash_lane *ln, int32_t l,
                                        int64_t seq_tokens, int64_t max_context, int64_t n_vocab,
                                        struct splash_err *err);

/* Lane l's runs (forward_runs; NULL or n 0: one run): ends growing to the lane's end, the
 * fork slots there when flags are; the slots are set NULL. */
enum splash_status step_rows_check_runs(const struct splash_lane *ln,
                                        const struct splash_lane_runs *ru, int32_t l,
                                        struct splash_err *err);

/* Every lane of a step checked as above (seq_tokens(seq): the tokens a lane's sequence
 * holds, 0 for none), no two lanes extending one sequence; *n_rows = the rows of all lanes. */
enum splash_status step_rows_check_lanes(const struct splash_lane *lanes,
                                         const struct splash_lane_runs *runs, int32_t n_lanes,
                                         int64_t (*seq_tokens)(const void *seq),
                                         int64_t max_context, int64_t n_vocab, int64_t *n_rows,
                                         struct splash_err *err);

/* row0[l] = the first row of lane l; returns the rows of all lanes. */
int64_t step_rows_offsets(const struct splash_lane *lanes, int32_t n_lanes, int64_t *row0);

/* x (rows, n_embd) = each lane's token embeddings at its rows, times the table's scale. */
void step_rows_embed(const struct splash_kernels *k, const struct splash_tensor_ref *tok_embd,
                     const struct splash_lane *lanes, int32_t n_lanes, const int64_t *row0,
                     int64_t n_embd, float *x);

/* x[i] += y[i] for n values, over the pool. */
void step_rows_add(const struct splash_host *host, struct splash_pool *pool, float *x,
                   const float *y, int64_t n);

/* The rows whose logits the lanes ask for (a lane of no tokens asks for none), and in
 * *n_lanes_with how many lanes ask. */
int64_t step_rows_logit_rows(const struct splash_lane *lanes, int32_t n_lanes,
                             int32_t *n_lanes_with);

struct step_rows_head {
    const struct splash_kernels *k;
    struct splash_pool *pool;
    const float *norm;                 /* final RMSNorm weight (n_embd) */
    float eps;
    const struct splash_weight *output; /* the head (n_embd -> n_vocab) */
    int64_t n_embd, n_vocab;
};

/* Each lane's logits (its last row, or all with logits_all): the rows of x gathered into
 * xs (room for m rows), normed, through the head, straight into a single asking lane's
 * buffer or through tmp (m x n_vocab; only read when more than one lane asks). */
void step_rows_logits(const struct step_rows_head *h, const struct splash_lane *lanes,
                      int32_t n_lanes, const int64_t *row0, const float *x, float *xs,
                      float *tmp);

/* The taps a caller asks for (a draft's, family ABI 1.3): ascending layers of a model of
 * n_layers, a row pointer per lane. */
enum splash_status step_rows_check_taps(const struct splash_taps *taps, int64_t n_layers,
                                        struct splash_err *err);

/* Copies the residual stream x (rows of n_embd) of every lane's rows into its taps, at
 * the slot of layer il when the taps ask for it (taps->rows[l], row i: n_layers * n_embd
 * floats, layer slot after slot; a NULL row pointer: none for that lane). */
void step_rows_write_taps(const struct splash_taps *taps, const struct splash_lane *lanes,
                          int32_t n_lanes, const int64_t *row0, const float *x, int64_t n_embd,
                          int64_t il);

/* Restore points a step makes for its lanes' runs (forward_runs), for a family whose
 * point shares the lane's pages from the step's start (the step then writes their rows). */
struct step_rows_points {
    void *model;
    /* a new sequence holding seq's first n_tokens (pages reserved already), or NULL when
     * memory refuses it (the point is then left out) */
    void *(*share)(void *model, void *seq, int64_t n_tokens);
    void (*destroy)(void *model, void *seq);
    void (*keep)(void *model, void *point); /* NULL, or what a point needs once the step is
                                               done */
    void ***forks; /* NULL, or per lane its points (a slot per run, NULL where none) */
};

/* The bytes step_rows_points_begin's tables take for these lanes' runs. */
size_t step_rows_points_bytes(const struct splash_lane_runs *runs, int32_t n_lanes);
/* Makes the points runs ask for at the step's start, its tables in mem (of
 * step_rows_points_bytes, pointer-aligned). */
void step_rows_points_begin(struct step_rows_points *pt, const struct splash_lane *lanes,
                            const struct splash_lane_runs *runs, int32_t n_lanes, void *mem);
/* Hands the points out through runs[l].forks (ok: the step done, each kept) or drops them
 * (it failed). */
void step_rows_points_end(struct step_rows_points *pt, const struct splash_lane_runs *runs,
                          int32_t n_lanes, int ok);

/* A family's step over lanes that fit it (of at most its step's rows). */
typedef enum splash_status (*step_rows_step_fn)(void *model, const struct splash_lane *lanes,
                                                const struct splash_lane_runs *runs,
                                                int32_t n_lanes, const struct splash_taps *taps,
                                                struct splash_err *err);

/* A call of more rows than one step holds, for a family whose steps may start anywhere in
 * a run: each lane run by run, a run in pieces of at most `ubatch` tokens from its start
 * (as a call per run would cut it), the run's restore point (when asked for) taken by the
 * step of its last piece, the lane's logits (n_vocab wide) and taps (taps->n_layers *
 * n_embd wide) at the piece's rows. */
enum splash_status step_rows_pieces(void *model, step_rows_step_fn step,
                                    const struct splash_lane *lanes,
                                    const struct splash_lane_runs *runs, int32_t n_lanes,
                                    const struct splash_taps *taps, int32_t ubatch,
                                    int64_t n_vocab, int64_t n_embd, struct splash_err *err);

/* Rows per parallel task when each row is `width` floats of work: about 16K floats a
 * task, at least one row. */
int64_t step_rows_grain(int64_t width);

#endif
