/* Streamed experts (server.md "Streamed experts"): a MoE model's routed experts stay in
 * their files, and a store of slots holds as many as its size allows. Layers whose
 * experts have the same parts and formats (a format mix) share one slot layout: a slot
 * holds one expert's gate, up (or fused gate_up) and down rows, each in the layout the
 * kernels read (kernels' expert_pack: the repacked R16 image's bytes), so resident and
 * streamed experts run the same kernels (matmul_experts_at) and give the same bits.
 * Slots lie in chunks of about 1 GiB (smaller for small stores); adaptive replacement
 * (expert_arc.h) recycles them. After a layer's routing, es_load claims slots for the
 * experts it lacks and hands their reads to a pool of reader threads (pread, O_DIRECT
 * with aligned buffers where the file system takes it; an imported stack's planes
 * imported first, by the host), which repack into the slots
 * while the caller runs the resident experts' products; es_wait then checks the files
 * unchanged. A read is tried twice; a failed load fails its command, a changed file
 * every later load too. */
#ifndef SPLASH_FAMILIES_QWEN_MOE_EXPERT_STORE_H
#define SPLASH_FAMILIES_QWEN_MOE_EXPERT_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "splash/family.h"
#include "splash/host.h"
#include "splash/kernels.h"

#define ES_MAX_PARTS 3

/* One layer's routed experts as the store sees them: up to three stacks (gate, up, down;
 * or gate_up, down) of n_expert experts each. */
struct es_layer_src {
    int32_t n_parts;
    int32_t n_expert;
    const struct splash_weight *w[ES_MAX_PARTS];
    const struct splash_tensor_info *t[ES_MAX_PARTS];
    /* a stack an import makes of planes (host->expert_planes), else NULL: read as stored */
    const struct splash_expert_planes *planes[ES_MAX_PARTS];
};

struct es_store;

/* Every routed expert's bytes, and the smallest store: each mix's largest layer's experts
 * (slots, staging and tables counted as es_create counts them). */
void es_sizes(const struct es_layer_src *layers, int32_t n_layers, uint64_t *routed_bytes,
              uint64_t *smallest_bytes);

/* A store of at most `bytes` (rounded down to whole slots; at least the smallest) over
 * the layers' experts. Refuses a size below the smallest, naming both, and experts whose
 * bytes are neither in a file nor imported from planes in files. */
enum splash_status es_create(const struct splash_host *host, const struct es_layer_src *layers,
                             int32_t n_layers, uint64_t bytes, int elastic,
                             struct es_store **out, struct splash_err *err);
void es_destroy(struct es_store *s);

/* Layer il's round: ids[0..n) are the experts its rows route (< 0: none). now[p][e] gets
 * part p's rows of every routed expert resident now, late[p][e] those of the experts
 * being read (both NULL elsewhere; each an array of n_expert the store owns, valid until
 * the next es_load). decode: a decode step's routing (its experts are kept longer). */
enum splash_status es_load(struct es_store *s, int32_t il, const int32_t *ids, int64_t n,
                           int decode, const void *const **now, const void *const **late,
                           int *n_late, struct splash_err *err);
/* Waits for the round's reads and checks their files; an error names the file. */
enum splash_status es_wait(struct es_store *s, struct splash_err *err);
/* Decode read-ahead: starts reading the experts ids[0..n) of layer il (its router's picks
 * from the previous layer's input) that are not resident, into slots recycled first; the
 * next es_load takes them over. A read ahead that fails costs nothing but its slot. */
void es_read_ahead(struct es_store *s, int32_t il, const int32_t *ids, int64_t n);

/* The store's counters, as the family ABI reports them. */
void es_stats_get(const struct es_store *s, struct splash_expert_stats *out);
uint64_t es_bytes(const struct es_store *s);

/* Elastic chunks (elastic = 1 at es_create: the slots above 85% of the store lie in
 * chunks of about 1 GiB that start released; a fixed store has none). Between commands:
 * grow = 1 takes back the first released chunk of at most max_bytes; grow = 0 gives back
 * the last live one above the floor, its experts copied to free slots below it (the
 * ARC's victims evicted to make room). Returns the chunk's bytes, 0 when there is none
 * to take or give (or the store has failed). */
uint64_t es_resize(struct es_store *s, int grow, uint64_t max_bytes);

#endif
