/* Every call into a family plugin goes through these wrappers: selection by
 * claims and score, and the vtable members with their defaults (an optional
 * member a plugin leaves NULL behaves as documented here, not at call sites). */
#ifndef SPLASH_CORE_FAMILY_H
#define SPLASH_CORE_FAMILY_H

#include "splash/family.h"

struct splash_registry;

/* The family plugin whose claims (GGUF architecture or config model_type) and
 * check_config take this metadata: the highest score wins; equal top scores are an
 * error naming both plugins; a family that claims the architecture and refuses its
 * values returns its error. */
enum splash_status splash_family_select(const struct splash_registry *r, const struct splash_meta *m,
                                        const struct splash_family_plugin **family,
                                        struct splash_family_verdict *verdict,
                                        struct splash_err *err);

/* check_config with r's host; a family without one declines (score 0). */
enum splash_status splash_family_check_config(const struct splash_registry *r,
                                              const struct splash_family_plugin *f,
                                              const struct splash_meta *m,
                                              struct splash_family_verdict *v,
                                              struct splash_err *err);
/* declare_tensors with r's host; refused when the family declares none. A plugin built
 * before ABI 1.3 has its roles mapped to accept masks before emit sees them. */
enum splash_status splash_family_declare_tensors(const struct splash_registry *r,
                                                 const struct splash_family_plugin *f,
                                                 const struct splash_meta *m,
                                                 splash_decl_emit_fn emit, void *ctx,
                                                 struct splash_err *err);
/* The accept mask of a declaration role, as plugins built before ABI 1.3 emit them
 * (0 for a number no role had: nothing is accepted). */
uint32_t splash_decl_role_accept(uint32_t role);

/* The family's size presets (ABI 1.4; NULL from an older plugin or one that has none). */
const struct splash_family_preset *splash_family_presets(const struct splash_family_plugin *f);
/* Holds a family's preset table to family.h's rules (names, claimed architectures, known
 * kinds, arrays within SPLASH_PRESET_MAX_ARRAY); on a fault writes why (naming the preset
 * and key) and returns SPLASH_ERR_INVALID. The loader refuses such a plugin. */
enum splash_status splash_family_presets_check(const struct splash_family_plugin *f, char *why,
                                               size_t why_size);

/* model_create with r's host; refused when the family cannot run models (no
 * model_create or forward). model_info is filled (zeroes when the family has none). */
enum splash_status splash_family_model_create(const struct splash_registry *r,
                                              const struct splash_family_plugin *f,
                                              const struct splash_meta *m,
                                              const struct splash_model_opts *opts, void **model,
                                              struct splash_model_info *info,
                                              struct splash_err *err);
void splash_family_model_destroy(const struct splash_family_plugin *f, void *model);

enum splash_status splash_family_seq_create(const struct splash_family_plugin *f, void *model,
                                            void **seq, struct splash_err *err);
void splash_family_seq_destroy(const struct splash_family_plugin *f, void *model, void *seq);
/* A family without seq_truncate refuses it (SPLASH_ERR_UNSUPPORTED). */
enum splash_status splash_family_seq_truncate(const struct splash_family_plugin *f, void *model,
                                              void *seq, int32_t n_keep, struct splash_err *err);
enum splash_status splash_family_forward(const struct splash_family_plugin *f, void *model,
                                         const struct splash_lane *lanes, int32_t n_lanes,
                                         struct splash_err *err);

/* 1 when the family forks sequences (its KV pages shared copy-on-write). */
int splash_family_can_fork(const struct splash_family_plugin *f);

/* family.h seq_fork; SPLASH_ERR_UNSUPPORTED naming the plugin where it predates ABI 1.2. */
enum splash_status splash_family_seq_fork(const struct splash_family_plugin *f, void *model,
                                          const void *src, int32_t n_tokens, void **dst,
                                          struct splash_err *err);

/* family.h cache_bytes, or where the plugin predates it `counted`, the caller's own
 * count of its sequences' bytes. */
/* The family's streamed experts' store: 1 and *out filled, or 0 (none, or a plugin
 * before ABI 1.4). */
int splash_family_expert_stats(const struct splash_family_plugin *f, const void *model,
                               struct splash_expert_stats *out);
uint64_t splash_family_cache_bytes(const struct splash_family_plugin *f, const void *model,
                                   uint64_t counted);
/* family.h expert_resize: the bytes of the chunk taken (grow 1) or given back (grow 0);
 * 0 when there is none, or the plugin predates ABI 1.5. */
uint64_t splash_family_expert_resize(const struct splash_family_plugin *f, void *model,
                                     int32_t grow, uint64_t max_bytes);

/* 1 when the family writes a draft's taps (family.h forward_taps, ABI 1.3). */
int splash_family_has_taps(const struct splash_family_plugin *f);
/* forward with the taps of every row (family.h forward_taps); taps NULL: forward. A
 * family predating ABI 1.3 refuses taps with SPLASH_ERR_UNSUPPORTED naming the plugin. */
enum splash_status splash_family_forward_taps(const struct splash_family_plugin *f, void *model,
                                              const struct splash_lane *lanes, int32_t n_lanes,
                                              const struct splash_taps *taps,
                                              struct splash_err *err);
/* 1 when the family can drop a verify pass's rejected rows (ABI 1.3 seq_keep_rows). */
int splash_family_can_keep_rows(const struct splash_family_plugin *f);
/* family.h seq_keep_rows; SPLASH_ERR_UNSUPPORTED naming the plugin where it predates ABI 1.3. */
enum splash_status splash_family_seq_keep_rows(const struct splash_family_plugin *f, void *model,
                                               void *seq, int32_t n_rows, struct splash_err *err);
/* 1 when the family takes a lane of several runs in one call (ABI 1.3). */
int splash_family_has_runs(const struct splash_family_plugin *f);
/* family.h forward_runs; SPLASH_ERR_UNSUPPORTED naming the plugin where it predates 1.3. */
enum splash_status splash_family_forward_runs(const struct splash_family_plugin *f, void *model,
                                              const struct splash_lane *lanes,
                                              const struct splash_lane_runs *runs,
                                              int32_t n_lanes, const struct splash_taps *taps,
                                              struct splash_err *err);

/* 1 when the family saves and loads sequences as bytes (ABI 1.3). */
int splash_family_can_save(const struct splash_family_plugin *f);
/* family.h seq_saved_bytes (0 from an older plugin), seq_save and seq_load
 * (SPLASH_ERR_UNSUPPORTED naming the plugin where it predates ABI 1.3). */
uint64_t splash_family_seq_saved_bytes(const struct splash_family_plugin *f, const void *model,
                                       int32_t n_tokens);
enum splash_status splash_family_seq_save(const struct splash_family_plugin *f, void *model,
                                          const void *seq,
                                          int (*write)(void *ctx, const void *bytes, size_t n),
                                          void *ctx, struct splash_err *err);
enum splash_status splash_family_seq_load(const struct splash_family_plugin *f, void *model,
                                          const void *buf, uint64_t size, void **seq,
                                          struct splash_err *err);

/* 1 when the family saves and loads sequences in parts, whole pages and a rest (ABI 1.6,
 * every entry present); 0 where the SSD tier keeps whole seq_save blobs. */
int splash_family_saves_parts(const struct splash_family_plugin *f);
/* family.h seq_save_page, seq_rest_bytes, seq_save_rest and seq_load_parts; call only
 * where splash_family_saves_parts. */
enum splash_status splash_family_seq_save_page(const struct splash_family_plugin *f, void *model,
                                               const void *seq, int64_t page,
                                               int (*write)(void *ctx, const void *bytes,
                                                            size_t n),
                                               void *ctx, struct splash_err *err);
uint64_t splash_family_seq_rest_bytes(const struct splash_family_plugin *f, const void *model,
                                      int32_t n_tokens);
enum splash_status splash_family_seq_save_rest(const struct splash_family_plugin *f, void *model,
                                               const void *seq,
                                               int (*write)(void *ctx, const void *bytes,
                                                            size_t n),
                                               void *ctx, struct splash_err *err);
enum splash_status splash_family_seq_load_parts(const struct splash_family_plugin *f, void *model,
                                                const void *const *pages, int64_t n_pages,
                                                const void *rest, uint64_t rest_size, void **seq,
                                                struct splash_err *err);

#endif
