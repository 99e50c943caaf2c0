/* make-model: random-weight GGUF models of a family's shape (see model_writer.h). */
#include "cli/modelgen/model_writer.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/modelgen/builtin_vocab.h"
#include "core/gguf.h"
#include "core/gguf_write.h"
#include "core/host_impl.h"
#include "core/meta.h"
#include "core/family.h"
#include "core/model_check.h"
#include "core/registry.h"
#include "core/threadpool.h"
#include "splash/family.h"
#include "splash/format.h"

/* The vocabulary must hold the built-in tokenizer; the family checks every other value
 * when it is selected (naming the key). */
static enum splash_status shape_check(const struct splash_model_shape *s, struct splash_err *err)
{
    if (s->n_vocab < splash_builtin_vocab_min_size())
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "shape %s: vocab %lld is below the built-in tokenizer's %lld",
                              s->name, (long long)s->n_vocab,
                              (long long)splash_builtin_vocab_min_size());
    if (splash_model_shape_get(s, "embedding_length") < 1)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "shape %s: %s.embedding_length is missing or zero", s->name,
                              s->arch);
    return SPLASH_OK;
}

/* ---- metadata --------------------------------------------------------------------- */

struct mix_rule;
static const struct mix_rule *mix_find(const char *name);
static int32_t mix_file_type(const struct mix_rule *m);

/* An array value in its GGUF element type. */
static enum splash_status set_array(struct splash_gguf_writer *w, const char *key,
                                    const struct splash_model_value *v, struct splash_err *err)
{
    union {
        uint32_t u[SPLASH_PRESET_MAX_ARRAY];
        int32_t i[SPLASH_PRESET_MAX_ARRAY];
        float f[SPLASH_PRESET_MAX_ARRAY];
        uint8_t b[SPLASH_PRESET_MAX_ARRAY];
    } a;
    uint32_t type = GGUF_U32;
    for (uint32_t k = 0; k < v->n; k++)
        switch (v->kind) {
        case SPLASH_PRESET_U32S:
            a.u[k] = (uint32_t)v->nums[k];
            break;
        case SPLASH_PRESET_I32S:
            type = GGUF_I32;
            a.i[k] = (int32_t)v->nums[k];
            break;
        case SPLASH_PRESET_F32S:
            type = GGUF_F32;
            a.f[k] = (float)v->nums[k];
            break;
        default:
            type = GGUF_BOOL;
            a.b[k] = v->nums[k] != 0;
            break;
        }
    return splash_gguf_writer_set_array(w, key, type, &a, v->n, err);
}

/* The shape's <arch>.* values, in the preset's order. */
static enum splash_status set_arch_keys(struct splash_gguf_writer *w,
                                        const struct splash_model_shape *s, struct splash_err *err)
{
    enum splash_status st = SPLASH_OK;
    for (size_t i = 0; i < s->n_values && !st; i++) {
        const struct splash_model_value *v = &s->values[i];
        char key[128];
        snprintf(key, sizeof key, "%s.%s", s->arch, v->key);
        switch (v->kind) {
        case SPLASH_PRESET_U32:
            st = splash_gguf_writer_set_u32(w, key, (uint32_t)v->num, err);
            break;
        case SPLASH_PRESET_I32:
            st = splash_gguf_writer_set_i32(w, key, (int32_t)v->num, err);
            break;
        case SPLASH_PRESET_F32:
            st = splash_gguf_writer_set_f32(w, key, (float)v->num, err);
            break;
        case SPLASH_PRESET_BOOL:
            st = splash_gguf_writer_set_bool(w, key, v->num != 0, err);
            break;
        case SPLASH_PRESET_STR:
            st = splash_gguf_writer_set_str(w, key, v->str, err);
            break;
        default:
            st = set_array(w, key, v, err);
            break;
        }
    }
    return st;
}

/* Every key but the tokenizer's (those go on the final writer only: declare_tensors
 * needs none of them, and a 248k vocabulary is slow to parse twice). */
static enum splash_status set_model_keys(struct splash_gguf_writer *w,
                                         const struct splash_model_shape *s, const char *mix,
                                         const char *general_name, struct splash_err *err)
{
    enum splash_status st;
    char name[96];
    if (!general_name) {
        snprintf(name, sizeof name, "splash-random-%s", s->name);
        general_name = name;
    }
    if ((st = splash_gguf_writer_set_str(w, "general.architecture", s->arch, err)) ||
        (st = splash_gguf_writer_set_str(w, "general.name", general_name, err)) ||
        (st = set_arch_keys(w, s, err)) ||
        (st = splash_gguf_writer_set_u32(w, "general.quantization_version", 2, err)))
        return st;
    const struct mix_rule *m = mix_find(mix);
    if (m && mix_file_type(m) >= 0 &&
        (st = splash_gguf_writer_set_u32(w, "general.file_type", (uint32_t)mix_file_type(m), err)))
        return st;
    return SPLASH_OK;
}

/* ---- type mixes ------------------------------------------------------------------------ */

/* The reference quantizer's ftypes this writer reproduces, with its file_type ids. */
enum mix_id {
    MIX_Q2_K, MIX_Q3_K_M, MIX_Q4_K_S, MIX_Q4_K_M, MIX_Q5_K_S, MIX_Q5_K_M, MIX_Q6_K, MIX_Q8_0,
    MIX_Q4_0, MIX_Q4_1, MIX_Q5_0, MIX_Q5_1, MIX_IQ4_NL, MIX_IQ4_XS, MIX_MXFP4_MOE, MIX_BF16,
    MIX_F16, MIX_F32,
};

struct mix_rule {
    const char *name;
    enum mix_id id;
    const char *base;        /* the type of every weight no rule moves */
    int32_t file_type;       /* general.file_type */
};

static const struct mix_rule mixes[] = {
    {"Q2_K", MIX_Q2_K, "Q2_K", 10},          {"Q3_K_M", MIX_Q3_K_M, "Q3_K", 12},
    {"Q4_K_S", MIX_Q4_K_S, "Q4_K", 14},      {"Q4_K_M", MIX_Q4_K_M, "Q4_K", 15},
    {"Q5_K_S", MIX_Q5_K_S, "Q5_K", 16},      {"Q5_K_M", MIX_Q5_K_M, "Q5_K", 17},
    {"Q6_K", MIX_Q6_K, "Q6_K", 18},          {"Q8_0", MIX_Q8_0, "Q8_0", 7},
    {"Q4_0", MIX_Q4_0, "Q4_0", 2},           {"Q4_1", MIX_Q4_1, "Q4_1", 3},
    {"Q5_0", MIX_Q5_0, "Q5_0", 8},           {"Q5_1", MIX_Q5_1, "Q5_1", 9},
    {"IQ4_NL", MIX_IQ4_NL, "IQ4_NL", 25},    {"IQ4_XS", MIX_IQ4_XS, "IQ4_XS", 30},
    {"MXFP4_MOE", MIX_MXFP4_MOE, "MXFP4", 38}, {"BF16", MIX_BF16, "BF16", 32},
    {"F16", MIX_F16, "F16", 1},              {"F32", MIX_F32, "F32", 0},
};

static const struct mix_rule *mix_find(const char *name)
{
    for (size_t i = 0; i < sizeof mixes / sizeof mixes[0]; i++)
        if (!strcmp(mixes[i].name, name))
            return &mixes[i];
    return NULL;
}

static int32_t mix_file_type(const struct mix_rule *m)
{
    return m->file_type;
}

int splash_model_mix_known(const struct splash_registry *r, const char *mix)
{
    if (mix_find(mix))
        return 1;
    const struct splash_format_type *f = splash_registry_format_by_name(r, mix);
    return f && f->from_float && f->gguf_type >= 0 && !(f->flags & SPLASH_FORMAT_ACTIVATION_ONLY);
}

/* The reference quantizer's tensor categories, matched on the name as it matches them. */
enum category {
    CAT_OTHER, CAT_TOKEN_EMBD, CAT_OUTPUT, CAT_ATTN_QKV, CAT_ATTN_V, CAT_ATTN_K, CAT_ATTN_Q,
    CAT_ATTN_OUTPUT, CAT_FFN_UP, CAT_FFN_GATE, CAT_FFN_DOWN,
};

static enum category category_of(const char *name)
{
    if (!strcmp(name, "output.weight"))
        return CAT_OUTPUT;
    if (!strcmp(name, "token_embd.weight"))
        return CAT_TOKEN_EMBD;
    static const struct {
        const char *part;
        enum category cat;
    } parts[] = {
        {"attn_qkv.weight", CAT_ATTN_QKV}, {"attn_v.weight", CAT_ATTN_V},
        {"attn_k.weight", CAT_ATTN_K},     {"attn_q.weight", CAT_ATTN_Q},
        {"attn_output.weight", CAT_ATTN_OUTPUT}, {"ffn_up", CAT_FFN_UP},
        {"ffn_gate", CAT_FFN_GATE},        {"ffn_down", CAT_FFN_DOWN},
    };
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        if (strstr(name, parts[i].part))
            return parts[i].cat;
    return CAT_OTHER;
}

/* The reference's "use more bits" layers: the first and last eighth, and every
 * third layer in between. */
static int use_more_bits(int64_t i, int64_t n)
{
    return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

struct mix_state {
    const struct mix_rule *mix;
    int64_t n_layers;
    int32_t n_expert;
    int32_t n_gqa;
    int tied;
    int64_t n_attn_v, i_attn_v;   /* attention value-like tensors (attn_v, attn_qkv) */
    int64_t i_ffn_down;
};

/* The ftype rules for a weight matrix, before the shape fallback. */
static const char *mix_ftype_type(struct mix_state *ms, const struct splash_tensor_decl *d,
                                  const struct splash_format_type *base)
{
    enum mix_id id = ms->mix->id;
    const char *t = ms->mix->base;
    enum category cat = category_of(d->name);
    if (cat == CAT_OUTPUT || (ms->tied && cat == CAT_TOKEN_EMBD)) {
        if (id == MIX_MXFP4_MOE || d->ne[0] % base->block_elems)
            return "Q8_0";
        return id == MIX_Q8_0 ? "Q8_0" : "Q6_K";
    }
    if (id == MIX_MXFP4_MOE)
        return d->n_dims > 2 && d->ne[2] > 1 ? "MXFP4" : "Q8_0";
    if (cat == CAT_TOKEN_EMBD)
        return t;
    if (cat == CAT_ATTN_V || cat == CAT_ATTN_QKV) {
        int64_t i = ms->i_attn_v++;
        if (id == MIX_Q2_K)
            t = ms->n_gqa >= 4 ? "Q4_K" : "Q3_K";
        else if (id == MIX_Q3_K_M)
            t = i < 2 ? "Q5_K" : "Q4_K";
        else if ((id == MIX_IQ4_NL || id == MIX_IQ4_XS) && ms->n_gqa >= 4)
            t = "Q5_K";
        else if ((id == MIX_Q4_K_M || id == MIX_Q5_K_M) && use_more_bits(i, ms->n_attn_v))
            t = "Q6_K";
        else if (id == MIX_Q4_K_S && i < 4)
            t = "Q5_K";
        if (ms->n_expert == 8)
            t = "Q8_0";
        return t;
    }
    if (cat == CAT_ATTN_K)
        return ms->n_expert == 8 ? "Q8_0" : t;
    if (cat == CAT_FFN_DOWN) {
        /* the layer: the tensor's own with experts, else the running count */
        int64_t i = ms->n_expert > 1 ? d->layer : ms->i_ffn_down;
        int64_t n = ms->n_layers;
        ms->i_ffn_down++;
        if (id == MIX_Q2_K)
            return "Q3_K";
        if (id == MIX_Q3_K_M)
            return i < n / 16 ? "Q5_K" : "Q4_K";
        if (id == MIX_Q4_K_M)
            return use_more_bits(i, n) ? "Q6_K" : t;
        if ((id == MIX_IQ4_NL || id == MIX_IQ4_XS) && i < n / 8)
            return "Q5_K"; /* the reference does this without an importance matrix */
        if (id == MIX_Q5_K_M && use_more_bits(i, n))
            return "Q6_K";
        if (id == MIX_Q4_K_S && i < n / 8)
            return "Q5_K";
        return t;
    }
    if (cat == CAT_ATTN_OUTPUT) {
        if (ms->n_expert == 8)
            return id == MIX_Q2_K || id == MIX_Q3_K_M || id == MIX_IQ4_NL || id == MIX_Q4_K_S ||
                           id == MIX_Q4_K_M || id == MIX_IQ4_XS
                       ? "Q5_K"
                       : t;
        if (id == MIX_Q2_K)
            return "Q3_K";
        if (id == MIX_Q3_K_M)
            return "Q4_K";
    }
    return t;
}

/* The reference's fallback for rows that are not whole blocks of the chosen type. */
static const char *shape_fallback(const char *t)
{
    static const struct {
        const char *from, *to;
    } fb[] = {
        {"IQ4_XS", "IQ4_NL"}, {"Q2_K", "Q4_0"}, {"Q3_K", "Q4_0"},
        {"Q4_K", "Q5_0"},     {"Q5_K", "Q5_1"}, {"Q6_K", "Q8_0"},
    };
    for (size_t i = 0; i < sizeof fb / sizeof fb[0]; i++)
        if (!strcmp(fb[i].from, t))
            return fb[i].to;
    return "F16";
}

/* What the reference quantizes: the matrices a family takes quantized and in F16 alike
 * (projections, experts, the token table, GDN alpha/beta); everything else stays F32 (a
 * router, which the families refuse in F16, as llama.cpp keeps ffn_gate_inp). */
static int accept_is_matrix(uint32_t accept)
{
    const uint32_t matrix = SPLASH_ACCEPT_QUANT | SPLASH_ACCEPT_F16;
    return (accept & matrix) == matrix;
}

static enum splash_status pick_type(const struct splash_registry *r, struct mix_state *ms,
                                    const char *mix, const struct splash_tensor_decl *d,
                                    const struct splash_format_type **out,
                                    struct splash_err *err)
{
    const char *t = "F32";
    if (accept_is_matrix(d->accept) && d->n_dims >= 2) {
        const struct splash_format_type *base =
            splash_registry_format_by_name(r, ms->mix ? ms->mix->base : mix);
        if (!base)
            return splash_err_set(err, SPLASH_ERR_NOT_FOUND, "type %s: no format plugin has it",
                                  ms->mix ? ms->mix->base : mix);
        if (!ms->mix || ms->mix->id == MIX_BF16 || ms->mix->id == MIX_F16 ||
            ms->mix->id == MIX_F32)
            t = base->name;
        else
            t = mix_ftype_type(ms, d, base);
    }
    const struct splash_format_type *f = splash_registry_format_by_name(r, t);
    for (int tries = 0; f && d->ne[0] % f->block_elems && tries < 3; tries++)
        f = splash_registry_format_by_name(r, t = shape_fallback(t));
    if (!f || !f->from_float || f->gguf_type < 0)
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                              "%s: type %s: no registered format quantizes to it", d->name, t);
    if (d->ne[0] % f->block_elems)
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED, "%s: %lld columns fit no type of %s",
                              d->name, (long long)d->ne[0], mix);
    *out = f;
    return SPLASH_OK;
}

/* ---- the plan ------------------------------------------------------------------------ */

struct decl_list {
    struct splash_tensor_decl *d;
    size_t n, cap;
    int failed;
};

static void collect_decl(void *ctx, const struct splash_tensor_decl *decl)
{
    struct decl_list *l = ctx;
    if (l->failed)
        return;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 256;
        void *grown = realloc(l->d, cap * sizeof *l->d);
        if (!grown) {
            l->failed = 1;
            return;
        }
        l->d = grown;
        l->cap = cap;
    }
    l->d[l->n++] = *decl;
}

/* The reference walks tensors by layer, then name: its running counts follow that order. */
static int decl_order(const void *a, const void *b)
{
    const struct splash_tensor_decl *x = *(const struct splash_tensor_decl *const *)a;
    const struct splash_tensor_decl *y = *(const struct splash_tensor_decl *const *)b;
    if (x->layer != y->layer)
        return x->layer < y->layer ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* Metadata alone, as a meta the family can read: a parsed header with placeholder
 * entries for the tensors the family sizes itself by (the token table, the head). */
struct header_meta {
    struct splash_meta *m;
    struct splash_tensor_info embd, output;
};

static enum splash_status header_meta_open(const struct splash_model_shape *s, const char *mix,
                                           struct header_meta *hm, struct splash_err *err)
{
    memset(hm, 0, sizeof *hm);
    struct splash_gguf_writer *w = splash_gguf_writer_create();
    if (!w)
        return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory");
    void *buf = NULL;
    size_t size = 0;
    struct splash_gguf *g = NULL;
    enum splash_status st = set_model_keys(w, s, mix, NULL, err);
    if (!st)
        st = splash_gguf_writer_write_buffer(w, &buf, &size, err);
    splash_gguf_writer_destroy(w);
    if (!st)
        st = splash_gguf_parse_buffer(buf, size, s->name, SPLASH_GGUF_HEADERS_ONLY, &g, err);
    free(buf);
    if (st)
        return st;
    struct splash_meta *m = calloc(1, sizeof *m);
    if (!m || !(m->path = strdup(s->name)) || !(m->parts = calloc(1, sizeof *m->parts))) {
        if (m)
            free(m->path);
        free(m);
        splash_gguf_close(g);
        return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory");
    }
    m->source = SPLASH_META_GGUF;
    m->parts[0] = g;
    m->n_parts = 1;
    hm->m = m;
    const int64_t n_embd = (int64_t)splash_model_shape_get(s, "embedding_length");
    hm->embd = (struct splash_tensor_info){.name = "token_embd.weight", .dtype = 0,
                                           .type_name = "F32", .n_dims = 2,
                                           .ne = {n_embd, s->n_vocab, 1, 1}};
    hm->output = hm->embd;
    hm->output.name = "output.weight";
    if ((st = splash_meta_add_tensor(m, &hm->embd, err)) ||
        (!s->tied && (st = splash_meta_add_tensor(m, &hm->output, err)))) {
        splash_meta_close(m);
        hm->m = NULL;
    }
    return st;
}

enum splash_status splash_model_plan_create(const struct splash_registry *r,
                                            const struct splash_model_shape *shape,
                                            const char *mix, struct splash_model_plan **out,
                                            struct splash_err *err)
{
    enum splash_status st;
    if (!mix)
        mix = "Q4_K_M";
    if ((st = shape_check(shape, err)))
        return st;
    if (!splash_model_mix_known(r, mix))
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                              "--type %s: neither a quantizer mix nor a format with a quantizer",
                              mix);
    struct header_meta hm;
    if ((st = header_meta_open(shape, mix, &hm, err)))
        return st;
    const struct splash_family_plugin *family = NULL;
    struct splash_family_verdict verdict;
    struct decl_list list = {0};
    struct splash_model_plan *plan = NULL;
    const struct splash_tensor_decl **order = NULL;
    if ((st = splash_family_select(r, hm.m, &family, &verdict, err)))
        goto out_meta;
    if ((st = splash_family_declare_tensors(r, family, hm.m, collect_decl, &list, err)))
        goto out_meta;
    plan = calloc(1, sizeof *plan);
    order = malloc((list.n ? list.n : 1) * sizeof *order);
    if (list.failed || !plan || !order ||
        !(plan->tensors = calloc(list.n ? list.n : 1, sizeof *plan->tensors))) {
        st = splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory");
        goto out_plan;
    }
    snprintf(plan->family, sizeof plan->family, "%s", family->header.name);

    /* the reference's rules read these keys, whatever the architecture */
    int64_t n_head = (int64_t)splash_model_shape_get(shape, "attention.head_count");
    int64_t n_head_kv = (int64_t)splash_model_shape_get(shape, "attention.head_count_kv");
    struct mix_state ms = {.mix = mix_find(mix),
                           .n_layers = (int64_t)splash_model_shape_get(shape, "block_count"),
                           .n_expert = (int32_t)splash_model_shape_get(shape, "expert_count"),
                           .n_gqa = (int32_t)(n_head_kv > 0 ? n_head / n_head_kv : 1),
                           .tied = shape->tied};
    for (size_t i = 0; i < list.n; i++) {
        order[i] = &list.d[i];
        enum category c = category_of(list.d[i].name);
        if ((c == CAT_ATTN_V || c == CAT_ATTN_QKV) && accept_is_matrix(list.d[i].accept))
            ms.n_attn_v++;
    }
    qsort(order, list.n, sizeof *order, decl_order);
    for (size_t k = 0; k < list.n; k++) {
        const struct splash_tensor_decl *d = order[k];
        size_t i = (size_t)(d - list.d); /* the file keeps the declaration order */
        if (d->flags & (SPLASH_DECL_OPTIONAL | SPLASH_DECL_AGAIN))
            continue; /* absent is fine; a tied head is the token table again */
        struct splash_model_plan_tensor *t = &plan->tensors[i];
        const struct splash_format_type *f = NULL;
        if ((st = pick_type(r, &ms, mix, d, &f, err)))
            goto out_plan;
        snprintf(t->name, sizeof t->name, "%s", d->name);
        t->layer = d->layer;
        t->n_dims = d->n_dims;
        memcpy(t->ne, d->ne, sizeof t->ne);
        t->accept = d->accept;
        t->gguf_type = f->gguf_type;
        t->type_name = f->name;
    }
    /* drop the skipped (optional, absent) tensors, keeping declaration order */
    for (size_t i = 0; i < list.n; i++) {
        if (!plan->tensors[i].name[0])
            continue;
        struct splash_model_plan_tensor *t = &plan->tensors[plan->n_tensors++];
        if (t != &plan->tensors[i])
            *t = plan->tensors[i];
        const struct splash_format_type *f = splash_registry_format_by_name(r, t->type_name);
        int64_t elems = t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
        plan->n_params += (uint64_t)elems;
        plan->n_bytes += (uint64_t)(elems / f->block_elems) * f->block_bytes;
    }
    *out = plan;
    plan = NULL;
out_plan:
    splash_model_plan_free(plan);
out_meta:
    free(order);
    free(list.d);
    splash_meta_close(hm.m);
    return st;
}

void splash_model_plan_free(struct splash_model_plan *plan)
{
    if (!plan)
        return;
    free(plan->tensors);
    free(plan);
}

/* ---- values ---------------------------------------------------------------------------- */

enum init_kind { INIT_NORMAL, INIT_ONE_PLUS, INIT_NEG_UNIFORM, INIT_ZERO };

struct init {
    enum init_kind kind;
    float scale;
};

static struct init init_of(const struct splash_model_plan_tensor *t)
{
    const char *base = t->name;
    /* the part after "blk.N." */
    if (!strncmp(base, "blk.", 4) && (base = strchr(base + 4, '.')))
        base++;
    else
        base = t->name;
    /* norms (any float, named so), the token table, then the F32-only vectors by name (attention
     * sinks start at zero; GDN decay, time step and convolution have their own scales) */
    size_t n = strlen(base);
    if (t->accept == SPLASH_ACCEPT_FLOAT && n >= 11 && !strcmp(base + n - 11, "norm.weight"))
        return (struct init){INIT_ONE_PLUS, 0.1f};
    if (!strcmp(t->name, "token_embd.weight"))
        return (struct init){INIT_NORMAL, 0.05f};
    if (t->accept == SPLASH_ACCEPT_F32) {
        if (!strncmp(base, "attn_sinks", 10))
            return (struct init){INIT_ZERO, 0};
        if (!strcmp(base, "ssm_a"))
            return (struct init){INIT_NEG_UNIFORM, 0};
        if (!strncmp(base, "ssm_dt", 6))
            return (struct init){INIT_NORMAL, 0.5f};
        if (!strncmp(base, "ssm_conv1d", 10))
            return (struct init){INIT_NORMAL, 0.3f};
        return (struct init){INIT_NORMAL, 0.1f};
    }
    return (struct init){INIT_NORMAL, 1.0f / sqrtf((float)t->ne[0])};
}

static uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t hash_name(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

/* n values of one chunk, from a generator seeded by (seed, tensor, first row) so
 * the bytes do not depend on the number of threads. */
static void fill_values(float *x, int64_t n, struct init in, uint64_t seed)
{
    uint64_t s = seed;
    switch (in.kind) {
    case INIT_ZERO:
        memset(x, 0, (size_t)n * sizeof *x);
        return;
    case INIT_NEG_UNIFORM:
        for (int64_t i = 0; i < n; i++)
            x[i] = -(1.0f + 15.0f * (float)(splitmix64(&s) >> 40) * (1.0f / 16777216.0f));
        return;
    case INIT_NORMAL:
    case INIT_ONE_PLUS:
        break;
    }
    float add = in.kind == INIT_ONE_PLUS ? 1.0f : 0.0f;
    const float two_pi = 6.28318530717958647692f;
    for (int64_t i = 0; i < n; i += 2) {
        /* Box-Muller: u1 in (0, 1], u2 in [0, 1) from one 64-bit draw */
        uint64_t r = splitmix64(&s);
        float u1 = (float)((r >> 40) + 1) * (1.0f / 16777216.0f);
        float u2 = (float)((r >> 16) & 0xffffff) * (1.0f / 16777216.0f);
        float rad = sqrtf(-2.0f * logf(u1)) * in.scale;
        float sn, cs;
        sincosf(two_pi * u2, &sn, &cs);
        x[i] = add + rad * cs;
        if (i + 1 < n)
            x[i + 1] = add + rad * sn;
    }
}

/* ---- quantizing ---------------------------------------------------------------------- */

#define CHUNK_ELEMS 65536

struct wtensor {
    const struct splash_model_plan_tensor *t;
    const struct splash_format_type *f;
    struct init init;
    uint64_t seed;
    int64_t rows;
    int64_t sample_rows;   /* rows quantized from their own values; the rest are copies */
    size_t row_bytes;
    uint8_t *data;
};

struct job {
    uint32_t tensor;
    int64_t row0, n_rows;
};

struct quant_ctx {
    struct wtensor *wt;
    struct job *jobs;   /* quantizing jobs, then copying jobs */
    float **scratch;    /* per pool thread, CHUNK_ELEMS or one row if larger */
};

static void quant_range(void *ctx, int64_t begin, int64_t end, int thread)
{
    struct quant_ctx *q = ctx;
    float *x = q->scratch[thread];
    for (int64_t j = begin; j < end; j++) {
        const struct job *jb = &q->jobs[j];
        const struct wtensor *w = &q->wt[jb->tensor];
        int64_t n = jb->n_rows * w->t->ne[0];
        fill_values(x, n, w->init, w->seed ^ ((uint64_t)jb->row0 * 0xD1B54A32D192ED03ull));
        w->f->from_float(x, w->data + (size_t)jb->row0 * w->row_bytes, n, NULL);
    }
}

/* Rows past a tensor's sample: blocks drawn at random from the quantized sample. */
static void copy_range(void *ctx, int64_t begin, int64_t end, int thread)
{
    struct quant_ctx *q = ctx;
    (void)thread;
    for (int64_t j = begin; j < end; j++) {
        const struct job *jb = &q->jobs[j];
        const struct wtensor *w = &q->wt[jb->tensor];
        size_t bb = w->f->block_bytes;
        uint64_t pool_blocks = (uint64_t)w->sample_rows * (w->row_bytes / bb);
        uint64_t s = w->seed ^ ((uint64_t)jb->row0 * 0xD1B54A32D192ED03ull) ^ 0x5bd1e995u;
        uint8_t *dst = w->data + (size_t)jb->row0 * w->row_bytes;
        size_t n_blocks = (size_t)jb->n_rows * (w->row_bytes / bb);
        for (size_t b = 0; b < n_blocks; b++, dst += bb)
            memcpy(dst, w->data + (splitmix64(&s) % pool_blocks) * bb, bb);
    }
}

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

enum splash_status splash_model_write(const struct splash_registry *r,
                                      const struct splash_model_shape *shape,
                                      const struct splash_model_write_opts *opts,
                                      const char *path, struct splash_model_write_stats *stats,
                                      struct splash_err *err)
{
    double t0 = now_seconds();
    const char *mix = opts && opts->mix ? opts->mix : "Q4_K_M";
    uint64_t seed = opts ? opts->seed : 0;
    int64_t max_sample = opts ? opts->max_sample : 0;
    struct splash_model_plan *plan = NULL;
    enum splash_status st = splash_model_plan_create(r, shape, mix, &plan, err);
    if (st)
        return st;
    struct splash_builtin_vocab_opts vocab = {.harmony = !strcmp(shape->chat_format, "harmony"),
                                              .flint = !strcmp(shape->chat_format, "flint"),
                                              .chat_template = opts ? opts->chat_template : NULL};
    struct splash_pool *pool = opts ? opts->pool : NULL;
    int own_pool = !pool;
    struct splash_gguf_writer *w = splash_gguf_writer_create();
    struct wtensor *wt = calloc(plan->n_tensors, sizeof *wt);
    struct job *jobs = NULL;
    float **scratch = NULL;
    int n_threads = 0;
    char tmp[4096];
    tmp[0] = 0;
    if (own_pool)
        pool = splash_pool_create(opts ? opts->n_threads : 0);
    if (!w || !wt || !pool) {
        st = splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory");
        goto out_free;
    }
    if ((st = set_model_keys(w, shape, mix, opts ? opts->general_name : NULL, err)) ||
        (st = splash_builtin_vocab_write_opts(w, shape->n_vocab, &vocab, err)))
        goto out_free;

    /* buffers and jobs */
    size_t n_jobs = 0, max_row = 0;
    for (size_t i = 0; i < plan->n_tensors; i++) {
        struct wtensor *x = &wt[i];
        x->t = &plan->tensors[i];
        x->f = splash_registry_format_by_name(r, x->t->type_name);
        x->init = init_of(x->t);
        x->seed = seed * 0x9E3779B97F4A7C15ull ^ hash_name(x->t->name);
        x->rows = x->t->ne[1] * x->t->ne[2] * x->t->ne[3];
        x->row_bytes = splash_format_row_bytes(x->f, x->t->ne[0]);
        x->data = splash_alloc_aligned(64, x->row_bytes * (size_t)x->rows + 64);
        if (!x->data) {
            st = splash_err_set(err, SPLASH_ERR_NOMEM, "%s: out of memory for %zu bytes",
                                x->t->name, x->row_bytes * (size_t)x->rows);
            goto out_free;
        }
        int64_t per = CHUNK_ELEMS / x->t->ne[0] > 0 ? CHUNK_ELEMS / x->t->ne[0] : 1;
        x->sample_rows = x->rows;
        if (max_sample > 0 && x->rows * x->t->ne[0] > max_sample) {
            int64_t want = max_sample / x->t->ne[0];
            x->sample_rows = want < 1 ? 1 : want < x->rows ? want : x->rows;
        }
        n_jobs += (size_t)((x->sample_rows + per - 1) / per);
        n_jobs += (size_t)((x->rows - x->sample_rows + per - 1) / per);
        if ((size_t)x->t->ne[0] > max_row)
            max_row = (size_t)x->t->ne[0];
    }
    jobs = malloc(n_jobs * sizeof *jobs);
    n_threads = splash_pool_threads(pool);
    scratch = calloc((size_t)n_threads, sizeof *scratch);
    if (!jobs || !scratch) {
        st = splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory");
        goto out_free;
    }
    size_t scratch_elems = max_row > CHUNK_ELEMS ? max_row : CHUNK_ELEMS;
    for (int i = 0; i < n_threads; i++)
        if (!(scratch[i] = malloc((scratch_elems + 1) * sizeof(float)))) {
            st = splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory");
            goto out_free;
        }
    /* the quantizing jobs first, then the copying ones (which read the samples) */
    size_t k = 0, n_quant_jobs;
    for (int phase = 0; phase < 2; phase++) {
        for (size_t i = 0; i < plan->n_tensors; i++) {
            int64_t per = CHUNK_ELEMS / wt[i].t->ne[0] > 0 ? CHUNK_ELEMS / wt[i].t->ne[0] : 1;
            int64_t first = phase ? wt[i].sample_rows : 0;
            int64_t last = phase ? wt[i].rows : wt[i].sample_rows;
            for (int64_t row = first; row < last; row += per)
                jobs[k++] = (struct job){.tensor = (uint32_t)i, .row0 = row,
                                         .n_rows = last - row < per ? last - row : per};
        }
        if (!phase)
            n_quant_jobs = k;
    }
    struct quant_ctx q = {.wt = wt, .jobs = jobs, .scratch = scratch};
    splash_pool_parallel_for(pool, (int64_t)n_quant_jobs, 1, quant_range, &q);
    q.jobs = jobs + n_quant_jobs;
    splash_pool_parallel_for(pool, (int64_t)(n_jobs - n_quant_jobs), 1, copy_range, &q);

    for (size_t i = 0; i < plan->n_tensors; i++) {
        const struct splash_model_plan_tensor *t = wt[i].t;
        if ((st = splash_gguf_writer_add_tensor(w, t->name, t->gguf_type, t->n_dims, t->ne,
                                                wt[i].data, wt[i].row_bytes * (uint64_t)wt[i].rows,
                                                err)))
            goto out_free;
    }

    /* atomically: a temporary name beside the target, then rename */
    int len = snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    if (len < 0 || (size_t)len >= sizeof tmp) {
        tmp[0] = 0;
        st = splash_err_set(err, SPLASH_ERR_INVALID, "%s: path too long", path);
        goto out_free;
    }
    if ((st = splash_gguf_writer_write_file(w, tmp, err)))
        goto out_unlink;
    if (rename(tmp, path) != 0) {
        st = splash_err_set(err, SPLASH_ERR_IO, "%s: rename: %s", path, strerror(errno));
        goto out_unlink;
    }
    tmp[0] = 0;
    if (stats) {
        struct stat sb;
        stats->n_tensors = plan->n_tensors;
        stats->n_params = plan->n_params;
        stats->file_bytes = stat(path, &sb) == 0 ? (uint64_t)sb.st_size : 0;
        stats->seconds = now_seconds() - t0;
    }
out_unlink:
    if (tmp[0])
        unlink(tmp);
out_free:
    if (scratch)
        for (int i = 0; i < n_threads; i++)
            free(scratch[i]);
    free(scratch);
    free(jobs);
    if (wt)
        for (size_t i = 0; i < plan->n_tensors; i++)
            splash_free_aligned(wt[i].data);
    free(wt);
    splash_gguf_writer_destroy(w);
    if (own_pool)
        splash_pool_destroy(pool);
    splash_model_plan_free(plan);
    return st;
}

enum splash_status splash_model_write_preset(const struct splash_registry *r, const char *name,
                                             const struct splash_model_write_opts *opts,
                                             const char *path,
                                             struct splash_model_write_stats *stats,
                                             struct splash_err *err)
{
    struct splash_model_shape *shape = malloc(sizeof *shape);
    if (!shape)
        return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory");
    enum splash_status st = splash_model_shape_find(r, NULL, name, shape, err);
    if (!st)
        st = splash_model_write(r, shape, opts, path, stats, err);
    free(shape);
    return st;
}
