/* The streamed experts' store (see expert_store.h). */
#include "families/qwen_moe/expert_store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "families/qwen_moe/expert_arc.h"
#include "families/qwen_moe/expert_reader.h"
#include "splash/family.h"

#define ES_CHUNK_BYTES (1ull << 30)
/* a store smaller than this many 1 GiB chunks takes chunks of a quarter of its slots */
#define ES_SMALL_CHUNKS 4
#define ES_SLOT_ALIGN 64
#define ES_MAX_LAYERS 256
/* an elastic store's floor: the share of its slots it never gives back */
#define ES_FLOOR_SHARE 0.85

/* Layers whose experts share parts, formats and shapes: one slot layout. */
struct es_mix {
    int32_t n_parts;
    int32_t n_expert;                 /* the largest layer's */
    size_t part_bytes[ES_MAX_PARTS];  /* one expert's, per part */
    size_t part_off[ES_MAX_PARTS];    /* in a slot */
    size_t slot_bytes;
    int32_t n_layers;                 /* layers of the mix: keys are (index, expert) */
    int32_t n_slots, slots_per_chunk, n_chunks;
    int32_t first_chunk_slots; /* chunk 0 (an elastic store's floor); the rest slots_per_chunk */
    int32_t floor_chunks;      /* chunks never given back */
    int32_t live_chunks, live_slots; /* chunks 0..live_chunks hold memory */
    char **chunks;
    struct es_arc arc;
    int32_t *slot_key;                /* slot -> key, -1 when free */
};

struct es_layer {
    int32_t mix, index; /* its mix and its index among the mix's layers */
    struct es_layer_src src;
    struct er_part part[ES_MAX_PARTS];             /* expert 0's extents in their files */
    uint64_t stride[ES_MAX_PARTS][ER_MAX_EXTENTS]; /* expert e's at off + e * stride */
};

struct es_store {
    const struct splash_host *host;
    struct es_layer *layers;
    int32_t n_layers;
    struct es_mix *mixes;
    int32_t n_mixes;
    struct er_file *files;
    int32_t n_files;
    struct er_pool readers;
    int readers_on;
    /* the current round */
    uint32_t epoch;
    uint32_t *stamp[16];        /* per mix (at most 16 mixes), per key: the round routing it */
    uint32_t *ahead_stamp[16];  /* per mix, per key: the read-ahead that read it */
    const void **now[ES_MAX_PARTS], **late[ES_MAX_PARTS]; /* max_expert each */
    int32_t max_expert;
    struct er_job *jobs;
    int32_t n_jobs;
    struct er_job *ahead;       /* a read-ahead in flight (the pool runs one batch at a time) */
    int32_t n_ahead;
    uint32_t ahead_epoch;       /* the stamp its experts got */
    int decode;
    double wait_started;
    uint64_t bytes;             /* slots, staging and tables */
    uint64_t staging_bytes, arena_bytes;
    struct splash_expert_stats st;
    int failed;
};

#define ES_MAX_MIXES 16

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static size_t expert_bytes(const struct splash_tensor_info *t)
{
    return (size_t)(t->n_bytes / (uint64_t)(t->ne[2] > 0 ? t->ne[2] : 1));
}

static size_t round_up(size_t v, size_t a)
{
    return (v + a - 1) / a * a;
}

static int same_mix(const struct es_layer_src *a, const struct es_layer_src *b)
{
    if (a->n_parts != b->n_parts)
        return 0;
    for (int32_t p = 0; p < a->n_parts; p++)
        if (a->t[p]->format != b->t[p]->format || a->t[p]->ne[0] != b->t[p]->ne[0] ||
            a->t[p]->ne[1] != b->t[p]->ne[1] || expert_bytes(a->t[p]) != expert_bytes(b->t[p]))
            return 0;
    return 1;
}

/* The mixes of the layers: mix_of[il], and each mix's first layer in first[]. */
static int32_t find_mixes(const struct es_layer_src *layers, int32_t n_layers, int32_t *mix_of,
                          int32_t *first)
{
    int32_t n = 0;
    for (int32_t il = 0; il < n_layers; il++) {
        int32_t m = 0;
        while (m < n && !same_mix(&layers[first[m]], &layers[il]))
            m++;
        if (m == n) {
            if (n == ES_MAX_MIXES)
                return -1;
            first[n++] = il;
        }
        mix_of[il] = m;
    }
    return n;
}

static size_t slot_bytes_of(const struct es_layer_src *l)
{
    size_t b = 0;
    for (int32_t p = 0; p < l->n_parts; p++)
        b += round_up(expert_bytes(l->t[p]), ES_SLOT_ALIGN);
    return b;
}

/* Part p of layer l's experts as the readers take it, without its places: one extent as
 * stored, or the planes an import makes it of. */
static void part_shape(const struct es_layer_src *l, int32_t p, struct er_part *out)
{
    memset(out, 0, sizeof *out);
    const struct splash_expert_planes *pl = l->planes[p];
    out->rows_bytes = expert_bytes(l->t[p]);
    if (!pl) {
        out->n_ext = 1;
        out->bytes[0] = out->rows_bytes;
        return;
    }
    out->import = pl;
    out->n_ext = pl->n_planes;
    for (int32_t x = 0; x < pl->n_planes; x++)
        out->bytes[x] = (size_t)pl->expert_bytes[x];
}

/* One reader's staging: what the largest part takes. */
static size_t staging_per_reader(const struct es_layer_src *layers, int32_t n_layers)
{
    size_t m = 0;
    for (int32_t il = 0; il < n_layers; il++)
        for (int32_t p = 0; p < layers[il].n_parts; p++) {
            struct er_part part;
            part_shape(&layers[il], p, &part);
            if (er_staging_bytes(&part) > m)
                m = er_staging_bytes(&part);
        }
    return m;
}

/* What the store holds besides its slots: the readers' staging and the tables. */
static uint64_t overhead_bytes(const struct es_layer_src *layers, int32_t n_layers, int readers)
{
    uint64_t keys = 0, max_expert = 0;
    for (int32_t il = 0; il < n_layers; il++) {
        keys += (uint64_t)layers[il].n_expert;
        if ((uint64_t)layers[il].n_expert > max_expert)
            max_expert = (uint64_t)layers[il].n_expert;
    }
    uint64_t tables = keys * (sizeof(struct es_arc_node) + 2 * sizeof(int32_t) + sizeof(uint32_t)) +
                      max_expert * (2 * ES_MAX_PARTS * sizeof(void *) + sizeof(struct er_job));
    return (uint64_t)readers * staging_per_reader(layers, n_layers) + tables;
}

void es_sizes(const struct es_layer_src *layers, int32_t n_layers, uint64_t *routed_bytes,
              uint64_t *smallest_bytes)
{
    int32_t mix_of[ES_MAX_LAYERS], first[ES_MAX_MIXES];
    int32_t n_mixes = n_layers <= ES_MAX_LAYERS ? find_mixes(layers, n_layers, mix_of, first) : -1;
    struct splash_err ignored = {{0}};
    int readers = er_readers(&ignored); /* es_create refuses a bad count */
    uint64_t routed = 0,
             smallest = overhead_bytes(layers, n_layers, readers > 0 ? readers : 1);
    for (int32_t il = 0; il < n_layers; il++)
        for (int32_t p = 0; p < layers[il].n_parts; p++)
            routed += layers[il].t[p]->n_bytes;
    for (int32_t m = 0; m < n_mixes; m++) {
        int32_t most = 0;
        for (int32_t il = 0; il < n_layers; il++)
            if (mix_of[il] == m && layers[il].n_expert > most)
                most = layers[il].n_expert;
        smallest += (uint64_t)most * slot_bytes_of(&layers[first[m]]);
    }
    *routed_bytes = routed;
    *smallest_bytes = n_mixes < 0 ? UINT64_MAX : smallest;
}

static void mix_free(const struct splash_host *host, struct es_mix *m)
{
    for (int32_t c = 0; m->chunks && c < m->n_chunks; c++)
        if (m->chunks[c])
            host->free_aligned(m->chunks[c]);
    free(m->chunks);
    free(m->slot_key);
    es_arc_free(&m->arc);
}

void es_destroy(struct es_store *s)
{
    if (!s)
        return;
    if (s->readers_on)
        er_pool_stop(&s->readers);
    for (int32_t m = 0; m < s->n_mixes; m++) {
        mix_free(s->host, &s->mixes[m]);
        free(s->stamp[m]);
        free(s->ahead_stamp[m]);
    }
    for (int p = 0; p < ES_MAX_PARTS; p++) {
        free(s->now[p]);
        free(s->late[p]);
    }
    er_files_close(s->files, s->n_files);
    free(s->mixes);
    free(s->layers);
    free(s->jobs);
    free(s->ahead);
    free(s);
}

/* Chunk c's first slot and its slots. */
static int32_t chunk_lo(const struct es_mix *m, int32_t c)
{
    return c == 0 ? 0 : m->first_chunk_slots + (c - 1) * m->slots_per_chunk;
}

static int32_t chunk_slots(const struct es_mix *m, int32_t c)
{
    int32_t hi = c + 1 < m->n_chunks ? chunk_lo(m, c + 1) : m->n_slots;
    return hi - chunk_lo(m, c);
}

static enum splash_status chunk_alloc(const struct splash_host *host, struct es_mix *m, int32_t c,
                                      struct splash_err *err)
{
    size_t bytes = (size_t)chunk_slots(m, c) * m->slot_bytes;
    m->chunks[c] = host->alloc_aligned(4096, bytes);
    if (!m->chunks[c])
        return splash_err_set(err, SPLASH_ERR_NOMEM,
                              "out of memory for the expert store's chunk %d (%.1f MiB)", c,
                              (double)bytes / 1048576.0);
    return SPLASH_OK;
}

/* The mix's slots in chunks. A fixed store: about 1 GiB each, a quarter of the slots each
 * in a small store. An elastic one: its floor (85% of the slots, at least a layer's
 * experts) in chunk 0, the rest in chunks of about 1 GiB, which start released. */
static enum splash_status mix_alloc(const struct splash_host *host, struct es_mix *m,
                                    int32_t n_slots, int elastic, struct splash_err *err)
{
    m->n_slots = n_slots;
    int32_t floor = n_slots;
    if (elastic) {
        floor = (int32_t)((double)n_slots * ES_FLOOR_SHARE + 0.999);
        if (floor < m->n_expert)
            floor = m->n_expert;
        if (floor > n_slots)
            floor = n_slots;
    }
    if (floor < n_slots) {
        uint64_t per = ES_CHUNK_BYTES / m->slot_bytes;
        per = per ? per : 1;
        uint64_t above = (uint64_t)(n_slots - floor);
        m->slots_per_chunk = (int32_t)(per < above ? per : above);
        m->first_chunk_slots = floor;
        m->n_chunks = 1 + (n_slots - floor + m->slots_per_chunk - 1) / m->slots_per_chunk;
        m->floor_chunks = 1;
    } else {
        uint64_t per = ES_CHUNK_BYTES / m->slot_bytes;
        if ((uint64_t)n_slots * m->slot_bytes < ES_SMALL_CHUNKS * ES_CHUNK_BYTES)
            per = ((uint64_t)n_slots + ES_SMALL_CHUNKS - 1) / ES_SMALL_CHUNKS;
        m->slots_per_chunk = (int32_t)(per ? per : 1);
        m->first_chunk_slots = m->slots_per_chunk;
        m->n_chunks = (n_slots + m->slots_per_chunk - 1) / m->slots_per_chunk;
        m->floor_chunks = m->n_chunks;
    }
    m->chunks = calloc((size_t)m->n_chunks, sizeof *m->chunks);
    m->slot_key = malloc((size_t)n_slots * sizeof *m->slot_key);
    if (!m->chunks || !m->slot_key || es_arc_init(&m->arc, n_slots, m->n_layers * m->n_expert))
        return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory for the expert store");
    for (int32_t s = 0; s < n_slots; s++)
        m->slot_key[s] = -1;
    for (int32_t c = 0; c < m->floor_chunks; c++) {
        enum splash_status st = chunk_alloc(host, m, c, err);
        if (st)
            return st;
    }
    m->live_chunks = m->floor_chunks;
    m->live_slots = m->live_chunks < m->n_chunks ? chunk_lo(m, m->live_chunks) : n_slots;
    es_arc_set_slots(&m->arc, m->live_slots);
    return SPLASH_OK;
}

static char *slot_at(const struct es_mix *m, int32_t slot)
{
    if (slot < m->first_chunk_slots)
        return m->chunks[0] + (size_t)slot * m->slot_bytes;
    int32_t r = slot - m->first_chunk_slots;
    return m->chunks[1 + r / m->slots_per_chunk] + (size_t)(r % m->slots_per_chunk) * m->slot_bytes;
}

/* The store's live chunks, slots and arena in its counters. */
static void count_live(struct es_store *s)
{
    s->st.chunks = s->st.slots = 0;
    s->arena_bytes = 0;
    for (int32_t k = 0; k < s->n_mixes; k++) {
        const struct es_mix *m = &s->mixes[k];
        s->st.chunks += m->live_chunks;
        s->st.slots += m->live_slots;
        s->arena_bytes += (uint64_t)m->live_slots * m->slot_bytes;
    }
    s->st.arena_bytes = s->arena_bytes;
}

enum splash_status es_create(const struct splash_host *host, const struct es_layer_src *layers,
                             int32_t n_layers, uint64_t bytes, int elastic,
                             struct es_store **out, struct splash_err *err)
{
    uint64_t routed, smallest;
    int readers = er_readers(err);
    if (readers < 0)
        return SPLASH_ERR_INVALID;
    if (n_layers > ES_MAX_LAYERS)
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                              "%d MoE layers: experts stream for at most %d", n_layers,
                              ES_MAX_LAYERS);
    es_sizes(layers, n_layers, &routed, &smallest);
    if (smallest == UINT64_MAX)
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                              "more than %d expert format mixes: experts are not streamed",
                              ES_MAX_MIXES);
    if (bytes == SPLASH_EXPERTS_SMALLEST)
        bytes = smallest;
    if (bytes < smallest)
        return splash_err_set(err, SPLASH_ERR_NOMEM,
                              "--expert-memory: %.2f MiB is below one layer's experts of each "
                              "format mix (%.2f MiB with the readers' staging)",
                              (double)bytes / 1048576.0, (double)smallest / 1048576.0);
    struct es_store *s = calloc(1, sizeof *s);
    if (!s)
        return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory");
    s->host = host;
    s->n_layers = n_layers;
    s->layers = calloc((size_t)n_layers, sizeof *s->layers);
    s->mixes = calloc(ES_MAX_MIXES, sizeof *s->mixes);
    enum splash_status st = SPLASH_OK;
    if (!s->layers || !s->mixes) {
        st = splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory");
        goto fail;
    }
    int32_t mix_of[ES_MAX_LAYERS], first[ES_MAX_MIXES];
    s->n_mixes = find_mixes(layers, n_layers, mix_of, first);
    /* each expert's place in its file */
    for (int32_t il = 0; il < n_layers; il++) {
        struct es_layer *L = &s->layers[il];
        L->src = layers[il];
        L->mix = mix_of[il];
        struct es_mix *m = &s->mixes[L->mix];
        L->index = m->n_layers++;
        if (layers[il].n_expert > m->n_expert)
            m->n_expert = layers[il].n_expert;
        if (layers[il].n_expert > s->max_expert)
            s->max_expert = layers[il].n_expert;
        for (int32_t p = 0; p < layers[il].n_parts; p++) {
            const struct splash_tensor_info *t = layers[il].t[p];
            const struct splash_expert_planes *pl = layers[il].planes[p];
            struct er_part *part = &L->part[p];
            part_shape(&layers[il], p, part);
            for (int32_t x = 0; x < part->n_ext; x++) {
                char path[1024];
                if (pl) {
                    snprintf(path, sizeof path, "%s", pl->path[x]);
                    part->off[x] = pl->off[x];
                    L->stride[p][x] = pl->expert_bytes[x];
                } else if (host->locate_bytes(t->data, t->n_bytes, path, sizeof path,
                                              &part->off[x])) {
                    st = splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                                        "%s: its bytes are not read from a model file as stored "
                                        "(an imported checkpoint): its experts cannot stream",
                                        t->name);
                    goto fail;
                } else {
                    L->stride[p][x] = expert_bytes(t);
                }
                if ((part->file[x] = er_file_open(&s->files, &s->n_files, path, err)) < 0) {
                    st = SPLASH_ERR_IO;
                    goto fail;
                }
            }
        }
    }
    /* slots: each mix its smallest, the rest shared in proportion to what each lacks */
    uint64_t overhead = overhead_bytes(layers, n_layers, readers);
    uint64_t left = bytes - overhead, lacking = 0;
    int32_t slots[ES_MAX_MIXES];
    for (int32_t k = 0; k < s->n_mixes; k++) {
        struct es_mix *m = &s->mixes[k];
        const struct es_layer_src *l = &layers[first[k]];
        m->n_parts = l->n_parts;
        size_t off = 0;
        for (int32_t p = 0; p < l->n_parts; p++) {
            m->part_bytes[p] = expert_bytes(l->t[p]);
            m->part_off[p] = off;
            off += round_up(m->part_bytes[p], ES_SLOT_ALIGN);
        }
        m->slot_bytes = off;
        slots[k] = m->n_expert;
        left -= (uint64_t)m->n_expert * m->slot_bytes;
        lacking += (uint64_t)(m->n_layers - 1) * (uint64_t)m->n_expert * m->slot_bytes;
    }
    for (int32_t k = 0; k < s->n_mixes && lacking; k++) {
        struct es_mix *m = &s->mixes[k];
        uint64_t mine = (uint64_t)(m->n_layers - 1) * (uint64_t)m->n_expert * m->slot_bytes;
        uint64_t give = (uint64_t)((double)left * ((double)mine / (double)lacking));
        uint64_t extra = give / m->slot_bytes;
        uint64_t most = (uint64_t)m->n_layers * (uint64_t)m->n_expert;
        slots[k] = (int32_t)((uint64_t)slots[k] + extra < most ? (uint64_t)slots[k] + extra : most);
    }
    s->staging_bytes = (uint64_t)readers * staging_per_reader(layers, n_layers);
    s->bytes = overhead;
    uint64_t cap_arena = 0, floor_arena = 0;
    for (int32_t k = 0; k < s->n_mixes; k++) {
        struct es_mix *m = &s->mixes[k];
        if ((st = mix_alloc(host, m, slots[k], elastic, err)))
            goto fail;
        cap_arena += (uint64_t)m->n_slots * m->slot_bytes;
        floor_arena += (uint64_t)(m->floor_chunks < m->n_chunks ? chunk_lo(m, m->floor_chunks)
                                                                 : m->n_slots) *
                       m->slot_bytes;
        s->stamp[k] = calloc((size_t)m->n_layers * (size_t)m->n_expert, sizeof *s->stamp[k]);
        s->ahead_stamp[k] =
            calloc((size_t)m->n_layers * (size_t)m->n_expert, sizeof *s->ahead_stamp[k]);
        if (!s->stamp[k] || !s->ahead_stamp[k]) {
            st = splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory");
            goto fail;
        }
        s->st.cap_chunks += m->n_chunks;
        s->st.experts += m->n_layers * m->n_expert;
    }
    s->bytes += cap_arena;
    count_live(s);
    for (int p = 0; p < ES_MAX_PARTS; p++) {
        s->now[p] = calloc((size_t)s->max_expert, sizeof(void *));
        s->late[p] = calloc((size_t)s->max_expert, sizeof(void *));
        if (!s->now[p] || !s->late[p]) {
            st = splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory");
            goto fail;
        }
    }
    s->jobs = calloc((size_t)s->max_expert, sizeof *s->jobs);
    s->ahead = calloc((size_t)s->max_expert, sizeof *s->ahead);
    if (!s->jobs || !s->ahead) {
        st = splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory");
        goto fail;
    }
    if ((st = er_pool_start(&s->readers, host, s->files, s->n_files, readers,
                            staging_per_reader(layers, n_layers), err)))
        goto fail;
    s->readers_on = 1;
    s->st.cap_bytes = s->bytes;
    s->st.floor_bytes = overhead + floor_arena;
    s->st.staging_bytes = s->staging_bytes;
    s->st.readers = readers;
    *out = s;
    return SPLASH_OK;
fail:
    es_destroy(s);
    return st;
}

/* Job j reads expert e of layer il into slot; returns the bytes it reads. */
static uint64_t fill_job(struct es_store *s, int32_t il, int32_t e, int32_t key, int32_t slot,
                         struct er_job *j)
{
    const struct es_layer *L = &s->layers[il];
    struct es_mix *m = &s->mixes[L->mix];
    uint64_t bytes = 0;
    memset(j, 0, sizeof *j);
    j->n_parts = m->n_parts;
    j->key = key;
    j->layer = il;
    j->expert = e;
    for (int32_t p = 0; p < m->n_parts; p++) {
        j->part[p] = L->part[p];
        for (int32_t x = 0; x < j->part[p].n_ext; x++) {
            j->part[p].off[x] += (uint64_t)e * L->stride[p][x];
            bytes += j->part[p].bytes[x];
        }
        j->w[p] = L->src.w[p];
        j->dst[p] = slot_at(m, slot) + m->part_off[p];
    }
    return bytes;
}

static int pinned(void *ctx, int32_t key)
{
    const uint32_t *stamp = ((void **)ctx)[0];
    const uint32_t *epoch = ((void **)ctx)[1];
    return stamp[key] == *epoch;
}

/* 1 when file f is one a job of jobs[0..n) read from. */
static int file_used(const struct er_job *jobs, int32_t n, int32_t f)
{
    for (int32_t i = 0; i < n; i++)
        for (int32_t p = 0; p < jobs[i].n_parts; p++)
            for (int32_t x = 0; x < jobs[i].part[p].n_ext; x++)
                if (jobs[i].part[p].file[x] == f)
                    return 1;
    return 0;
}

/* Drops the experts of jobs[0..n) that failed (all of them with all = 1). */
static void drop_jobs(struct es_store *s, const struct er_job *jobs, int32_t n, int all)
{
    for (int32_t i = 0; i < n; i++) {
        if (!all && !jobs[i].error)
            continue;
        struct es_mix *m = &s->mixes[s->layers[jobs[i].layer].mix];
        int32_t slot = es_arc_slot(&m->arc, jobs[i].key);
        if (slot >= 0)
            m->slot_key[slot] = -1;
        es_arc_drop(&m->arc, jobs[i].key);
    }
}

/* Checks the files jobs[0..n) read from; a changed one stops the store. */
static enum splash_status check_files(struct es_store *s, const struct er_job *jobs, int32_t n,
                                      struct splash_err *err)
{
    for (int32_t f = 0; f < s->n_files; f++)
        if (file_used(jobs, n, f) && er_file_check(&s->files[f], err)) {
            s->failed = 1;
            snprintf(s->st.failure, sizeof s->st.failure, "%s", err->msg);
            return SPLASH_ERR_IO;
        }
    return SPLASH_OK;
}

/* The read-ahead in flight, finished: its failed reads free their slots (nothing else). */
static enum splash_status settle_ahead(struct es_store *s, struct splash_err *err)
{
    if (!s->n_ahead)
        return SPLASH_OK;
    er_pool_wait(&s->readers);
    drop_jobs(s, s->ahead, s->n_ahead, 0);
    enum splash_status st = check_files(s, s->ahead, s->n_ahead, err);
    if (st)
        drop_jobs(s, s->ahead, s->n_ahead, 1);
    s->n_ahead = 0;
    return st;
}

enum splash_status es_load(struct es_store *s, int32_t il, const int32_t *ids, int64_t n,
                           int decode, const void *const **now, const void *const **late,
                           int *n_late, struct splash_err *err)
{
    if (s->failed)
        return splash_err_set(err, SPLASH_ERR_IO, "%s", s->st.failure);
    enum splash_status ahead_st = settle_ahead(s, err);
    if (ahead_st)
        return ahead_st;
    const struct es_layer *L = &s->layers[il];
    struct es_mix *m = &s->mixes[L->mix];
    const int32_t X = L->src.n_expert, base = L->index * m->n_expert;
    uint32_t *stamp = s->stamp[L->mix];
    if (++s->epoch == 0) {
        /* the stamps wrapped: none may look current */
        for (int32_t k = 0; k < s->n_mixes; k++) {
            size_t keys = (size_t)s->mixes[k].n_layers * (size_t)s->mixes[k].n_expert;
            memset(s->stamp[k], 0, keys * sizeof(uint32_t));
            memset(s->ahead_stamp[k], 0, keys * sizeof(uint32_t));
        }
        s->epoch = 1;
        s->ahead_epoch = 0;
    }
    for (int32_t p = 0; p < m->n_parts; p++) {
        memset(s->now[p], 0, (size_t)X * sizeof(void *));
        memset(s->late[p], 0, (size_t)X * sizeof(void *));
        now[p] = s->now[p];
        late[p] = s->late[p];
    }
    struct splash_expert_use *use = decode ? &s->st.decode : &s->st.prefill;
    use->loads++;
    /* the layer's distinct experts, pinned for this round */
    int32_t routed = 0;
    for (int64_t i = 0; i < n; i++) {
        int32_t e = ids[i];
        if (e < 0 || e >= X || stamp[base + e] == s->epoch)
            continue;
        stamp[base + e] = s->epoch;
        routed++;
    }
    use->routed += (uint64_t)routed;
    s->n_jobs = 0;
    s->decode = decode;
    void *pin_ctx[2] = {stamp, &s->epoch};
    for (int32_t e = 0; e < X; e++) {
        if (stamp[base + e] != s->epoch)
            continue;
        int32_t key = base + e, slot = es_arc_slot(&m->arc, key);
        if (slot >= 0) {
            if (s->ahead_stamp[L->mix][key] == s->ahead_epoch && s->ahead_epoch)
                use->read_ahead_used++;
            es_arc_touch(&m->arc, key, decode);
            for (int32_t p = 0; p < m->n_parts; p++)
                s->now[p][e] = slot_at(m, slot) + m->part_off[p];
            continue;
        }
        int32_t evicted;
        slot = es_arc_admit(&m->arc, key, decode, pinned, pin_ctx, &evicted);
        if (slot < 0)
            return splash_err_set(err, SPLASH_ERR_INTERNAL,
                                  "expert store: no slot for expert %d of layer %d", e, il);
        m->slot_key[slot] = key;
        struct er_job *j = &s->jobs[s->n_jobs++];
        use->bytes_read += fill_job(s, il, e, key, slot, j);
        for (int32_t p = 0; p < m->n_parts; p++)
            s->late[p][e] = j->dst[p];
    }
    use->read += (uint64_t)s->n_jobs;
    *n_late = s->n_jobs;
    if (s->n_jobs)
        er_pool_submit(&s->readers, s->jobs, s->n_jobs);
    return SPLASH_OK;
}

enum splash_status es_wait(struct es_store *s, struct splash_err *err)
{
    if (!s->n_jobs)
        return SPLASH_OK;
    double t0 = now_s();
    er_pool_wait(&s->readers);
    struct splash_expert_use *use = s->decode ? &s->st.decode : &s->st.prefill;
    use->read_seconds += now_s() - t0;
    enum splash_status st = SPLASH_OK;
    for (int32_t i = 0; i < s->n_jobs; i++) {
        const struct er_job *j = &s->jobs[i];
        if (!j->error || st)
            continue;
        const struct es_layer *L = &s->layers[j->layer];
        const struct er_part *pt = &j->part[j->failed_part];
        const struct splash_expert_planes *pl = L->src.planes[j->failed_part];
        if (j->why[0])
            st = splash_err_set(err, SPLASH_ERR_IO, "importing expert %d of layer %d: %s",
                                j->expert, j->layer, j->why);
        else
            st = splash_err_set(err, SPLASH_ERR_IO,
                                "%s: reading expert %d of layer %d failed twice: %s (%s at %llu)",
                                s->files[pt->file[j->failed_ext]].path, j->expert, j->layer,
                                strerror(j->error),
                                pl ? pl->name[j->failed_ext] : L->src.t[j->failed_part]->name,
                                (unsigned long long)pt->off[j->failed_ext]);
    }
    /* every file the round read from, as it was at the start */
    if (!st)
        st = check_files(s, s->jobs, s->n_jobs, err);
    if (st)
        drop_jobs(s, s->jobs, s->n_jobs, 1); /* nothing this round read is to be trusted */
    s->n_jobs = 0;
    return st;
}

void es_read_ahead(struct es_store *s, int32_t il, const int32_t *ids, int64_t n)
{
    if (s->failed || s->n_ahead || s->n_jobs || il < 0 || il >= s->n_layers)
        return;
    const struct es_layer *L = &s->layers[il];
    struct es_mix *m = &s->mixes[L->mix];
    const int32_t X = L->src.n_expert, base = L->index * m->n_expert;
    uint32_t *stamp = s->stamp[L->mix];
    if (++s->epoch == 0)
        return; /* es_load resets the stamps when they wrap */
    /* pinned among themselves; the layer that routed last is done with its slots */
    for (int64_t i = 0; i < n; i++)
        if (ids[i] >= 0 && ids[i] < X)
            stamp[base + ids[i]] = s->epoch;
    void *pin_ctx[2] = {stamp, &s->epoch};
    s->ahead_epoch = s->epoch;
    for (int32_t e = 0; e < X; e++) {
        int32_t key = base + e;
        if (stamp[key] != s->epoch || es_arc_slot(&m->arc, key) >= 0)
            continue;
        int32_t evicted;
        /* a prediction: T1, so a wrong one is recycled first */
        int32_t slot = es_arc_admit(&m->arc, key, 0, pinned, pin_ctx, &evicted);
        if (slot < 0)
            break;
        m->slot_key[slot] = key;
        s->ahead_stamp[L->mix][key] = s->epoch;
        struct er_job *j = &s->ahead[s->n_ahead++];
        s->st.decode.bytes_read += fill_job(s, il, e, key, slot, j);
    }
    s->st.decode.read_ahead += (uint64_t)s->n_ahead;
    if (s->n_ahead)
        er_pool_submit(&s->readers, s->ahead, s->n_ahead);
}

void es_stats_get(const struct es_store *s, struct splash_expert_stats *out)
{
    *out = s->st;
    out->resident = 0;
    for (int32_t k = 0; k < s->n_mixes; k++)
        out->resident += s->mixes[k].arc.len[ES_ARC_T1] + s->mixes[k].arc.len[ES_ARC_T2];
    out->direct = 0;
    for (int32_t f = 0; f < s->n_files; f++)
        out->direct |= atomic_load(&s->files[f].direct_ok);
}

uint64_t es_bytes(const struct es_store *s)
{
    return s->bytes;
}

/* Gives back mix m's last live chunk: its experts move to free slots below it, the ARC's
 * victims evicted first where the slots below are too few. */
static uint64_t give_back(struct es_store *s, struct es_mix *m)
{
    int32_t c = m->live_chunks - 1, lo = chunk_lo(m, c);
    while (m->arc.len[ES_ARC_T1] + m->arc.len[ES_ARC_T2] > lo) {
        int32_t victim = es_arc_evict(&m->arc);
        if (victim < 0)
            break;
        for (int32_t k = 0; k < m->live_slots; k++)
            if (m->slot_key[k] == victim) {
                m->slot_key[k] = -1;
                break;
            }
    }
    for (int32_t slot = lo; slot < m->live_slots; slot++) {
        int32_t key = m->slot_key[slot];
        if (key < 0)
            continue;
        int32_t dst = es_arc_take_free_below(&m->arc, lo);
        memcpy(slot_at(m, dst), slot_at(m, slot), m->slot_bytes);
        es_arc_move(&m->arc, key, dst);
        m->slot_key[dst] = key;
        m->slot_key[slot] = -1;
    }
    es_arc_set_slots(&m->arc, lo);
    s->host->free_aligned(m->chunks[c]);
    m->chunks[c] = NULL;
    m->live_chunks = c;
    m->live_slots = lo;
    return (uint64_t)chunk_slots(m, c) * m->slot_bytes;
}

uint64_t es_resize(struct es_store *s, int grow, uint64_t max_bytes)
{
    struct splash_err err;
    if (s->failed || s->n_jobs || settle_ahead(s, &err))
        return 0;
    uint64_t bytes = 0;
    if (grow) {
        for (int32_t k = 0; k < s->n_mixes && !bytes; k++) {
            struct es_mix *m = &s->mixes[k];
            int32_t c = m->live_chunks;
            if (c == m->n_chunks || (uint64_t)chunk_slots(m, c) * m->slot_bytes > max_bytes ||
                chunk_alloc(s->host, m, c, &err))
                continue;
            m->live_chunks = c + 1;
            m->live_slots = m->live_chunks < m->n_chunks ? chunk_lo(m, m->live_chunks) : m->n_slots;
            es_arc_set_slots(&m->arc, m->live_slots);
            bytes = (uint64_t)chunk_slots(m, c) * m->slot_bytes;
            s->st.regrows++;
        }
    } else {
        for (int32_t k = s->n_mixes - 1; k >= 0 && !bytes; k--)
            if (s->mixes[k].live_chunks > s->mixes[k].floor_chunks) {
                bytes = give_back(s, &s->mixes[k]);
                s->st.shrinks++;
            }
    }
    count_live(s);
    return bytes;
}
