/* --expert-memory at the engine's start (server.md "Streamed experts"): off loads every
 * routed expert; a SIZE streams them through a store of that size; auto loads them whole
 * where the budget holds them beside the context's KV (--max-context, or at most the
 * first 64K tokens), else streams them through a store of what that leaves, at least the
 * smallest store. Auto learns a MoE's sizes from a first load at the smallest store (only
 * its other weights load) and loads again with the store it chose. */
#ifndef SPLASH_ENGINE_EXPERT_MEMORY_H
#define SPLASH_ENGINE_EXPERT_MEMORY_H

#include <stddef.h>
#include <stdint.h>

#include "core/memory_plan.h"
#include "core/model_load.h"

/* The KV allowance auto keeps beside the experts when no --max-context asks for more. */
#define SPLASH_EXPERT_AUTO_CONTEXT 65536

/* expert_memory: 0 auto, UINT64_MAX off, else bytes. line gets the startup line (empty
 * for a model without routed experts). */
enum splash_status splash_expert_memory_load(const struct splash_registry *reg, const char *path,
                                             const struct splash_model_opts *mo, int n_threads,
                                             uint64_t expert_memory, int64_t max_context,
                                             int32_t lanes, const struct splash_memory_budget *b,
                                             struct splash_loaded_model **out, char *line,
                                             size_t line_size, struct splash_err *err);

#endif
