/* Speculative decoding benchmark (2 threads), every figure the best of interleaved rounds
 * with the load average beside it (the machine may be shared):
 *  - the cost of a verify pass: one lane of 8 rows (the anchor and 7 proposals, every
 *    row's logits, the sequence armed for a rewind, then truncated to a partial acceptance)
 *    against a 1-row decode step, on the Qwen3.5-0.8B shape (random weights, Q4_K_M, the
 *    file bench-model builds under build/bench-models/); the goal is <= 1.3x. Beside it
 *    where the verify's time goes (the trunk with the last row's logits, every row's
 *    logits, the rewind's save) and the parallel sections each hands the pool;
 *  - a draft cycle's parts on the stories target with its DFlash2 draft: the draft's
 *    proposals, the verify with the taps, the rewind, the draft context's new rows, against
 *    a plain step, and the tokens a cycle at which the cycle breaks even;
 *  - end-to-end greedy decode on the trained stories target, plain, with prompt lookup and
 *    with its trained DFlash2 draft: tokens/s, tokens per cycle and the speed-up, on the
 *    first prompts of the draft's reference decode record and on a prompt that quotes a
 *    passage (where prompt lookup pays).
 *
 * usage: bench-speculate [-n TOKENS] [--only verify|draft|cycle]   (default 128 tokens, all;
 *        cycle: a draft cycle's parts alone, draft: those and end to end) */
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/modelgen/model_writer.h"
#include "core/draft.h"
#include "core/family.h"
#include "core/model_load.h"
#include "core/registry.h"
#include "core/threadpool.h"
#include "server/engine/engine.h"
#include "server/engine/gen_params.h"
#include "server/engine/protocol.h"
#include "server/engine/spec_draft.h"
#include "server/engine/speculate.h"

extern const splash_plugin_entry_fn splash_builtin_plugins[];

#define N_THREADS 2
#define ROWS 8
#define REPS 12

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* build/bench-models/ beside this binary's build/bench/ */
static void models_dir(char *out, size_t size)
{
    char exe[PATH_MAX - 32];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) {
        snprintf(out, size, "build/bench-models");
        return;
    }
    exe[n] = 0;
    char *slash = strrchr(exe, '/');
    if (slash)
        *slash = 0;
    snprintf(out, size, "%s/../bench-models", exe);
}

static int ensure_model(const struct splash_registry *r, const char *shape, char *path, size_t size)
{
    char dir[PATH_MAX];
    models_dir(dir, sizeof dir);
    mkdir(dir, 0755);
    snprintf(path, size, "%s/%s-Q4_K_M.gguf", dir, shape);
    struct stat sb;
    if (stat(path, &sb) == 0 && sb.st_size > 0)
        return 0;
    struct splash_model_write_opts opts = {.mix = "Q4_K_M", .seed = 7, .n_threads = N_THREADS};
    struct splash_model_write_stats stats;
    struct splash_err err = {{0}};
    printf("building %s (once) ...\n", path);
    fflush(stdout);
    if (splash_model_write_preset(r, shape, &opts, path, &stats, &err)) {
        fprintf(stderr, "bench-speculate: %s: %s\n", shape, err.msg);
        return -1;
    }
    return 0;
}

/* ---- an 8-row verify against a 1-row step ----------------------------------------------- */

static int verify_cost(const struct splash_registry *r)
{
    char path[PATH_MAX + 64];
    if (ensure_model(r, "qwen35-0.8b", path, sizeof path))
        return -1;
    struct splash_err err = {{0}};
    struct splash_model_opts mo = {.kv_format = SPLASH_KV_INT8, .state_format = SPLASH_STATE_F32};
    struct splash_loaded_model *lm;
    if (splash_model_load(r, path, &mo, N_THREADS, &lm, &err)) {
        fprintf(stderr, "bench-speculate: %s\n", err.msg);
        return -1;
    }
    const struct splash_family_plugin *f = lm->family;
    size_t V = (size_t)lm->info.n_vocab;
    float *logits = malloc(ROWS * V * sizeof *logits);
    void *seq;
    int32_t t[512 + ROWS];
    for (int i = 0; i < 512 + ROWS; i++)
        t[i] = (int32_t)((i * 7919u + 13) % V);
    if (!logits || splash_family_seq_create(f, lm->model, &seq, &err)) {
        fprintf(stderr, "bench-speculate: %s\n", err.msg);
        return -1;
    }
    struct splash_lane l = {.seq = seq, .tokens = t, .n_tokens = 512, .pos0 = 0};
    int rc = splash_family_forward(f, lm->model, &l, 1, &err) ? -1 : 0;
    /* interleaved rounds, the best of each kind: a 1-row step; the same 8 rows with the
     * last row's logits (the trunk's cost), with every row's (the head's), and armed (the
     * rewind's save): the verify pass; then the rewind to half of them */
    enum { STEP, LAST, ALL, VERIFY, REWIND, KINDS };
    double best[KINDS];
    unsigned long long sections[KINDS] = {0};
    for (int k = 0; k < KINDS; k++)
        best[k] = 1e30;
    int32_t pos = 512;
    for (int rep = 0; rep < REPS + 1 && !rc; rep++) {
        for (int k = 0; k < KINDS && !rc; k++) {
            int rows = k == STEP ? 1 : ROWS;
            unsigned long long s0 = splash_pool_sections(lm->pool);
            double t0 = now();
            if (k == REWIND) {
                rc |= splash_family_seq_truncate(f, lm->model, seq, pos - ROWS / 2, &err) ? -1 : 0;
                pos -= ROWS / 2;
            } else {
                if (k == VERIFY)
                    rc |= splash_family_seq_keep_rows(f, lm->model, seq, ROWS, &err) ? -1 : 0;
                l = (struct splash_lane){.seq = seq, .tokens = t + 512, .n_tokens = rows,
                                         .pos0 = pos, .logits = logits,
                                         .logits_all = k == ALL || k == VERIFY};
                rc |= splash_family_forward(f, lm->model, &l, 1, &err) ? -1 : 0;
                pos += rows;
            }
            double d = now() - t0;
            sections[k] = splash_pool_sections(lm->pool) - s0;
            if (rep > 0 && d < best[k]) /* round 0 warms up: buffers sized */
                best[k] = d;
        }
    }
    double load[3] = {0};
    getloadavg(load, 3);
    if (rc)
        fprintf(stderr, "bench-speculate: %s\n", err.msg);
    else
        printf("verify cost, qwen35-0.8b Q4_K_M, %d threads, context 512 on, best of %d interleaved "
               "rounds, load average %.1f:\n"
               "  1-row step %.2f ms, %d-row verify %.2f ms (%.2fx, goal <= 1.3x), rewind to %d "
               "rows %.2f ms (verify + rewind %.2fx)\n"
               "  the verify's %d rows: trunk and the last row's logits %.2f ms (%.2fx), every "
               "row's logits +%.2f ms, the rewind's save +%.2f ms\n"
               "  parallel sections: %llu a 1-row step, %llu a verify, %llu a rewind\n",
               N_THREADS, REPS, load[0], best[STEP] * 1e3, ROWS, best[VERIFY] * 1e3,
               best[VERIFY] / best[STEP], ROWS / 2, best[REWIND] * 1e3,
               (best[VERIFY] + best[REWIND]) / best[STEP], ROWS, best[LAST] * 1e3,
               best[LAST] / best[STEP], (best[ALL] - best[LAST]) * 1e3,
               (best[VERIFY] - best[ALL]) * 1e3, sections[STEP], sections[VERIFY],
               sections[REWIND]);
    splash_family_seq_destroy(f, lm->model, seq);
    free(logits);
    splash_model_unload(lm);
    return rc;
}

/* ---- a draft cycle's parts on the stories target ---------------------------------------- */

/* In process, interleaved, the best of each: a plain 1-row step against a cycle's parts:
 * the draft's 7 proposals, the 8-row verify with the taps, the rewind to the 4 rows kept
 * and the draft's context taking their taps. */
static int draft_cycle_cost(const struct splash_registry *r, const char *model, const char *dir)
{
    struct splash_err err = {{0}};
    struct splash_model_opts mo = {.kv_format = SPLASH_KV_INT8, .state_format = SPLASH_STATE_F32};
    struct splash_loaded_model *lm;
    if (splash_model_load(r, model, &mo, N_THREADS, &lm, &err)) {
        fprintf(stderr, "bench-speculate: %s\n", err.msg);
        return -1;
    }
    struct splash_spec_draft d;
    if (splash_spec_draft_load(&d, r, dir, lm->meta, lm->pool, &err)) {
        fprintf(stderr, "bench-speculate: %s: %s\n", dir, err.msg);
        splash_model_unload(lm);
        return -1;
    }
    const struct splash_family_plugin *f = lm->family;
    int64_t V = lm->info.n_vocab, width = splash_spec_draft_tap_width(&d);
    enum { PROMPT_ROWS = 64, ROUND_ROWS = 1 + ROWS / 2 };
    int32_t t[PROMPT_ROWS + (REPS + 1) * ROUND_ROWS + ROWS];
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        t[i] = (int32_t)((i * 7919u + 13) % (uint64_t)V);
    float *logits = malloc((size_t)ROWS * (size_t)V * sizeof *logits);
    float *taps = malloc((size_t)PROMPT_ROWS * (size_t)width * sizeof *taps);
    int32_t proposals[ROWS];
    void *seq = NULL, *dctx = NULL;
    int rc = !logits || !taps || splash_family_seq_create(f, lm->model, &seq, &err) ||
                     splash_draft_ctx_create(d.plugin, d.model, &dctx, &err)
                 ? -1
                 : 0;
    const struct splash_taps tp = {.size = sizeof tp, .n_layers = d.info.n_taps,
                                   .layers = d.info.tap_layers, .rows = &taps};
    struct splash_lane l = {.seq = seq, .tokens = t, .n_tokens = PROMPT_ROWS, .pos0 = 0};
    if (!rc)
        rc = splash_family_forward_taps(f, lm->model, &l, 1, &tp, &err) ||
                     splash_draft_append_context(d.plugin, d.model, dctx, taps, width, 0,
                                                 PROMPT_ROWS, &err)
                 ? -1
                 : 0;
    enum { STEP, PROPOSE, VERIFY, REWIND, APPEND, KINDS };
    double best[KINDS];
    for (int k = 0; k < KINDS; k++)
        best[k] = 1e30;
    int32_t pos = PROMPT_ROWS;
    for (int rep = 0; rep < REPS + 1 && !rc; rep++) {
        for (int k = 0; k < KINDS && !rc; k++) {
            double t0 = now();
            if (k == STEP) {
                /* a plain decode step, then the draft's context takes its row */
                l = (struct splash_lane){.seq = seq, .tokens = t + pos, .n_tokens = 1,
                                         .pos0 = pos, .logits = logits};
                rc = splash_family_forward_taps(f, lm->model, &l, 1, &tp, &err) ? -1 : 0;
                t0 = now() - t0;
                rc = rc || splash_draft_append_context(d.plugin, d.model, dctx, taps, width,
                                                       pos, 1, &err) ? -1 : 0;
                pos++;
            } else if (k == PROPOSE) {
                const struct splash_draft_block b = {.size = sizeof b, .anchor = t[pos],
                                                     .pos = pos, .n_rows = ROWS - 1,
                                                     .tokens = proposals};
                rc = splash_draft_propose(d.plugin, d.model, dctx, &b, &err) ? -1 : 0;
            } else if (k == VERIFY) {
                rc = splash_family_seq_keep_rows(f, lm->model, seq, ROWS, &err) ? -1 : 0;
                l = (struct splash_lane){.seq = seq, .tokens = t + pos, .n_tokens = ROWS,
                                         .pos0 = pos, .logits = logits, .logits_all = 1};
                rc = rc || splash_family_forward_taps(f, lm->model, &l, 1, &tp, &err) ? -1 : 0;
            } else if (k == REWIND) {
                rc = splash_family_seq_truncate(f, lm->model, seq, pos + ROWS / 2, &err) ? -1 : 0;
            } else {
                rc = splash_draft_append_context(d.plugin, d.model, dctx, taps, width, pos,
                                                 ROWS / 2, &err) ? -1 : 0;
                pos += ROWS / 2;
            }
            double dt = k == STEP ? t0 : now() - t0;
            if (rep > 0 && dt < best[k])
                best[k] = dt;
        }
    }
    double load[3] = {0};
    getloadavg(load, 3);
    if (rc) {
        fprintf(stderr, "bench-speculate: %s\n", err.msg);
    } else {
        double cycle = best[PROPOSE] + best[VERIFY] + best[REWIND] + best[APPEND];
        printf("a draft cycle's parts, qwen35-stories Q8_0 + DFlash2, %d threads, best of %d "
               "interleaved rounds, load average %.1f:\n"
               "  plain 1-row step %.2f ms; cycle %.2f ms: draft's %d proposals %.2f ms, %d-row "
               "verify %.2f ms, rewind to %d rows %.2f ms, draft context +%d rows %.2f ms\n"
               "  break-even at %.2f tokens a cycle; at the reference's 3.98: %.2fx plain\n",
               N_THREADS, REPS, load[0], best[STEP] * 1e3, cycle * 1e3, ROWS - 1,
               best[PROPOSE] * 1e3, ROWS, best[VERIFY] * 1e3, ROWS / 2, best[REWIND] * 1e3,
               ROWS / 2, best[APPEND] * 1e3, cycle / best[STEP], 3.98 * best[STEP] / cycle);
    }
    if (dctx)
        splash_draft_ctx_destroy(d.plugin, d.model, dctx);
    if (seq)
        splash_family_seq_destroy(f, lm->model, seq);
    free(taps);
    free(logits);
    splash_spec_draft_free(&d);
    splash_model_unload(lm);
    return rc;
}

/* ---- end to end on the stories target -------------------------------------------------- */

struct engine_thread {
    pthread_t thread;
    struct splash_engine_opts o;
};

static void *engine_run(void *p)
{
    splash_engine_main(&((struct engine_thread *)p)->o);
    return NULL;
}

struct run {
    double seconds;
    int tokens;
    long long proposed, accepted, cycles;
    int32_t first[8];
};

/* One greedy request of n tokens on an engine with speculation spec (and the draft, when
 * given); 0 when it ran. */
static int decode_run(const char *model, int spec, const char *draft, const int32_t *prompt,
                      int n_prompt, int n, struct run *out)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
        return -1;
    struct engine_thread t = {.o = {.fd = sv[1], .model_path = model, .n_threads = N_THREADS,
                                    .max_context = 4096, .max_lanes = 1, .prefill_chunk = 256,
                                    .decode_share = 0.5, .prefix_cache_off = 1,
                                    .speculative = spec, .draft_model = draft}};
    pthread_create(&t.thread, NULL, engine_run, &t);
    struct splash_frame f;
    struct splash_err err;
    int rc = splash_frame_read(sv[0], &f, &err) == SPLASH_OK && f.type == SPLASH_FRAME_READY ? 0 : -1;
    splash_frame_free(&f);
    memset(out, 0, sizeof *out);
    if (!rc) {
        struct splash_submit sub = {.prompt = (int32_t *)prompt, .n_prompt = (size_t)n_prompt,
                                    .reuse_token = -1};
        splash_gen_params_init(&sub.params);
        sub.params.max_tokens = n;
        sub.params.sampling.temperature = 0.0f;
        splash_frame_write_submit(sv[0], 1, &sub, &err);
        double t0 = 0;
        for (;;) {
            if (splash_frame_read(sv[0], &f, &err) != SPLASH_OK) {
                rc = -1;
                break;
            }
            if (f.type == SPLASH_FRAME_TOKENS) {
                if (!out->tokens)
                    t0 = now(); /* decode from the first token: prefill is not timed */
                json_t *tk = json_object_get(f.body, "t");
                for (size_t i = 0; i < json_array_size(tk); i++, out->tokens++)
                    if (out->tokens < 8)
                        out->first[out->tokens] = (int32_t)json_integer_value(json_array_get(tk, i));
            } else if (f.type == SPLASH_FRAME_DONE) {
                out->seconds = now() - t0;
                json_t *s = json_object_get(f.body, "speculation");
                out->proposed = json_integer_value(json_object_get(s, "proposed"));
                out->accepted = json_integer_value(json_object_get(s, "accepted"));
                out->cycles = json_integer_value(json_object_get(s, "cycles"));
                splash_frame_free(&f);
                break;
            } else if (f.type == SPLASH_FRAME_ERROR) {
                fprintf(stderr, "bench-speculate: %s\n",
                        json_string_value(json_object_get(f.body, "message")));
                rc = -1;
                splash_frame_free(&f);
                break;
            }
            splash_frame_free(&f);
        }
    }
    json_t *b = json_object();
    splash_frame_write(sv[0], SPLASH_FRAME_SHUTDOWN, 0, b, &err);
    json_decref(b);
    pthread_join(t.thread, NULL);
    close(sv[0]);
    close(sv[1]);
    return rc;
}

static void report(const char *name, const char *how, const struct run *off,
                   const struct run *on)
{
    printf("  %-15s %-6s %.1f tokens/s (plain %.1f: %.2fx), %lld of %lld proposals accepted, "
           "%.2f tokens a cycle over %lld cycles; same first tokens: %s\n",
           name, how, (on->tokens - 1) / on->seconds, (off->tokens - 1) / off->seconds,
           off->seconds / on->seconds * (on->tokens - 1) / (off->tokens - 1), on->proposed ? on->accepted : 0,
           on->proposed, on->cycles ? (double)(on->accepted + on->cycles) / (double)on->cycles : 0.0,
           on->cycles, !memcmp(on->first, off->first, sizeof on->first) ? "yes" : "NO");
}

static int end_to_end(const struct splash_registry *r, int n)
{
    const char *shared = getenv("SPLASH_TESTDATA");
    char model[PATH_MAX], draft[PATH_MAX], record[PATH_MAX];
    const char *dir = shared ? shared : "../shared/testdata";
    snprintf(model, sizeof model, "%s/models/qwen35-stories-Q8_0.gguf", dir);
    snprintf(draft, sizeof draft, "%s/drafts/qwen35-stories-DFlash2", dir);
    snprintf(record, sizeof record, "%s/drafts/qwen35-stories-DFlash2.decode.json", dir);
    if (draft_cycle_cost(r, model, draft))
        return -1;
    if (n <= 0)
        return 0; /* --only cycle */
    json_error_t jerr;
    json_t *rec = json_load_file(record, 0, &jerr);
    if (!rec) {
        fprintf(stderr, "bench-speculate: %s: %s\n", record, jerr.text);
        return -1;
    }
    printf("end to end, qwen35-stories Q8_0, %d threads, %d greedy tokens, one request:\n",
           N_THREADS, n);
    struct run total_off = {0}, total_on = {0};
    for (int i = 0; i < 4; i++) {
        json_t *pr = json_object_get(json_array_get(json_object_get(rec, "results"), (size_t)i),
                                     "prompt");
        int32_t prompt[64];
        int np = 0;
        for (; np < 64 && np < (int)json_array_size(pr); np++)
            prompt[np] = (int32_t)json_integer_value(json_array_get(pr, (size_t)np));
        struct run off, on;
        if (decode_run(model, SPLASH_SPEC_OFF, NULL, prompt, np, n, &off) ||
            decode_run(model, SPLASH_SPEC_DFLASH, draft, prompt, np, n, &on))
            return -1;
        char name[32];
        snprintf(name, sizeof name, "story %d", i);
        report(name, "draft", &off, &on);
        total_off.seconds += off.seconds;
        total_off.tokens += off.tokens - 1;
        total_on.seconds += on.seconds;
        total_on.tokens += on.tokens - 1;
        total_on.accepted += on.accepted;
        total_on.proposed += on.proposed;
        total_on.cycles += on.cycles;
    }
    json_decref(rec);
    printf("  4 stories     draft  %.1f tokens/s against plain %.1f: %.2fx, %.2f tokens a cycle "
           "(reference 3.98)\n",
           total_on.tokens / total_on.seconds, total_off.tokens / total_off.seconds,
           (total_on.tokens / total_on.seconds) / (total_off.tokens / total_off.seconds),
           (double)(total_on.accepted + total_on.cycles) / (double)total_on.cycles);
    /* prompt lookup on a passage quoted twice and opened a third time */
    int32_t prompt[256];
    int np = 0;
    uint64_t x = 12345;
    int32_t passage[60];
    for (int i = 0; i < 60; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        passage[i] = (int32_t)(20 + (x >> 33) % 380);
    }
    for (int rep = 0; rep < 2; rep++)
        for (int i = 0; i < 60; i++)
            prompt[np++] = passage[i];
    for (int i = 0; i < 8; i++)
        prompt[np++] = passage[i];
    struct run off, on;
    if (decode_run(model, SPLASH_SPEC_OFF, NULL, prompt, np, n, &off) ||
        decode_run(model, SPLASH_SPEC_NGRAM, NULL, prompt, np, n, &on))
        return -1;
    report("quoted passage", "ngram", &off, &on);
    return 0;
}

int main(int argc, char **argv)
{
    int n = 128;
    const char *only = NULL;
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "-n"))
            n = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--only"))
            only = argv[++i];
    if (only && strcmp(only, "verify") && strcmp(only, "draft") && strcmp(only, "cycle")) {
        fprintf(stderr, "bench-speculate: --only takes verify, draft or cycle, not '%s'\n", only);
        return 2;
    }
    struct splash_registry *r = splash_registry_global();
    splash_registry_add_builtins(r, splash_builtin_plugins);
    int rc = 0;
    if (!only || !strcmp(only, "draft") || !strcmp(only, "cycle"))
        rc |= end_to_end(r, only && !strcmp(only, "cycle") ? 0 : n > 1 ? n : 128);
    if (!only || !strcmp(only, "verify"))
        rc |= verify_cost(r);
    return rc ? 1 : 0;
}
