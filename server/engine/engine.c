/* The engine loop. Each step batches one token of every decoding request with
 * one chunk of the oldest waiting prompt, so weights are read once per step for
 * all lanes; requests join and leave between steps. */
#include "server/engine/engine.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <sys/mman.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "server/engine/cache_namespace.h"
#include "server/engine/engine_cache.h"
#include "server/engine/protocol.h"
#include "server/text/grammar/grammar.h"
#include "core/family.h"
#include "core/host_impl.h"
#include "core/memory_plan.h"
#include "server/engine/expert_memory.h"
#include "server/engine/expert_memory_elastic.h"
#include "core/meta.h"
#include "core/model_load.h"
#include "core/registry.h"
#include "server/text/tokenizer/tokenizer.h"
#include "kernels/kernels_impl.h"
#include "server/engine/sampling.h"
#include "core/draft.h"
#include "server/engine/spec_budget.h"
#include "server/engine/spec_draft.h"
#include "server/engine/speculate.h"

enum req_state { REQ_PREFILL, REQ_DECODE };

struct request {
    uint64_t id;
    int32_t *prompt;    /* the prompt, then the tokens generated (replayed after a yield) */
    int32_t n_prompt, n_prefilled;
    int32_t cap_tokens;
    int32_t n_fill;     /* tokens to prefill: the prompt, or prompt and output after a yield */
    int32_t reuse;      /* the chat format's reuse token (turn boundaries), -1: none */
    int32_t cached;     /* prompt tokens the first start took from the prefix cache */
    int32_t last_point; /* the latest restore point this request took */
    int32_t n_fed;      /* tokens the sampler has seen */
    int started;        /* the front has been told the request started */
    void *seq;
    struct splash_sampler sampler;
    int32_t max_tokens, n_gen;
    int32_t stop_ids[32];
    int n_stop;
    int logprobs, top_logprobs;
    int32_t last;       /* the token the next decode step feeds */
    /* thinking budget (server.md "Thinking token budget") */
    int in_thinking, counting;
    int64_t think_budget, think_count;  /* budget < 0: no cap */
    int32_t think_close, call_open;
    int32_t think_end[64];
    int n_think_end, forced_next;       /* forced_next < n_think_end: forcing the end */
    /* output constraint (response_format, forced tool calls) */
    struct splash_grammar *grammar;
    struct splash_grammar_matcher *matcher;
    /* logit_bias: added to these tokens' logits before any mask and sampling */
    int32_t *bias_ids;
    float *bias;
    int n_bias;
    int32_t pos;        /* tokens in the sequence */
    /* speculation: this cycle's verify rows (the anchor, then the proposals) and counts */
    int32_t verify[SPLASH_SPEC_MAX_ROWS];
    int32_t n_verify;
    int64_t spec_proposed, spec_accepted, spec_cycles;
    /* the draft: its context (the taps of positions 0 .. dctx_rows - 1), usable only when
     * it holds every committed row (a start from the prefix cache takes the context kept
     * beside its restore point, or has none); this cycle's selector candidates when it
     * proposed for a sampled lane */
    void *dctx;
    int32_t dctx_rows;
    int draft_ok, drafted;
    int32_t cand_ids[(SPLASH_SPEC_MAX_ROWS - 1) * 16];
    float cand_p[(SPLASH_SPEC_MAX_ROWS - 1) * 16];
    enum req_state state;
    struct request *next;
};

struct engine {
    const struct splash_engine_opts *opts;
    struct splash_loaded_model *lm;
    struct request *reqs;        /* admission order */
    int n_active;                /* requests holding a sequence */
    int64_t n_ctx;
    float *logits;               /* (max_lanes + 1, n_vocab) */
    struct splash_lane *lanes;
    struct request **lane_req;
    /* the step's prompt chunk as runs (family ABI 1.3): their ends as prompt positions,
     * then (from cap_runs on) as offsets into the lane; restore points asked and made */
    struct splash_lane_runs *lane_runs;
    int32_t *run_pos;
    uint8_t *run_fork;
    void **run_forks;
    int32_t n_runs, cap_runs;
    int max_lanes;
    int stopping;
    /* --decode-share: measured step costs (EMA, seconds) size the prompt chunks */
    double t_decode_step, t_prefill_token;
    int prefill_turn; /* decode share 0: steps alternate prefill and decode */
    /* grammars: built on the first constrained request */
    struct splash_tokenizer *tok;
    struct splash_grammar_vocab *gvocab;
    struct splash_grammar_format gformat;
    int gformat_calls;  /* -1 until initialised */
    uint32_t *mask;
    /* single-byte and special tokens: every completion can be written with them */
    int32_t *closers;
    int n_closers;
    struct splash_engine_cache cache; /* prefix cache and the caches' memory */
    struct splash_expert_elastic elastic; /* an automatic expert store's elastic chunks */
    int experts_stream;                   /* the model's routed experts stream (a store) */
    /* speculative decoding: the proposer (NULL: off), verify rows' logits, the counts */
    struct splash_proposer *proposer;
    struct splash_spec_draft draft; /* draft.model NULL: no draft */
    float **tap_rows;               /* a step's lanes' taps (NULL: none for that lane) */
    struct request *capture_req;    /* whose restore points are being taken, and its lane */
    int capture_lane;
    struct splash_taps taps;
    int budget_on; /* --verify-rows auto on a MoE target: the verify budget picks the rows */
    struct splash_verify_budget budget;
    float *vlogits;
    size_t vlogits_rows;
    uint64_t spec_proposed, spec_accepted, spec_cycles;
};

static uint64_t counted_bytes(const struct engine *e);

static double mono_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double ema(double old, double sample)
{
    return old > 0 ? 0.8 * old + 0.2 * sample : sample;
}

/* Prompt tokens this step, while n_decode requests generate: decode time owed per
 * unit of prefill time is the decode share (server.md "Server options"). */
static int32_t prefill_chunk(const struct engine *e, int n_decode)
{
    /* a MoE whose experts stream reads each layer's experts once a step: steps of eight
     * chunks (the family runs them layer by layer as one group) read them half as often */
    int32_t most = (e->experts_stream ? 8 : 4) * e->opts->prefill_chunk;
    if (!n_decode || e->opts->decode_share <= 0)
        return most;
    if (e->t_decode_step <= 0 || e->t_prefill_token <= 0)
        return e->opts->prefill_chunk;
    double tokens = e->t_decode_step / (e->opts->decode_share * e->t_prefill_token);
    if (tokens < 16)
        return 16;
    return tokens > most ? most : (int32_t)tokens;
}

static void send_error(struct engine *e, uint64_t id, const char *code, const char *message)
{
    json_t *b = json_pack("{s:s, s:s}", "code", code, "message", message);
    struct splash_err err;
    splash_frame_write(e->opts->fd, SPLASH_FRAME_ERROR, id, b, &err);
    json_decref(b);
}

static void request_free(struct engine *e, struct request *r)
{
    splash_ecache_request_ended(&e->cache, r->id); /* its points may be copied ahead */
    if (r->seq) {
        splash_family_seq_destroy(e->lm->family, e->lm->model, r->seq);
        e->n_active--;
    }
    if (r->dctx)
        splash_draft_ctx_destroy(e->draft.plugin, e->draft.model, r->dctx);
    if (r->matcher)
        splash_grammar_matcher_destroy(r->matcher);
    if (r->grammar)
        splash_grammar_destroy(r->grammar);
    splash_sampler_free(&r->sampler);
    free(r->bias_ids);
    free(r->bias);
    free(r->prompt);
    free(r);
}

static void request_remove(struct engine *e, struct request *r)
{
    for (struct request **p = &e->reqs; *p; p = &(*p)->next)
        if (*p == r) {
            *p = r->next;
            break;
        }
    request_free(e, r);
}

static json_t *experts_status(const struct engine *e);

static void finish(struct engine *e, struct request *r, const char *reason)
{
    json_t *b = json_pack("{s:s, s:i, s:i, s:i}", "finish_reason", reason, "prompt_tokens",
                          r->n_prompt, "cached_tokens", r->cached, "completion_tokens", r->n_gen);
    if (e->proposer)
        json_object_set_new(b, "speculation",
                            json_pack("{s:I, s:I, s:I}", "proposed", (json_int_t)r->spec_proposed,
                                      "accepted", (json_int_t)r->spec_accepted, "cycles",
                                      (json_int_t)r->spec_cycles));
    /* the prefix cache and the experts' store as this request leaves them, for /status */
    json_object_set_new(b, "prefix_cache", splash_ecache_status(&e->cache, counted_bytes(e)));
    json_t *experts = experts_status(e);
    if (experts)
        json_object_set_new(b, "streamed_experts", experts);
    struct splash_err err;
    splash_frame_write(e->opts->fd, SPLASH_FRAME_DONE, r->id, b, &err);
    json_decref(b);
    request_remove(e, r);
}

/* The tokenizer, vocabulary index and format a constrained request needs, built once. */
static enum splash_status grammar_setup(struct engine *e, const struct request *r,
                                       enum splash_grammar_call_syntax want, struct splash_err *err)
{
    enum splash_status st;
    if (!e->tok && (st = splash_tokenizer_load(e->lm->meta->path, &e->tok, err)))
        return st;
    if (!e->gvocab) {
        if ((st = splash_grammar_vocab_create(e->tok, r->stop_ids, (size_t)r->n_stop, &e->gvocab, err)))
            return st;
        e->mask = malloc(splash_grammar_mask_words(e->gvocab) * sizeof *e->mask);
        size_t n_tok = splash_tokenizer_n_tokens(e->tok);
        e->closers = malloc(n_tok * sizeof *e->closers);
        if (!e->mask || !e->closers)
            return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory for the token mask");
        for (size_t i = 0; i < n_tok; i++) {
            size_t len;
            int type = splash_tokenizer_token_type(e->tok, (int32_t)i);
            const char *piece = splash_tokenizer_piece(e->tok, (int32_t)i, SPLASH_DETOK_SPECIAL, &len);
            if ((piece && len == 1) || type == SPLASH_TOKEN_CONTROL || type == SPLASH_TOKEN_USER_DEFINED)
                e->closers[e->n_closers++] = (int32_t)i;
        }
    }
    if (e->gformat_calls != (int)want) {
        if ((st = splash_grammar_format_init(&e->gformat, want, e->tok, err)))
            return st;
        e->gformat_calls = (int)want;
    }
    return SPLASH_OK;
}

/* Takes a request from its SUBMIT frame: the typed request the front read, checked
 * against this model (vocabulary, context) and made ready to prefill. */
static void submit(struct engine *e, uint64_t id, const json_t *body)
{
    struct splash_submit s;
    struct splash_err err;
    enum splash_status st = splash_submit_from_json(body, &s, &err);
    if (st) {
        send_error(e, id, st == SPLASH_ERR_NOMEM ? "capacity_exhausted" : "invalid_request", err.msg);
        return;
    }
    const struct splash_gen_params *p = &s.params;
    int64_t n_prompt = (int64_t)s.n_prompt;
    if (n_prompt >= e->n_ctx) {
        char msg[160];
        snprintf(msg, sizeof msg, "the prompt's %lld tokens fill the %lld-token context",
                 (long long)n_prompt, (long long)e->n_ctx);
        send_error(e, id, "context_length_exceeded", msg);
        splash_submit_free(&s);
        return;
    }
    for (size_t i = 0; i < s.n_prompt; i++)
        if (s.prompt[i] >= e->lm->info.n_vocab) {
            send_error(e, id, "invalid_request", "a prompt token is out of the vocabulary");
            splash_submit_free(&s);
            return;
        }
    for (size_t i = 0; i < p->n_logit_bias; i++)
        if (p->logit_bias[i].token >= e->lm->info.n_vocab) {
            char msg[160];
            snprintf(msg, sizeof msg, "logit_bias: token %lld is past the vocabulary's %lld tokens",
                     (long long)p->logit_bias[i].token, (long long)e->lm->info.n_vocab);
            send_error(e, id, "invalid_request", msg);
            splash_submit_free(&s);
            return;
        }
    struct request *r = calloc(1, sizeof *r);
    if (!r) {
        send_error(e, id, "capacity_exhausted", "out of memory for the request");
        splash_submit_free(&s);
        return;
    }
    r->id = id;
    r->prompt = s.prompt; /* the request owns it now */
    s.prompt = NULL;
    r->n_prompt = r->n_fill = r->cap_tokens = (int32_t)n_prompt;
    r->reuse = s.reuse_token;
    int64_t room = e->n_ctx - n_prompt;
    r->max_tokens = (int32_t)(p->max_tokens > 0 && p->max_tokens < room ? p->max_tokens : room);
    memcpy(r->stop_ids, s.stop_ids, sizeof r->stop_ids);
    r->n_stop = s.n_stop;
    struct splash_sampling_params sp = p->sampling;
    if (!p->has_seed)
        sp.seed = (uint64_t)time(NULL) ^ id * 0x9e3779b97f4a7c15ull;
    r->think_budget = -1;
    r->forced_next = 0;
    if (p->think.on) {
        r->in_thinking = 1;
        r->counting = 1;
        r->think_budget = p->think.budget;
        r->think_close = p->think.close;
        r->call_open = p->think.call_open;
        memcpy(r->think_end, p->think.end, sizeof r->think_end);
        r->n_think_end = p->think.n_end;
        r->forced_next = r->n_think_end; /* nothing forced yet */
        if (r->think_budget == 0 && r->n_think_end)
            r->forced_next = 0;
    }
    r->logprobs = p->logprobs;
    r->top_logprobs = p->top_logprobs;
    if (splash_sampler_init(&r->sampler, &sp, (int32_t)e->lm->info.n_vocab) != 0) {
        free(r->prompt);
        free(r);
        send_error(e, id, "capacity_exhausted", "out of memory for the sampler");
        splash_submit_free(&s);
        return;
    }
    if (p->n_logit_bias) {
        size_t n = p->n_logit_bias;
        r->bias_ids = malloc(n * sizeof *r->bias_ids);
        r->bias = malloc(n * sizeof *r->bias);
        if (!r->bias_ids || !r->bias) {
            send_error(e, id, "capacity_exhausted", "out of memory for logit_bias");
            request_free(e, r);
            splash_submit_free(&s);
            return;
        }
        for (size_t i = 0; i < n; i++) {
            r->bias_ids[i] = p->logit_bias[i].token;
            r->bias[i] = p->logit_bias[i].bias;
        }
        r->n_bias = (int)n;
    }
    if (p->grammar) {
        json_error_t jerr;
        json_t *spec = json_loads(p->grammar, 0, &jerr);
        if (!spec)
            splash_err_set(&err, SPLASH_ERR_INVALID, "SUBMIT: grammar: %s", jerr.text);
        if (!spec || grammar_setup(e, r, p->grammar_calls, &err) ||
            splash_grammar_compile_spec(spec, &e->gformat, &r->grammar, &err) ||
            splash_grammar_matcher_create(r->grammar, e->gvocab, &r->matcher, &err)) {
            send_error(e, id, "invalid_request", err.msg);
            json_decref(spec);
            request_free(e, r);
            splash_submit_free(&s);
            return;
        }
        json_decref(spec);
    }
    splash_submit_free(&s);
    r->state = REQ_PREFILL;
    struct request **tail = &e->reqs;
    while (*tail)
        tail = &(*tail)->next;
    *tail = r;
}

static struct request *find(struct engine *e, uint64_t id)
{
    for (struct request *r = e->reqs; r; r = r->next)
        if (r->id == id)
            return r;
    return NULL;
}

/* What proposes: the draft (prompt lookup standing in where its context is incomplete),
 * prompt lookup, or nothing. */
static const char *spec_mode_name(const struct engine *e)
{
    return e->draft.model ? (e->draft.meta ? "dflash" : "mtp")
           : e->proposer  ? e->proposer->name
                          : "off";
}

/* The rule that sets how many rows a cycle verifies (server.md --verify-rows). */
static const char *verify_rule(const struct engine *e)
{
    return !e->proposer ? "off" : e->budget_on ? "budget" : "all";
}

/* One use of the streamed experts' store, for /status. */
static json_t *expert_use_json(const struct splash_expert_use *u)
{
    /* a hit: resident before the step asked, by the store or a read-ahead */
    return json_pack("{s:I, s:I, s:I, s:I, s:I, s:f, s:I, s:f}", "loads", (json_int_t)u->loads,
                     "routed", (json_int_t)u->routed, "read", (json_int_t)u->read, "read_ahead",
                     (json_int_t)u->read_ahead, "read_ahead_used",
                     (json_int_t)u->read_ahead_used, "hit_rate",
                     u->routed ? 1.0 - (double)u->read / (double)u->routed : 0.0, "bytes_read",
                     (json_int_t)u->bytes_read, "read_seconds", u->read_seconds);
}

static void console_line(void *ctx, const char *line)
{
    (void)ctx;
    fprintf(stderr, "%s\n", line);
}

/* The streamed experts' store (server.md "Streamed experts"), or NULL when the model's
 * experts load whole. */
static json_t *experts_status(const struct engine *e)
{
    struct splash_expert_stats s;
    if (!splash_family_expert_stats(e->lm->family, e->lm->model, &s))
        return NULL;
    json_t *j = json_pack("{s:I, s:I, s:i, s:i, s:I, s:I, s:I, s:I, s:i, s:i, s:i, s:i, s:b}",
                          "cap_bytes", (json_int_t)s.cap_bytes, "floor_bytes",
                          (json_int_t)s.floor_bytes, "chunks", s.chunks, "cap_chunks",
                          s.cap_chunks, "shrinks", (json_int_t)s.shrinks, "regrows",
                          (json_int_t)s.regrows, "arena_bytes", (json_int_t)s.arena_bytes,
                          "staging_bytes", (json_int_t)s.staging_bytes, "slots", s.slots,
                          "experts", s.experts, "resident", s.resident, "readers", s.readers,
                          "direct_reads", s.direct);
    json_object_set_new(j, "prefill", expert_use_json(&s.prefill));
    json_object_set_new(j, "decode", expert_use_json(&s.decode));
    json_object_set_new(j, "failure", s.failure[0] ? json_string(s.failure) : json_null());
    return j;
}

/* The engine's speculation counts and rule, for /status and /metrics. */
static json_t *spec_status(const struct engine *e)
{
    return json_pack("{s:s, s:s, s:I, s:I, s:I}", "mode", spec_mode_name(e), "verify_rows",
                     verify_rule(e),
                     "proposed",
                     (json_int_t)e->spec_proposed, "accepted", (json_int_t)e->spec_accepted,
                     "cycles", (json_int_t)e->spec_cycles);
}

static void send_status(struct engine *e, uint64_t id)
{
    int active = 0, waiting = 0;
    for (struct request *r = e->reqs; r; r = r->next)
        r->seq ? active++ : waiting++;
    json_t *b = json_pack("{s:i, s:i, s:i}", "active", active, "waiting", waiting, "max_lanes",
                          e->max_lanes);
    json_object_set_new(b, "prefix_cache", splash_ecache_status(&e->cache, counted_bytes(e)));
    json_object_set_new(b, "speculation", spec_status(e));
    struct splash_err err;
    splash_frame_write(e->opts->fd, SPLASH_FRAME_STATUS, id, b, &err);
    json_decref(b);
}

/* The expert store after a chunk went or came back, for /status. */
static void send_experts(struct engine *e)
{
    json_t *se = experts_status(e);
    if (!se)
        return;
    json_t *b = json_pack("{s:o}", "streamed_experts", se);
    struct splash_err err;
    splash_frame_write(e->opts->fd, SPLASH_FRAME_STATUS, 0, b, &err);
    json_decref(b);
}

/* Drops the mapped weights' pages; the next step faults them back from the files. */
static void release_weights(struct engine *e)
{
    const struct splash_meta *m = e->lm->meta;
    size_t released = 0;
    for (size_t i = 0; i < m->n_parts; i++)
        if (m->parts[i]->map && madvise(m->parts[i]->map, m->parts[i]->map_size, MADV_DONTNEED) == 0)
            released += m->parts[i]->map_size;
    size_t images = splash_matmul_release_images();
    uint64_t chunks = splash_expert_elastic_release(&e->elastic, console_line, NULL);
    splash_log(SPLASH_LOG_INFO, NULL,
               "Memory released · %.1f MiB of mapped weights, %.1f MiB of repacked weights, "
               "%.1f MiB of the expert store's elastic chunks",
               (double)released / (1024.0 * 1024.0), (double)images / (1024.0 * 1024.0),
               (double)chunks / (1024.0 * 1024.0));
    if (chunks)
        send_experts(e);
}

/* Reads every frame that is ready; waits up to wait_ms for the first (-1: as long as it
 * takes). -1: the front is gone. */
static int read_frames(struct engine *e, int wait_ms)
{
    for (int block = wait_ms;;) {
        struct pollfd p = {.fd = e->opts->fd, .events = POLLIN};
        int rc = poll(&p, 1, block);
        if (rc < 0 && errno == EINTR)
            continue;
        if (rc <= 0)
            return 0;
        struct splash_frame f;
        struct splash_err err;
        if (splash_frame_read(e->opts->fd, &f, &err) != SPLASH_OK)
            return -1;
        block = 0;
        struct request *r;
        switch (f.type) {
        case SPLASH_FRAME_SUBMIT:
            submit(e, f.id, f.body);
            break;
        case SPLASH_FRAME_CANCEL:
            if ((r = find(e, f.id)))
                finish(e, r, "cancelled");
            break;
        case SPLASH_FRAME_STATUS_REQ:
            send_status(e, f.id);
            break;
        case SPLASH_FRAME_RELEASE:
            release_weights(e);
            break;
        case SPLASH_FRAME_SHUTDOWN:
            e->stopping = 1;
            break;
        default:
            break;
        }
        splash_frame_free(&f);
    }
}

static int is_stop(const struct request *r, int32_t t)
{
    for (int i = 0; i < r->n_stop; i++)
        if (r->stop_ids[i] == t)
            return 1;
    return 0;
}

/* Near the output limit a constrained reply must still close: once the tokens left
 * barely cover the bytes that complete the grammar, take the token that leaves the
 * least to write (trial accept and undo), among the likeliest allowed tokens and
 * every single-byte and special token, so each step shortens the rest by one at
 * least; ties go to the likelier token. */
static int32_t steer_to_close(struct engine *e, struct request *r, const float *logits,
                              int32_t sampled)
{
    size_t need = splash_grammar_matcher_distance(r->matcher);
    int32_t left = r->max_tokens - r->n_gen;
    if (need == SIZE_MAX)
        return sampled;
    if ((size_t)left > need + 16) {
        /* a token that opens more than the tokens left can close (another tool call late in
         * the reply) is steered too: the distance jumps with it */
        struct splash_err err;
        if (splash_grammar_matcher_accept_token(r->matcher, sampled, &err) != SPLASH_OK)
            return sampled;
        size_t after = splash_grammar_matcher_is_stopped(r->matcher)
                           ? 0
                           : splash_grammar_matcher_distance(r->matcher);
        splash_grammar_matcher_rollback(r->matcher, 1);
        if (after == SIZE_MAX || after + 16 < (size_t)left)
            return sampled;
    }
    enum { LIKELY = 32 };
    int32_t likely[LIKELY];
    int n_likely = 0;
    int64_t n_vocab = e->lm->info.n_vocab;
    for (int64_t i = 0; i < n_vocab; i++) {
        if (logits[i] == -INFINITY)
            continue;
        if (n_likely < LIKELY) {
            likely[n_likely++] = (int32_t)i;
            continue;
        }
        int worst = 0;
        for (int k = 1; k < n_likely; k++)
            if (logits[likely[k]] < logits[likely[worst]])
                worst = k;
        if (logits[i] > logits[likely[worst]])
            likely[worst] = (int32_t)i;
    }
    int32_t best = sampled;
    size_t best_need = SIZE_MAX;
    struct splash_err err;
    for (int k = 0; k < n_likely + e->n_closers; k++) {
        int32_t id = k < n_likely ? likely[k] : e->closers[k - n_likely];
        if (id >= n_vocab || logits[id] == -INFINITY)
            continue; /* the mask refuses it here */
        if (splash_grammar_matcher_accept_token(r->matcher, id, &err) != SPLASH_OK)
            continue;
        size_t d = splash_grammar_matcher_is_stopped(r->matcher) ? 0
                                                                 : splash_grammar_matcher_distance(r->matcher);
        splash_grammar_matcher_rollback(r->matcher, 1);
        if (d < best_need || (d == best_need && logits[id] > logits[best])) {
            best = id;
            best_need = d;
        }
    }
    return best;
}

/* Keeps a generated token after the prompt, so a request that yields its lane can
 * prefill its output again; without room it cannot yield. */
static void keep_output(struct request *r, int32_t t)
{
    int32_t at = r->n_prompt + r->n_gen - 1;
    if (r->cap_tokens < 0)
        return;
    if (at >= r->cap_tokens) {
        int32_t cap = r->cap_tokens * 2 + 64;
        int32_t *grown = realloc(r->prompt, (size_t)cap * sizeof *grown);
        if (!grown) {
            r->cap_tokens = -1;
            return;
        }
        r->prompt = grown;
        r->cap_tokens = cap;
    }
    r->prompt[at] = t;
}

/* Chooses and commits the request's next token from logits. proposed >= 0: the token a
 * proposer guessed here (drawn from q_ids/q_probs when n_q > 0, else deterministic); the
 * choice keeps the target's distribution exact and counts the proposal accepted when it
 * is the token chosen. Returns 1 while the request goes on, 0
 * once it ended (it is freed then). */
static int emit_token(struct engine *e, struct request *r, float *logits, int32_t proposed,
                      const int32_t *q_ids, const float *q_probs, int n_q)
{
    struct splash_token_logprob top[20];
    float lp = 0;
    int n_top = r->top_logprobs;
    int32_t t;
    /* under a grammar, thinking ends only between whole characters */
    int force = r->forced_next < r->n_think_end &&
                (!r->matcher || r->forced_next > 0 ||
                 splash_grammar_matcher_thinking_at_char_boundary(r->matcher));
    if (force) {
        /* the budget ran out: the thinking end is selected, not sampled */
        t = r->think_end[r->forced_next++];
        splash_sampler_accept(&r->sampler, t);
        n_top = 0;
    } else {
        for (int i = 0; i < r->n_bias; i++)
            logits[r->bias_ids[i]] += r->bias[i];
        if (r->matcher) {
            splash_grammar_matcher_fill_mask(r->matcher, e->mask);
            splash_grammar_mask_apply(e->mask, splash_grammar_vocab_n_tokens(e->gvocab), logits,
                                      (size_t)e->lm->info.n_vocab);
        }
        t = splash_sampler_sample_drafted(&r->sampler, logits, proposed, q_ids, q_probs, n_q,
                                          NULL, r->logprobs ? &lp : NULL, n_top ? top : NULL,
                                          n_top);
        if (r->matcher)
            t = steer_to_close(e, r, logits, t);
    }
    if (proposed >= 0 && t == proposed) {
        r->spec_accepted++;
        e->spec_accepted++;
    }
    if (r->matcher) {
        struct splash_err err;
        if (splash_grammar_matcher_accept_token(r->matcher, t, &err) != SPLASH_OK) {
            /* a masked pick never fails; a forced end the grammar refuses ends the request */
            send_error(e, r->id, "engine_failed", err.msg);
            request_remove(e, r);
            return 0;
        }
    }
    if (r->in_thinking) {
        if (t == r->think_close) {
            r->in_thinking = 0;
            r->forced_next = r->n_think_end;
        } else if (t == r->call_open) {
            r->counting = 0; /* a call's opening ends the count; the end never lands inside it */
        } else if (r->counting && r->forced_next >= r->n_think_end && r->think_budget >= 0 &&
                   ++r->think_count >= r->think_budget) {
            r->forced_next = 0;
        }
    }
    if (is_stop(r, t)) {
        finish(e, r, "stop");
        return 0;
    }
    r->n_gen++;
    r->n_fed++;
    keep_output(r, t);
    json_t *b = json_pack("{s:[i]}", "t", t);
    if (r->logprobs) {
        json_object_set_new(b, "lp", json_pack("[f]", (double)lp));
        json_t *alts = json_array();
        for (int i = 0; i < n_top; i++)
            json_array_append_new(alts, json_pack("[i,f]", top[i].id, (double)top[i].logprob));
        json_object_set_new(b, "top", json_pack("[o]", alts));
    }
    struct splash_err err;
    splash_frame_write(e->opts->fd, SPLASH_FRAME_TOKENS, r->id, b, &err);
    json_decref(b);
    r->last = t;
    r->state = REQ_DECODE;
    if (r->n_gen >= r->max_tokens) {
        finish(e, r, "length");
        return 0;
    }
    return 1;
}

static struct splash_prefill_plan plan_of(const struct request *r)
{
    return (struct splash_prefill_plan){.tokens = r->prompt, .n = r->n_fill, .reuse = r->reuse};
}

/* What the engine's sequences hold by its own count, for a family that does not say. */
static uint64_t counted_bytes(const struct engine *e)
{
    uint64_t b = 0;
    for (const struct request *r = e->reqs; r; r = r->next)
        if (r->seq)
            b += (uint64_t)r->pos * e->cache.kv_bytes_per_token + e->cache.state_bytes;
    return b;
}

/* Gives the request's lane back: its caches go, and it prefills its prompt and output
 * again (from the prefix cache where it can) once memory allows. */
static void yield_lane(struct engine *e, struct request *r)
{
    splash_log(SPLASH_LOG_INFO, NULL,
               "Request %llu yields its lane at token %d: memory is short for the others",
               (unsigned long long)r->id, r->pos);
    splash_family_seq_destroy(e->lm->family, e->lm->model, r->seq);
    r->seq = NULL;
    e->n_active--;
    r->draft_ok = 0;
    if (r->state == REQ_DECODE)
        r->n_fill = r->n_prompt + r->n_gen - 1;
    r->state = REQ_PREFILL;
    r->pos = r->n_prefilled = r->last_point = 0;
}

static void fail_capacity(struct engine *e, struct request *r, int lane, int32_t n_tokens,
                          const char *what)
{
    char msg[512];
    snprintf(msg, sizeof msg,
             "lane %d (Resident), %s at token %d: no memory for %s; the caches hold %.1f MiB of the "
             "memory plan's %.1f MiB for KV and states, no other request holds memory and no "
             "cached prefix is left to evict",
             lane, r->state == REQ_PREFILL ? "prefill" : "decode", r->pos + n_tokens, what,
             (double)splash_ecache_used(&e->cache, counted_bytes(e)) / 1048576.0,
             (double)e->cache.pool / 1048576.0);
    send_error(e, r->id, "capacity_exhausted", msg);
    request_remove(e, r);
}

/* The newest request holding a sequence that can give it back. */
static struct request *newest_holder(struct engine *e)
{
    struct request *v = NULL;
    for (struct request *r = e->reqs; r; r = r->next)
        if (r->seq && r->cap_tokens >= 0)
            v = r;
    return v;
}

/* A request's draft context for a sequence started at `cached` tokens: empty from the
 * start, or the one kept beside the restore point it resumed from; without one the draft
 * does not propose for it (prompt lookup stands in). */
static void draft_start(struct engine *e, struct request *r, int32_t cached)
{
    struct splash_err err;
    r->draft_ok = 0;
    r->dctx_rows = 0;
    if (!e->draft.model)
        return;
    if (cached > 0) {
        void *kept = splash_spec_draft_resume(&e->draft, r->prompt, cached);
        if (!kept)
            return;
        splash_draft_ctx_destroy(e->draft.plugin, e->draft.model, r->dctx);
        r->dctx = kept;
        r->dctx_rows = cached;
        r->draft_ok = 1;
        return;
    }
    if (r->dctx && splash_draft_rollback(e->draft.plugin, e->draft.model, r->dctx, 0, &err))
        return;
    if (!r->dctx && splash_draft_ctx_create(e->draft.plugin, e->draft.model, &r->dctx, &err)) {
        r->dctx = NULL;
        return;
    }
    r->draft_ok = 1;
}

/* Starts a request on a sequence, resumed from the prefix cache where it can be.
 * 1: started; 0: it waits for memory; -1: it ended (alone and memory holds nothing). */
static int admit(struct engine *e, struct request *r, int lane)
{
    struct splash_prefill_plan plan = plan_of(r);
    struct splash_err err;
    int32_t cached = 0;
    int alone = e->n_active == 0;
    if (splash_ecache_prefetch(&e->cache, &plan, counted_bytes(e)))
        return 0; /* its prefix is being read back from the SSD tier: the step goes on */
    /* a start may take every cached prefix nothing in use holds (server.md); beside other
     * requests it starts only where its state and its prompt's KV fit now, so a request
     * that yielded does not start again only to yield once more */
    int32_t can = splash_ecache_peek(&e->cache, &plan);
    uint64_t need = e->cache.state_bytes +
                    splash_ecache_lane_need(&e->cache, can, r->n_fill - can, 0);
    if (!splash_ecache_make_room(&e->cache, counted_bytes(e), alone ? e->cache.state_bytes : need,
                                 1) &&
        !alone)
        return 0;
    int from_disk = 0;
    if (splash_ecache_resume(&e->cache, &plan, &r->seq, &cached, &from_disk, counted_bytes(e),
                             &err) != SPLASH_OK) {
        r->seq = NULL;
        if (!alone)
            return 0;
        char what[300];
        snprintf(what, sizeof what, "its caches at admission (%s)", err.msg);
        fail_capacity(e, r, lane, 0, what);
        return -1;
    }
    e->n_active++;
    r->pos = r->n_prefilled = r->last_point = cached;
    draft_start(e, r, cached);
    e->cache.reused += (uint64_t)cached;
    for (int32_t k = r->n_fed; k < cached; k++)
        splash_sampler_accept(&r->sampler, r->prompt[k]);
    if (r->n_fed < cached)
        r->n_fed = cached;
    if (!r->started)
        r->cached = cached;
    /* the request is in a lane (quarantine counts only these), with what the cache gave:
     * the front's Started line says it once */
    json_t *b = json_pack("{s:i, s:b}", "cached", cached, "from_disk", from_disk);
    splash_frame_write(e->opts->fd, SPLASH_FRAME_STARTED, r->id, b, &err);
    json_decref(b);
    r->started = 1;
    return 1;
}

/* Room for the step's lanes within the memory plan: cached prefixes go first; then,
 * while other requests hold memory, the newest of them yields its lane; a request
 * alone with nothing left to evict fails. Returns the lanes left in the step. */
static int fit_step(struct engine *e, int n)
{
    while (n > 0) {
        uint64_t need = 0;
        for (int i = 0; i < n; i++)
            need += splash_ecache_lane_need(&e->cache, e->lanes[i].pos0, e->lanes[i].n_tokens, 0);
        if (splash_ecache_make_room(&e->cache, counted_bytes(e), need, 1))
            return n;
        struct request *v = e->n_active > 1 ? newest_holder(e) : NULL;
        if (!v) {
            char what[160];
            snprintf(what, sizeof what, "%.1f MiB more of KV pages",
                     (double)need / 1048576.0);
            for (int i = 0; i < n; i++)
                fail_capacity(e, e->lane_req[i], i, e->lanes[i].n_tokens, what);
            return 0;
        }
        yield_lane(e, v);
        for (int i = 0; i < n; i++)
            if (e->lane_req[i] == v) {
                memmove(&e->lanes[i], &e->lanes[i + 1], (size_t)(n - i - 1) * sizeof *e->lanes);
                memmove(&e->lane_req[i], &e->lane_req[i + 1],
                        (size_t)(n - i - 1) * sizeof *e->lane_req);
                n--;
                break;
            }
    }
    return 0;
}

/* Turn boundaries after pos in the request's prompt (restore points near its end are
 * the ones the next turn needs). */
static int32_t boundaries_after(const struct splash_prefill_plan *plan, int32_t pos)
{
    int32_t k = 0;
    for (int32_t p = pos + 1; p < plan->n; p++)
        k += splash_plan_is_boundary(plan, p);
    return k;
}

/* The draft's context takes rows pos0 .. pos0 + n - 1 of the request's committed tokens
 * (those it does not hold yet: a restore point within the step took the first ones); a
 * context that fails (out of memory) leaves the request to prompt lookup. */
static void draft_append(struct engine *e, struct request *r, const float *taps, int32_t pos0,
                         int32_t n)
{
    struct splash_err err;
    if (!r->draft_ok || r->dctx_rows < pos0 || r->dctx_rows > pos0 + n)
        return;
    int32_t held = r->dctx_rows - pos0;
    taps += (size_t)held * (size_t)splash_spec_draft_tap_width(&e->draft);
    pos0 += held;
    n -= held;
    if (!n)
        return;
    if (splash_draft_append_context(e->draft.plugin, e->draft.model, r->dctx, taps,
                                    splash_spec_draft_tap_width(&e->draft), pos0, n, &err)) {
        splash_log(SPLASH_LOG_INFO, NULL, "Request %llu decodes without its draft: %s",
                   (unsigned long long)r->id, err.msg);
        r->draft_ok = 0;
        return;
    }
    r->dctx_rows = pos0 + n;
}

/* A restore point joined the prefix cache (engine_cache.h hooks): the draft's context of the
 * request that took it, brought up to the point from the step's taps, is kept beside it. */
static void point_kept(void *ctx, void *point, const int32_t *tokens, int32_t n)
{
    struct engine *e = ctx;
    struct request *r = e->capture_req;
    int lane = e->capture_lane;
    if (!r || !e->tap_rows[lane] || n > e->lanes[lane].pos0 + e->lanes[lane].n_tokens)
        return;
    draft_append(e, r, e->tap_rows[lane], e->lanes[lane].pos0, n - e->lanes[lane].pos0);
    if (r->draft_ok && r->dctx_rows == n)
        splash_spec_draft_keep(&e->draft, point, tokens, n, r->dctx);
}

static void point_dropped(void *ctx, void *point)
{
    struct engine *e = ctx;
    splash_spec_draft_forget(&e->draft, point);
}

static uint64_t point_bytes(void *ctx)
{
    struct engine *e = ctx;
    return e->draft.points_bytes;
}

/* The taps of the step's rows for the lanes whose draft context goes on (each lane's rows
 * at its place in the draft's buffer), or NULL when none does. */
static const struct splash_taps *step_taps(struct engine *e, int n)
{
    size_t rows = 0;
    for (int i = 0; i < n; i++)
        if (e->lane_req[i]->draft_ok && e->lane_req[i]->dctx_rows == e->lanes[i].pos0)
            rows += (size_t)e->lanes[i].n_tokens;
    float *buf = rows ? splash_spec_draft_taps(&e->draft, rows) : NULL;
    for (int i = 0; i < n; i++) {
        struct request *r = e->lane_req[i];
        e->tap_rows[i] = NULL;
        if (buf && r->draft_ok && r->dctx_rows == e->lanes[i].pos0) {
            e->tap_rows[i] = buf;
            buf += (size_t)e->lanes[i].n_tokens * (size_t)splash_spec_draft_tap_width(&e->draft);
        }
    }
    if (!rows || !e->draft.taps)
        return NULL;
    e->taps = (struct splash_taps){.size = sizeof e->taps,
                                   .n_layers = e->draft.info.n_taps,
                                   .layers = e->draft.info.tap_layers,
                                   .rows = e->tap_rows};
    return &e->taps;
}

/* The draft's block for a request whose context holds every committed row: greedy lanes
 * take each row's best candidate, sampled lanes draw from the selector's distribution
 * (kept for the acceptance). Returns the proposals written after the anchor, -1 when the
 * draft cannot propose (prompt lookup then may). */
static int32_t draft_propose(struct engine *e, struct request *r, int32_t max)
{
    if (!e->draft.model || !r->draft_ok || r->dctx_rows != r->pos)
        return -1;
    if (max > e->draft.info.block_size - 1)
        max = e->draft.info.block_size - 1;
    int sampled = r->sampler.params.temperature > 0 && e->draft.info.top_k <= 16;
    float u[SPLASH_SPEC_MAX_ROWS];
    for (int32_t i = 0; sampled && i < max; i++)
        u[i] = (float)splash_sampler_uniform(&r->sampler);
    const struct splash_draft_block b = {.size = sizeof b,
                                         .anchor = r->last,
                                         .pos = r->pos,
                                         .n_rows = max,
                                         .uniforms = sampled ? u : NULL,
                                         .tokens = r->verify + 1,
                                         .cand_tokens = sampled ? r->cand_ids : NULL,
                                         .cand_probs = sampled ? r->cand_p : NULL,
                                         /* the MTP block's rows read the tokens too */
                                         .history = r->cap_tokens >= 0 &&
                                                            r->n_prompt + r->n_gen == r->pos + 1
                                                        ? r->prompt
                                                        : NULL};
    struct splash_err err;
    if (splash_draft_propose(e->draft.plugin, e->draft.model, r->dctx, &b, &err)) {
        splash_log(SPLASH_LOG_INFO, NULL, "Request %llu decodes without its draft: %s",
                   (unsigned long long)r->id, err.msg);
        r->draft_ok = 0;
        return -1;
    }
    r->drafted = sampled;
    return max;
}

/* Proposals for a decoding request's next cycle: no more than its output limit and the
 * context leave room for (a cycle emits its accepted proposals and one token more), none
 * where a grammar's reply must start closing (the steering near the limit picks tokens
 * itself). Writes them after the anchor in r->verify; returns how many. */
static int32_t propose(struct engine *e, struct request *r)
{
    if (!e->proposer)
        return 0;
    int32_t max = SPLASH_SPEC_MAX_ROWS - 1;
    int32_t left = r->max_tokens - r->n_gen - 1;
    int64_t room = e->n_ctx - r->pos - 1;
    if (left < max)
        max = left;
    if (room < max)
        max = (int32_t)room;
    if (r->matcher) {
        size_t need = splash_grammar_matcher_distance(r->matcher);
        if (need != SIZE_MAX && (size_t)(r->max_tokens - r->n_gen) <= need + 16 + SPLASH_SPEC_MAX_ROWS)
            return 0;
    }
    r->drafted = 0;
    if (max <= 0)
        return 0;
    int32_t k = draft_propose(e, r, max);
    if (k >= 0)
        return k;
    if (r->cap_tokens < 0)
        return 0; /* the output could not be kept: no history to look up */
    return e->proposer->propose(e->proposer, r->prompt, r->n_prompt + r->n_gen, max, r->verify + 1);
}

/* A MoE target's verify rows under the budget: the lanes' proposals cut to the depth
 * that maximises expected tokens per unit of the step's cost. */
static void budget_rows(struct engine *e, int n)
{
    int32_t prop[64], base = 0;
    int idx[64], m = 0;
    for (int i = 0; i < n; i++) {
        struct request *r = e->lane_req[i];
        if (r->state == REQ_DECODE && r->n_verify > 1 && m < 64) {
            prop[m] = r->n_verify - 1;
            idx[m++] = i;
            base++;
        } else {
            base += e->lanes[i].n_tokens;
        }
    }
    if (!m)
        return;
    splash_budget_choose(&e->budget, prop, m, base);
    for (int j = 0; j < m; j++) {
        e->lane_req[idx[j]]->n_verify = 1 + prop[j];
        e->lanes[idx[j]].n_tokens = 1 + prop[j];
    }
}

/* The step's verify lanes: their rows' logits, and their sequences armed to drop the rows
 * the target rejects. A lane whose save cannot be made decodes one token instead. */
static void arm_verify_lanes(struct engine *e, int n)
{
    size_t rows = 0, V = (size_t)e->lm->info.n_vocab;
    for (int i = 0; i < n; i++)
        if (e->lane_req[i]->state == REQ_DECODE && e->lane_req[i]->n_verify > 1)
            rows += (size_t)e->lane_req[i]->n_verify;
    if (rows > e->vlogits_rows) {
        float *grown = realloc(e->vlogits, rows * V * sizeof *grown);
        if (grown) {
            e->vlogits = grown;
            e->vlogits_rows = rows;
        }
    }
    size_t at = 0;
    for (int i = 0; i < n; i++) {
        struct request *r = e->lane_req[i];
        struct splash_lane *l = &e->lanes[i];
        if (r->state != REQ_DECODE || r->n_verify <= 1)
            continue;
        struct splash_err err;
        if (rows > e->vlogits_rows ||
            splash_family_seq_keep_rows(e->lm->family, e->lm->model, r->seq, r->n_verify, &err)) {
            r->n_verify = 1;
            l->n_tokens = 1;
            continue;
        }
        l->logits = e->vlogits + at * V;
        l->logits_all = 1;
        at += (size_t)r->n_verify;
    }
}

/* A verify lane's rows in order: each proposal the target's choice there agrees with is
 * kept; the first it does not, or the row after the last proposal, gives the target's own
 * token, which ends the cycle. The sequence then drops the rows after the last kept one. */
static void accept_rows(struct engine *e, struct request *r, int lane, float *logits,
                        int32_t pos0)
{
    int32_t k = r->n_verify - 1;
    size_t V = (size_t)e->lm->info.n_vocab;
    r->spec_proposed += k;
    r->spec_cycles++;
    e->spec_proposed += (uint64_t)k;
    e->spec_cycles++;
    int64_t before = r->spec_accepted;
    int n_q = r->drafted ? e->draft.info.top_k : 0;
    for (int32_t i = 0; i <= k; i++) {
        int64_t had = r->spec_accepted;
        if (!emit_token(e, r, logits + (size_t)i * V, i < k ? r->verify[i + 1] : -1,
                        i < k && n_q ? r->cand_ids + i * n_q : NULL,
                        i < k && n_q ? r->cand_p + i * n_q : NULL, i < k ? n_q : 0))
            return; /* it ended within the cycle */
        if (r->spec_accepted == had)
            break;
    }
    int32_t kept = (int32_t)(r->spec_accepted - before);
    /* the draft's context takes the committed rows: the anchor and the accepted ones */
    if (e->tap_rows && e->tap_rows[lane])
        draft_append(e, r, e->tap_rows[lane], pos0, kept + 1);
    splash_budget_label(&e->budget, k, kept);
    if (e->proposer->accepted)
        e->proposer->accepted(e->proposer, k, kept);
    if (kept == k)
        return;
    struct splash_err err;
    if (splash_family_seq_truncate(e->lm->family, e->lm->model, r->seq, pos0 + 1 + kept, &err)) {
        send_error(e, r->id, "engine_failed", err.msg);
        request_remove(e, r);
        return;
    }
    r->pos = pos0 + 1 + kept;
}

/* The end of the prompt chunk from pos: with a family that takes several runs in a
 * call (ABI 1.3) every whole run the budget holds, else the plan's next cut alone. */
static int32_t prefill_runs(struct engine *e, const struct splash_prefill_plan *plan, int32_t pos,
                            int32_t budget)
{
    e->n_runs = 1;
    int32_t cut = splash_plan_next_cut(plan, pos, budget);
    if (!splash_family_has_runs(e->lm->family))
        return cut;
    int32_t cap = budget + 2; /* runs hold a token each at least; the first may overrun */
    if (cap > e->cap_runs) {
        int32_t *pos_ = realloc(e->run_pos, (size_t)cap * 2 * sizeof *pos_);
        if (pos_)
            e->run_pos = pos_;
        uint8_t *fl = pos_ ? realloc(e->run_fork, (size_t)cap) : NULL;
        if (fl)
            e->run_fork = fl;
        void **fk = fl ? realloc(e->run_forks, (size_t)cap * sizeof *fk) : NULL;
        if (fk)
            e->run_forks = fk;
        if (!fk)
            return cut; /* one run: the plan's next cut */
        e->cap_runs = cap;
    }
    e->n_runs = splash_plan_runs(plan, pos, budget, e->run_pos, e->cap_runs);
    return e->run_pos[e->n_runs - 1];
}

/* The runs of the prompt chunk's lane (`fill`) as the family takes them, with the
 * restore points the prefix cache wants inside the chunk. 1: the step passes runs. */
static int run_points(struct engine *e, int n, int fill)
{
    struct request *r = e->lane_req[fill];
    struct splash_prefill_plan plan = plan_of(r);
    int32_t *ends = e->run_pos + e->cap_runs;
    for (int32_t k = 0; k < e->n_runs; k++)
        ends[k] = e->run_pos[k] - r->pos;
    uint64_t need = 0;
    for (int i = 0; i < n; i++) {
        need += splash_ecache_lane_need(&e->cache, e->lanes[i].pos0, e->lanes[i].n_tokens, 0);
        e->lane_runs[i] = (struct splash_lane_runs){0};
    }
    int wanted = splash_ecache_run_points(&e->cache, &plan, r->pos, e->run_pos, e->n_runs,
                                          e->run_fork, &r->last_point, counted_bytes(e), need);
    e->lane_runs[fill] = (struct splash_lane_runs){.n = e->n_runs,
                                                   .ends = ends,
                                                   .fork = wanted ? e->run_fork : NULL,
                                                   .forks = wanted ? e->run_forks : NULL};
    return 1;
}

/* One batched step: every decoding request's next token plus one prompt chunk. */
static int step(struct engine *e)
{
    const struct splash_family_plugin *fam = e->lm->family;
    int n = 0, have_prefill = 0, n_decode = 0;
    struct splash_err err;
    int64_t n_vocab = e->lm->info.n_vocab;
    int waiting = 0;
    for (struct request *r = e->reqs; r; r = r->next) {
        n_decode += r->state == REQ_DECODE;
        waiting += r->state == REQ_PREFILL;
    }
    /* decode share 0 alternates one step of each while both have work */
    int skip_decode = 0, skip_prefill = 0;
    if (e->opts->decode_share <= 0 && n_decode && waiting) {
        e->prefill_turn = !e->prefill_turn;
        skip_decode = e->prefill_turn;
        skip_prefill = !e->prefill_turn;
    }
    int32_t chunk = prefill_chunk(e, skip_decode ? 0 : n_decode);
    int n_decode_lanes = 0, blocked = 0;
    for (struct request *r = e->reqs, *next; r && n <= e->max_lanes; r = next) {
        next = r->next;
        if ((r->state == REQ_DECODE && skip_decode) || (r->state == REQ_PREFILL && skip_prefill))
            continue;
        /* one prompt chunk per step, and a new sequence only while lanes are free */
        if (r->state == REQ_PREFILL && (have_prefill || (!r->seq && e->n_active >= e->max_lanes)))
            continue;
        if (!r->seq) {
            /* requests start in the order they came: later ones wait behind one that waits */
            int rc = blocked ? 0 : admit(e, r, n);
            blocked |= rc == 0;
            if (rc <= 0)
                continue;
        }
        struct splash_lane *l = &e->lanes[n];
        memset(l, 0, sizeof *l);
        l->seq = r->seq;
        l->pos0 = r->pos;
        l->logits_all = 0;
        if (r->state == REQ_DECODE) {
            r->verify[0] = r->last;
            r->n_verify = 1 + propose(e, r);
            l->tokens = r->verify;
            l->n_tokens = r->n_verify;
            l->logits = e->logits + (size_t)n * (size_t)n_vocab;
            n_decode_lanes++;
        } else {
            struct splash_prefill_plan plan = plan_of(r);
            int32_t cut = prefill_runs(e, &plan, r->pos, chunk);
            l->tokens = r->prompt + r->pos;
            l->n_tokens = cut - r->pos;
            /* a replay after a yield ends in decode without sampling again */
            l->logits = cut == r->n_fill && r->n_gen == 0 ? e->logits + (size_t)n * (size_t)n_vocab
                                                          : NULL;
            have_prefill = 1;
        }
        e->lane_req[n++] = r;
    }
    if (!n || !(n = fit_step(e, n)))
        return 0;
    if (e->budget_on)
        budget_rows(e, n);
    if (e->proposer)
        arm_verify_lanes(e, n);
    const struct splash_taps *taps = e->draft.model ? step_taps(e, n) : NULL;
    /* the prompt chunk's runs, and restore points at their ends taken within the step */
    int fill = -1;
    for (int i = 0; i < n; i++)
        if (e->lane_req[i]->state == REQ_PREFILL)
            fill = i;
    int runs = fill >= 0 && e->n_runs > 1 ? run_points(e, n, fill) : 0;
    double t0 = mono_now();
    enum splash_status st =
        runs ? splash_family_forward_runs(fam, e->lm->model, e->lanes, e->lane_runs, n, taps, &err)
             : splash_family_forward_taps(fam, e->lm->model, e->lanes, n, taps, &err);
    if (st == SPLASH_OK && runs && e->lane_runs[fill].fork) {
        e->capture_req = e->lane_req[fill];
        e->capture_lane = fill;
        e->cache.publisher = e->lane_req[fill]->id;
        e->cache.publishing = 1;
        splash_ecache_keep_runs(&e->cache, &(struct splash_prefill_plan){
                                    .tokens = e->lane_req[fill]->prompt,
                                    .n = e->lane_req[fill]->n_fill,
                                    .reuse = e->lane_req[fill]->reuse}, e->run_pos,
                                e->n_runs, e->run_fork, e->run_forks);
        e->capture_req = NULL;
        e->cache.publishing = 0;
    }
    if (st == SPLASH_ERR_NOMEM) {
        /* the host refused memory: cached prefixes go, then the newest request yields;
         * alone, the request fails with what could not be allocated */
        while (e->cache.points && splash_prefix_cache_evict_one(e->cache.points, 1))
            ;
        struct request *v = e->n_active > 1 ? newest_holder(e) : NULL;
        if (v) {
            yield_lane(e, v);
            return 0;
        }
        for (int i = 0; i < n; i++)
            fail_capacity(e, e->lane_req[i], i, e->lanes[i].n_tokens, err.msg);
        return 0;
    }
    if (st == SPLASH_ERR_IO) {
        /* a streamed expert could not be read: this step's requests fail, naming the file;
         * the others go on (a file changed on disk fails every later load by itself) */
        for (int i = 0; i < n; i++) {
            send_error(e, e->lane_req[i]->id, "engine_failed", err.msg);
            request_remove(e, e->lane_req[i]);
        }
        return 0;
    }
    if (st != SPLASH_OK) {
        for (int i = 0; i < n; i++) {
            send_error(e, e->lane_req[i]->id, "engine_failed", err.msg);
            request_remove(e, e->lane_req[i]);
        }
        return -1;
    }
    double dt = mono_now() - t0;
    int32_t prefilled = 0;
    for (int i = 0; i < n; i++)
        if (e->lane_req[i]->state == REQ_PREFILL)
            prefilled += e->lanes[i].n_tokens;
    e->cache.prefilled += (uint64_t)prefilled;
    if (!prefilled) {
        e->t_decode_step = ema(e->t_decode_step, dt);
        int32_t rows = 0;
        for (int i = 0; i < n; i++)
            rows += e->lanes[i].n_tokens;
        splash_budget_time(&e->budget, rows, dt);
    }
    else if (dt - (n_decode_lanes ? e->t_decode_step : 0) > 0)
        e->t_prefill_token =
            ema(e->t_prefill_token, (dt - (n_decode_lanes ? e->t_decode_step : 0)) / prefilled);
    for (int i = 0; i < n; i++) {
        struct request *r = e->lane_req[i];
        r->pos += e->lanes[i].n_tokens;
        if (r->state == REQ_PREFILL) {
            r->n_prefilled += e->lanes[i].n_tokens;
            for (int32_t k = r->n_fed; k < r->pos; k++)
                splash_sampler_accept(&r->sampler, r->prompt[k]);
            if (r->n_fed < r->pos)
                r->n_fed = r->pos;
            struct splash_prefill_plan plan = plan_of(r);
            e->capture_req = r;
            e->capture_lane = i;
            e->cache.publisher = r->id;
            e->cache.publishing = 1;
            if (r->pos < r->n_fill || splash_plan_is_boundary(&plan, r->pos))
                splash_ecache_capture(&e->cache, &plan, r->pos, r->seq,
                                      boundaries_after(&plan, r->pos), &r->last_point,
                                      counted_bytes(e));
            if (r->pos >= r->n_fill && r->n_gen > 0)
                r->state = REQ_DECODE;
            e->capture_req = NULL;
            e->cache.publishing = 0;
        }
        int verify = r->state == REQ_DECODE && e->lanes[i].logits_all;
        if (!verify && e->tap_rows && e->tap_rows[i])
            draft_append(e, r, e->tap_rows[i], e->lanes[i].pos0, e->lanes[i].n_tokens);
        if (verify)
            accept_rows(e, r, i, e->lanes[i].logits, e->lanes[i].pos0); /* a verify lane */
        else if (e->lanes[i].logits)
            emit_token(e, r, e->lanes[i].logits, -1, NULL, NULL, 0);
    }
    splash_ecache_note(&e->cache, counted_bytes(e));
    return 0;
}

/* Whether the target's file states MTP (nextn) layers ({arch}.nextn_predict_layers > 0). */
static int has_nextn_layers(const struct splash_meta *m)
{
    const struct splash_meta_api *api = splash_meta_api_get();
    const char *arch = NULL;
    char key[96];
    int64_t n = 0;
    if (api->get_str(m, "general.architecture", &arch, NULL) != SPLASH_OK || !arch)
        return 0;
    snprintf(key, sizeof key, "%s.nextn_predict_layers", arch);
    return api->has(m, key) && api->get_i64(m, key, &n, NULL) == SPLASH_OK && n > 0;
}

/* The proposer --speculative asks for, or a refusal naming why it cannot run here. */
static enum splash_status spec_setup(struct engine *e, struct splash_err *err)
{
    int mode = e->opts->speculative;
    const char *family = e->lm->family->header.name;
    if (mode == SPLASH_SPEC_OFF)
        return SPLASH_OK;
    const char *dm = e->opts->draft_model;
    int want_draft = dm && strcmp(dm, "none") && (mode == SPLASH_SPEC_AUTO || mode == SPLASH_SPEC_DFLASH);
    if (mode == SPLASH_SPEC_DFLASH && !want_draft)
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                              "--speculative dflash: no draft to load (--draft-model PATH)");
    if (!splash_family_can_keep_rows(e->lm->family)) {
        if (mode == SPLASH_SPEC_NGRAM)
            return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                                  "--speculative ngram: family plugin %s predates ABI 1.3 and "
                                  "cannot drop a verify pass's rejected rows",
                                  family);
        splash_log(SPLASH_LOG_INFO, NULL,
                   "Speculation · off: family plugin %s predates ABI 1.3 (no exact rollback)",
                   family);
        return SPLASH_OK;
    }
    /* the model's own MTP layers: asked for, or under auto without a draft where the file
     * has them (a block the proposer does not run leaves auto to prompt lookup) */
    int want_mtp = mode == SPLASH_SPEC_MTP || (mode == SPLASH_SPEC_AUTO && !want_draft &&
                                               has_nextn_layers(e->lm->meta));
    if (want_draft || want_mtp) {
        enum splash_status st;
        if (!splash_family_has_taps(e->lm->family))
            return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                                  "%s: family plugin %s writes no draft taps",
                                  want_draft ? "--draft-model" : "--speculative mtp", family);
        if (want_draft)
            st = splash_spec_draft_load(&e->draft, splash_registry_global(), dm, e->lm->meta,
                                        e->lm->pool, err);
        else
            st = splash_spec_draft_load_nextn(&e->draft, splash_registry_global(), e->lm->meta,
                                              e->lm->pool, err);
        if (st && want_mtp && mode == SPLASH_SPEC_AUTO) {
            splash_log(SPLASH_LOG_INFO, NULL, "Speculation · the model's MTP layers are not used: %s",
                       err->msg);
        } else if (st) {
            if (want_mtp) {
                char why[sizeof err->msg];
                snprintf(why, sizeof why, "%s", err->msg);
                return splash_err_set(err, st, "--speculative mtp: %.200s", why);
            }
            return st;
        }
    }
    if (e->draft.model) {
        if (!(e->tap_rows = calloc((size_t)e->max_lanes + 1, sizeof *e->tap_rows)))
            return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory for the draft's taps");
        splash_log(SPLASH_LOG_INFO, NULL, "Draft · %s: %s %s", want_draft ? dm : "the model's own",
                   e->draft.verdict.architecture, e->draft.verdict.summary);
        /* restore points keep the draft's context, so a resumed request drafts */
        if (splash_spec_draft_can_keep(&e->draft))
            e->cache.hooks = (struct splash_point_hooks){.kept = point_kept,
                                                         .dropped = point_dropped,
                                                         .bytes = point_bytes, .ctx = e};
    }
    /* prompt lookup: the proposer, and without a draft context the draft's stand-in */
    if (!(e->proposer = splash_ngram_proposer_create()))
        return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory for the proposer");
    /* a MoE target's rows each route their own experts: the budget chooses them */
    const struct splash_meta_api *api = splash_meta_api_get();
    const char *arch = NULL;
    char key[96] = "";
    if (api->get_str(e->lm->meta, "general.architecture", &arch, NULL) == SPLASH_OK && arch)
        snprintf(key, sizeof key, "%s.expert_count", arch);
    int moe = (key[0] && api->has(e->lm->meta, key)) || api->has(e->lm->meta, "num_experts") ||
              api->has(e->lm->meta, "text_config.num_experts");
    /* a MoE target's rows each route their own experts; prompt lookup's guesses are often
     * wrong, and where rows cost compute (a CPU) verifying them all can cost more than
     * they return: both take the budget's rows under auto, and so do the MTP block's
     * proposals, whose acceptance varies with the model's training (a random block's are
     * all rejected, and eight verified rows then cost a CPU several plain steps); a dense
     * target with its DFlash2 draft verifies every row, as models.md "Drafts" has it */
    int mtp = e->draft.model && !e->draft.meta;
    e->budget_on = (moe || !e->draft.model || mtp) && !e->opts->verify_rows_all;
    splash_budget_init(&e->budget);
    splash_log(SPLASH_LOG_INFO, NULL, "Speculation · %s: up to %d proposals a cycle; verify rows: %s",
               e->draft.model ? (e->draft.meta ? "the DFlash2 draft (prompt lookup where its "
                                                 "context is incomplete)"
                                               : "the model's MTP layers (prompt lookup where "
                                                 "their context is incomplete)")
                              : "prompt lookup (n-gram) where the conversation repeats itself",
               SPLASH_SPEC_MAX_ROWS - 1,
               e->budget_on ? (moe ? "the budget's (a MoE target: each row routes its own "
                                     "experts, so cycles verify the rows that maximise expected "
                                     "tokens per unit of measured cost, every 32nd all; "
                                     "--verify-rows all verifies every row)"
                                   : mtp ? "the budget's (the MTP block's proposals: cycles "
                                           "verify the rows that maximise expected tokens per "
                                           "unit of measured cost, every 32nd all; "
                                           "--verify-rows all verifies every row)"
                                         : "the budget's (prompt lookup's proposals: cycles "
                                           "verify the rows that maximise expected tokens per "
                                           "unit of measured cost, every 32nd all; "
                                           "--verify-rows all verifies every row)")
               : "all the output limit leaves (--verify-rows all, or a dense target with its "
                 "draft: its weights are read once for every row)");
    return SPLASH_OK;
}

/* The SSD tier's startup line: where its file is, its quota and why, the write budget. */
static void cache_disk_line(const struct splash_engine_cache *c,
                            const struct splash_engine_opts *o)
{
    if (!c->points || (!c->disk && !o->cache_disk))
        return; /* nothing asked for (tests, benches) */
    if (!c->disk) {
        fprintf(stderr, "SSD cache · off: %s\n", c->disk_why);
        return;
    }
    struct splash_disk_stats s;
    splash_disk_cache_stats(c->disk, &s);
    char budget[64] = "", taken[64] = "";
    if (s.taken_back)
        snprintf(taken, sizeof taken, " (%llu points taken back)",
                 (unsigned long long)s.taken_back);
    if (o->cache_disk_writes)
        snprintf(budget, sizeof budget, " · writes at most %.1f GiB a day",
                 (double)o->cache_disk_writes / 1073741824.0);
    fprintf(stderr, "SSD cache · %s %s%s · %.2f GiB (%s)%s · --max-cache-disk 0 turns it off\n",
            splash_disk_cache_persistent(c->disk) ? "persistent in"
                                                  : "temporary files (KV pages, states) in",
            splash_disk_cache_dir(c->disk), taken, (double)s.quota / 1073741824.0,
            o->cache_disk < 0 ? "auto: a quarter of the volume's room beyond its floor, at most "
                                "32 GiB"
                              : "--max-cache-disk",
            budget);
}

int splash_engine_main(const struct splash_engine_opts *opts)
{
    struct engine e = {.opts = opts, .gformat_calls = -1};
    struct splash_engine_opts o = *opts;
    if (!o.max_lanes)
        o.max_lanes = 16;
    if (!o.prefill_chunk)
        o.prefill_chunk = 256;
    e.opts = &o;
    e.max_lanes = o.max_lanes;
    struct splash_registry *reg = splash_registry_global();
    if (splash_registry_n_records(reg) == 0)
        splash_registry_load_default(reg, NULL, 0);
    struct splash_model_opts mo = {.kv_format = opts->kv_format, .state_format = opts->state_format,
                                   .max_context = opts->max_context};
    struct splash_err err;
    struct splash_memory_budget budget;
    struct splash_memory_plan plan;
    if (splash_memory_budget_read(opts->max_memory, NULL, NULL, &budget, &err) != SPLASH_OK) {
        send_error(&e, 0, "capacity_exhausted", err.msg);
        return 1;
    }
    char experts_line[384];
    if (splash_expert_memory_load(reg, opts->model_path, &mo, opts->n_threads,
                                  opts->expert_memory, opts->max_context, e.max_lanes, &budget,
                                  &e.lm, experts_line, sizeof experts_line, &err) != SPLASH_OK) {
        send_error(&e, 0, "model_refused", err.msg);
        return 1;
    }
    if (experts_line[0])
        fprintf(stderr, "%s\n", experts_line);
    splash_expert_elastic_init(&e.elastic, e.lm->family, e.lm->model);
    struct splash_expert_stats store;
    e.experts_stream = splash_family_expert_stats(e.lm->family, e.lm->model, &store);
    splash_expert_elastic_start(&e.elastic, console_line, NULL);
    if ((opts->fit_context ? splash_memory_plan_fit : splash_memory_plan_make)(
            &budget, &e.lm->info, opts->max_context, 0, e.max_lanes, &plan, &err) != SPLASH_OK) {
        send_error(&e, 0, "capacity_exhausted", err.msg);
        splash_model_unload(e.lm);
        return 1;
    }
    e.n_ctx = plan.context;
    if (opts->fit_context && plan.context < opts->max_context)
        fprintf(stderr,
                "Warning · the restarted engine's memory (%.2f GiB, %s) holds %lld of the %lld "
                "tokens of context the server served; it serves %lld until a later restart "
                "regains them\n",
                (double)budget.usable / (1024.0 * 1024.0 * 1024.0), budget.bound,
                (long long)plan.context, (long long)opts->max_context, (long long)plan.context);
    uint64_t swept_bytes = 0;
    /* a server's start (in-process tests and benches ask for no SSD tier: not theirs) */
    int swept = o.prefix_cache_off || !(o.cache_disk || o.persistent_cache)
                    ? 0
                    : splash_cache_namespace_sweep(
                                         o.cache_dir, SPLASH_CACHE_UNUSED_DAYS * 86400.0,
                                         time(NULL), &swept_bytes);
    if (swept)
        fprintf(stderr, "SSD cache · removed %d cache%s nobody used for %d days under %s "
                "(%.2f GiB)\n", swept, swept == 1 ? "" : "s", SPLASH_CACHE_UNUSED_DAYS,
                o.cache_dir ? o.cache_dir : "the default root", (double)swept_bytes / 1073741824.0);
    struct splash_disk_opts disk = {.dir = o.cache_disk_dir, .quota = o.cache_disk,
                                    .writes_per_day = o.cache_disk_writes};
    char ns[4096], why[512];
    int ns_lock = -1;
    if (o.persistent_cache && o.cache_disk) {
        /* what a cached state's bits rest on; the model's files are digested beside it */
        char layout[512];
        snprintf(layout, sizeof layout,
                 "family %s abi %d.%d kv %d state %d context %lld page %d x %llu state %llu\n",
                 e.lm->family->header.name, e.lm->family->header.abi_major,
                 e.lm->family->header.abi_minor, o.kv_format, o.state_format,
                 (long long)plan.context, e.lm->info.kv_page_tokens,
                 (unsigned long long)e.lm->info.kv_page_bytes,
                 (unsigned long long)e.lm->info.state_bytes_per_seq);
        if (splash_cache_namespace_open(o.cache_dir, o.model_path, layout,
                                        o.cache_lock_wait > 0 ? o.cache_lock_wait : 20.0, ns,
                                        sizeof ns, &ns_lock, why, sizeof why) == 0)
            disk.persist_dir = ns;
        else
            fprintf(stderr, "SSD cache · not persistent: %s; temporary files instead\n", why);
    }
    splash_ecache_init(&e.cache, e.lm->family, e.lm->model, &e.lm->info,
                       plan.kv_bytes + plan.state_bytes, o.prefix_cache_off, &disk);
    cache_disk_line(&e.cache, &o);
    if (spec_setup(&e, &err) != SPLASH_OK) {
        send_error(&e, 0, "model_refused", err.msg);
        free(e.tap_rows);
        splash_spec_draft_free(&e.draft);
        if (e.proposer)
            e.proposer->destroy(e.proposer);
        splash_ecache_free(&e.cache);
        splash_model_unload(e.lm);
        return 1;
    }
    size_t n_vocab = (size_t)e.lm->info.n_vocab;
    e.logits = malloc((size_t)(e.max_lanes + 1) * n_vocab * sizeof(float));
    e.lanes = calloc((size_t)e.max_lanes + 1, sizeof *e.lanes);
    e.lane_req = calloc((size_t)e.max_lanes + 1, sizeof *e.lane_req);
    e.lane_runs = calloc((size_t)e.max_lanes + 1, sizeof *e.lane_runs);
    if (!e.logits || !e.lanes || !e.lane_req || !e.lane_runs) {
        send_error(&e, 0, "capacity_exhausted", "out of memory for the engine's buffers");
        return 1;
    }
    json_t *ready = json_pack("{s:s, s:s, s:s, s:I, s:I, s:I, s:I}", "family",
                              e.lm->family->header.name, "architecture",
                              e.lm->verdict.architecture, "size", e.lm->verdict.size_name,
                              "n_vocab", (json_int_t)e.lm->info.n_vocab, "n_ctx",
                              (json_int_t)e.n_ctx, "n_ctx_train",
                              (json_int_t)e.lm->info.n_ctx_train, "weight_bytes",
                              (json_int_t)e.lm->info.weight_bytes);
    json_object_set_new(ready, "plan",
                        json_pack("{s:I, s:I, s:i, s:f, s:I, s:I, s:I, s:I, s:I, s:s}", "context",
                                  (json_int_t)plan.context, "kv_capacity_tokens",
                                  (json_int_t)plan.kv_capacity, "lanes", plan.lanes, "yarn_factor",
                                  plan.yarn_factor, "weights_bytes", (json_int_t)plan.weights,
                                  "kv_bytes", (json_int_t)plan.kv_bytes, "state_bytes",
                                  (json_int_t)plan.state_bytes, "total_bytes",
                                  (json_int_t)plan.total, "usable_bytes", (json_int_t)budget.usable,
                                  "bound", budget.bound));
    json_object_set_new(ready, "speculation",
                        json_pack("{s:s, s:s}", "mode", spec_mode_name(&e), "verify_rows",
                                  verify_rule(&e)));
    json_t *experts = experts_status(&e);
    if (experts)
        json_object_set_new(ready, "streamed_experts", experts);
    splash_frame_write(o.fd, SPLASH_FRAME_READY, 0, ready, &err);
    json_decref(ready);
    int status = 0;
    while (!e.stopping) {
        /* idle: wait for a frame, or while the SSD tier writes, for its next turn */
        int idle_ms = splash_ecache_idle_wait_ms(&e.cache);
        if (e.elastic.on && (idle_ms < 0 || idle_ms > 1000))
            idle_ms = 1000; /* the expert store samples memory pressure each second */
        if (read_frames(&e, e.reqs ? (e.n_active || !splash_ecache_reading(&e.cache) ? 0 : 5)
                                   : idle_ms) < 0)
            break;
        if (step(&e) < 0) {
            status = 3;
            splash_ecache_failed(&e.cache); /* the next start's cache begins empty */
            break;
        }
        if (splash_expert_elastic_tick(&e.elastic, e.reqs != NULL, console_line, NULL))
            send_experts(&e);
        splash_ecache_tick(&e.cache, counted_bytes(&e)); /* the SSD tier's writes */
    }
    while (e.reqs)
        request_remove(&e, e.reqs);
    if (e.cache.disk && o.persistent_cache)
        splash_ecache_flush(&e.cache, 6.0); /* a clean stop keeps what memory holds */
    splash_ecache_free(&e.cache);
    if (ns_lock >= 0)
        close(ns_lock);
    free(e.logits);
    free(e.vlogits);
    free(e.tap_rows);
    if (e.draft.model)
        splash_spec_draft_free(&e.draft);
    if (e.proposer)
        e.proposer->destroy(e.proposer);
    free(e.lanes);
    free(e.lane_req);
    free(e.lane_runs);
    free(e.run_pos);
    free(e.run_fork);
    free(e.run_forks);
    free(e.mask);
    free(e.closers);
    if (e.gvocab)
        splash_grammar_vocab_destroy(e.gvocab);
    if (e.tok)
        splash_tokenizer_destroy(e.tok);
    splash_model_unload(e.lm);
    return status;
}
