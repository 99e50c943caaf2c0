/* `splash run`: a prompt's continuation streamed to standard output, with prompt
 * and generation speeds on standard error. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/model_cmds.h"
#include "core/family.h"
#include "core/meta.h"
#include "core/model_load.h"
#include "core/registry.h"
#include "server/text/tokenizer/tokenizer.h"
#include "server/engine/gen_params.h"
#include "server/engine/sampling.h"

/* The sampling a request to serve gets when it names none (splash_gen_params_init). */
static struct splash_sampling_params serve_sampling(void)
{
    struct splash_gen_params p;
    splash_gen_params_init(&p);
    return p.sampling;
}

static void usage(FILE *f)
{
    const struct splash_sampling_params d = serve_sampling();
    fprintf(f, "usage: splash run --model-dir PATH [--prompt TEXT] [-n N] [--temp T] [--top-k K]\n"
               "                  [--top-p P] [--min-p P] [--seed N] [--repeat-penalty R]\n"
               "                  [--threads N]\n"
               "  PATH: a GGUF file or a directory holding one. The prompt is tokenized with\n"
               "  chat markup (<|im_start|> ...) parsed into its tokens. --temp 0 is greedy.\n"
               "  The sampling defaults are serve's: --temp %g --top-k %d%s --top-p %g --min-p %g\n"
               "  --repeat-penalty %g.\n",
            (double)d.temperature, (int)d.top_k, d.top_k ? "" : " (off)", (double)d.top_p,
            (double)d.min_p, (double)d.repetition_penalty);
}

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int parse_num(const char *opt, const char *v, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (end == v || *end || errno || !(x >= lo && x <= hi)) {
        fprintf(stderr, "splash run: %s: '%s' (%g to %g)\n", opt, v, lo, hi);
        return -1;
    }
    *out = x;
    return 0;
}

/* Generation ends at the tokenizer's end of sequence and at the chat end-of-turn. */
static int is_stop(const int32_t stops[3], int32_t id)
{
    return id >= 0 && (id == stops[0] || id == stops[1] || id == stops[2]);
}

int splash_cmd_run(int argc, char **argv)
{
    const char *model_dir = NULL, *prompt = "Once upon a time";
    double n_predict = 64, threads = 0, seed = 0;
    struct splash_sampling_params sp = serve_sampling();
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "splash run: %s needs a value\n", a);
            usage(stderr);
            return 2;
        }
        const char *v = argv[++i];
        double x;
        if (!strcmp(a, "--model-dir") || !strcmp(a, "-m")) {
            model_dir = v;
        } else if (!strcmp(a, "--prompt") || !strcmp(a, "-p")) {
            prompt = v;
        } else if (!strcmp(a, "-n") || !strcmp(a, "--n-predict")) {
            if (parse_num(a, v, 0, 1 << 24, &n_predict))
                return 2;
        } else if (!strcmp(a, "--temp")) {
            if (parse_num(a, v, 0, 100, &x))
                return 2;
            sp.temperature = (float)x;
        } else if (!strcmp(a, "--top-k")) {
            if (parse_num(a, v, 0, 1 << 30, &x))
                return 2;
            sp.top_k = (int32_t)x;
        } else if (!strcmp(a, "--top-p")) {
            if (parse_num(a, v, 0, 1, &x))
                return 2;
            sp.top_p = (float)x;
        } else if (!strcmp(a, "--min-p")) {
            if (parse_num(a, v, 0, 1, &x))
                return 2;
            sp.min_p = (float)x;
        } else if (!strcmp(a, "--repeat-penalty")) {
            if (parse_num(a, v, 0.01, 100, &x))
                return 2;
            sp.repetition_penalty = (float)x;
        } else if (!strcmp(a, "--seed")) {
            if (parse_num(a, v, 0, 9007199254740992.0, &seed))
                return 2;
        } else if (!strcmp(a, "--threads") || !strcmp(a, "-t")) {
            if (parse_num(a, v, 0, 1024, &threads))
                return 2;
        } else {
            fprintf(stderr, "splash run: unknown option %s\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (!model_dir) {
        usage(stderr);
        return 2;
    }
    sp.seed = seed > 0 ? (uint64_t)seed : (uint64_t)time(NULL);

    int rc = 1;
    struct splash_err err = {{0}};
    struct splash_model_opts opts = {.kv_format = SPLASH_KV_INT8,
                                     .state_format = SPLASH_STATE_F32};
    struct splash_loaded_model *lm = NULL;
    if (splash_model_load(splash_registry_global(), model_dir, &opts, (int)threads, &lm, &err)) {
        fprintf(stderr, "splash run: %s\n", err.msg);
        return 1;
    }
    const struct splash_family_plugin *fam = lm->family;
    int64_t n_vocab = lm->info.n_vocab;
    struct splash_tokenizer *tok = NULL;
    struct splash_token_buf ids = {0};
    struct splash_tok_bytes text = {0};
    struct splash_sampler sampler;
    int sampler_ok = 0;
    void *seq = NULL;
    float *logits = malloc((size_t)n_vocab * sizeof *logits);
    if (!logits) {
        fprintf(stderr, "splash run: out of memory\n");
        goto out;
    }
    if (splash_tokenizer_load(lm->meta->path, &tok, &err) ||
        splash_tokenizer_encode(tok, prompt, strlen(prompt), SPLASH_TOKENIZE_PARSE_SPECIAL, &ids,
                                &err)) {
        fprintf(stderr, "splash run: %s\n", err.msg);
        goto out;
    }
    if (ids.n == 0) {
        fprintf(stderr, "splash run: the prompt is empty\n");
        goto out;
    }
    if (splash_sampler_init(&sampler, &sp, (int32_t)n_vocab)) {
        fprintf(stderr, "splash run: out of memory for the sampler\n");
        goto out;
    }
    sampler_ok = 1;
    if (splash_family_seq_create(fam, lm->model, &seq, &err)) {
        fprintf(stderr, "splash run: %s\n", err.msg);
        goto out;
    }

    /* prefill: the prompt as one batch, the last position's logits */
    fputs(prompt, stdout);
    fflush(stdout);
    double t0 = now_seconds();
    struct splash_lane lane = {.seq = seq, .tokens = ids.ids, .n_tokens = (int32_t)ids.n,
                               .pos0 = 0, .logits = logits, .logits_all = 0};
    if (splash_family_forward(fam, lm->model, &lane, 1, &err)) {
        fprintf(stderr, "\nsplash run: prefill: %s\n", err.msg);
        goto out;
    }
    double t_prompt = now_seconds() - t0;
    for (size_t i = 0; i < ids.n; i++)
        splash_sampler_accept(&sampler, ids.ids[i]);

    /* decode, streaming whole characters */
    struct splash_detok_stream ds;
    splash_detok_stream_init(&ds, tok, 0);
    const int32_t stops[3] = {splash_tokenizer_eos(tok),
                              splash_tokenizer_find_special(tok, "<|im_end|>"),
                              splash_tokenizer_find_special(tok, "<|endoftext|>")};
    int32_t pos = (int32_t)ids.n, n_gen = 0;
    t0 = now_seconds();
    while (n_gen < (int32_t)n_predict) {
        int32_t next = splash_sampler_sample(&sampler, logits, NULL, NULL, 0);
        n_gen++;
        if (is_stop(stops, next))
            break;
        splash_sampler_accept(&sampler, next);
        text.len = 0;
        if (splash_detok_stream_push(&ds, next, &text, &err)) {
            fprintf(stderr, "\nsplash run: %s\n", err.msg);
            goto out;
        }
        fwrite(text.data, 1, text.len, stdout);
        fflush(stdout);
        if (n_gen == (int32_t)n_predict)
            break;
        lane = (struct splash_lane){.seq = seq, .tokens = &next, .n_tokens = 1, .pos0 = pos++,
                                    .logits = logits, .logits_all = 0};
        if (splash_family_forward(fam, lm->model, &lane, 1, &err)) {
            fprintf(stderr, "\nsplash run: token %d: %s\n", n_gen, err.msg);
            goto out;
        }
    }
    double t_gen = now_seconds() - t0;
    text.len = 0;
    if (splash_detok_stream_flush(&ds, &text, &err) == SPLASH_OK)
        fwrite(text.data, 1, text.len, stdout);
    printf("\n");
    fflush(stdout);
    fprintf(stderr, "prompt: %zu tokens in %.1f ms (%.1f tokens/s)\n", ids.n, t_prompt * 1e3,
            t_prompt > 0 ? (double)ids.n / t_prompt : 0.0);
    fprintf(stderr, "generation: %d tokens in %.1f ms (%.1f tokens/s)\n", n_gen, t_gen * 1e3,
            t_gen > 0 ? (double)n_gen / t_gen : 0.0);
    rc = 0;
out:
    splash_family_seq_destroy(fam, lm->model, seq);
    if (sampler_ok)
        splash_sampler_free(&sampler);
    splash_tok_bytes_free(&text);
    splash_token_buf_free(&ids);
    splash_tokenizer_destroy(tok);
    free(logits);
    splash_model_unload(lm);
    return rc;
}
