/* Fuzzes the grammar compilers and the matcher. The input's first byte seeds a
 * walk; the rest is JSON: a schema (or, as an array, a tools list, or as an
 * object also a request body for the three APIs' constraint readers). What
 * compiles is walked for up to 64 tokens of a small vocabulary (the 256 bytes,
 * some multi-byte pieces and the format's tags), and every step checks that
 * the token picked from the mask is taken and that a token outside it is not. */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/text/grammar/grammar.h"

enum {
    T_CALL_OPEN = 256,
    T_CALL_CLOSE,
    T_THINK_OPEN,
    T_THINK_CLOSE,
    T_KEY_OPEN,
    T_KEY_CLOSE,
    T_VALUE_OPEN,
    T_VALUE_CLOSE,
    T_STOP,
    T_FIRST_PIECE,
};

static const char *const pieces_multi[] = {
    "\":",          "{\"",           "\"}",    "\", \"", "true", "null", "  ", "\n</parameter>\n",
    "<parameter=",  "\xe4\xb8",      "\xad\"", "\\u00",  "-1",   "0.5e", "]}", "[{",
    "\n<function=", "</function>\n",
};

static struct splash_grammar_vocab *vocab;
static size_t n_tokens;
static struct splash_grammar_format fmt_qwen, fmt_glm, fmt_harmony;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    size_t n_multi = sizeof pieces_multi / sizeof *pieces_multi;
    n_tokens = T_FIRST_PIECE + n_multi;
    const char **pieces = calloc(n_tokens, sizeof *pieces);
    size_t *lens = calloc(n_tokens, sizeof *lens);
    uint8_t *special = calloc(n_tokens, 1);
    static char bytes[256];
    for (int i = 0; i < 256; i++) {
        bytes[i] = (char)i;
        pieces[i] = &bytes[i];
        lens[i] = 1;
    }
    static const char *const tags[] = {"<tool_call>", "</tool_call>", "<think>",
                                       "</think>",    "<arg_key>",    "</arg_key>",
                                       "<arg_value>", "</arg_value>", "<|stop|>"};
    for (int i = 0; i < 9; i++) {
        pieces[256 + i] = tags[i];
        lens[256 + i] = strlen(tags[i]);
        special[256 + i] = 1;
    }
    for (size_t i = 0; i < n_multi; i++) {
        pieces[T_FIRST_PIECE + i] = pieces_multi[i];
        lens[T_FIRST_PIECE + i] = strlen(pieces_multi[i]);
    }
    int32_t stop = T_STOP;
    struct splash_err err;
    if (splash_grammar_vocab_create_raw(n_tokens, pieces, lens, special, &stop, 1, &vocab, &err)) {
        fprintf(stderr, "fuzz-json-schema: %s\n", err.msg);
        abort();
    }
    free(pieces);
    free(lens);
    free(special);
    fmt_qwen = (struct splash_grammar_format){.calls = SPLASH_GRAMMAR_CALLS_QWEN_XML,
                                              .think_open = T_THINK_OPEN,
                                              .think_close = T_THINK_CLOSE,
                                              .call_open = T_CALL_OPEN,
                                              .call_close = T_CALL_CLOSE,
                                              .arg_key_open = -1,
                                              .arg_key_close = -1,
                                              .arg_value_open = -1,
                                              .arg_value_close = -1};
    fmt_glm = fmt_qwen;
    fmt_glm.calls = SPLASH_GRAMMAR_CALLS_GLM_ARGS;
    fmt_glm.arg_key_open = T_KEY_OPEN;
    fmt_glm.arg_key_close = T_KEY_CLOSE;
    fmt_glm.arg_value_open = T_VALUE_OPEN;
    fmt_glm.arg_value_close = T_VALUE_CLOSE;
    /* harmony's message tokens: any special ids serve the grammar */
    fmt_harmony = fmt_qwen;
    fmt_harmony.calls = SPLASH_GRAMMAR_CALLS_HARMONY;
    fmt_harmony.channel = T_KEY_OPEN;
    fmt_harmony.message = T_KEY_CLOSE;
    fmt_harmony.start = T_VALUE_OPEN;
    fmt_harmony.end = T_VALUE_CLOSE;
    return 0;
}

static int allowed(const uint32_t *mask, int32_t id)
{
    return (int)((mask[id / 32] >> (id % 32)) & 1u);
}

static void walk(const struct splash_grammar *g, uint64_t seed)
{
    struct splash_err err;
    struct splash_grammar_matcher *m;
    if (splash_grammar_matcher_create(g, vocab, &m, &err))
        return;
    uint32_t mask[(T_FIRST_PIECE + 64) / 32 + 1];
    int32_t ids[T_FIRST_PIECE + 64];
    for (int step = 0; step < 64; step++) {
        splash_grammar_matcher_fill_mask(m, mask);
        size_t n = 0;
        for (size_t i = 0; i < n_tokens; i++)
            if (allowed(mask, (int32_t)i))
                ids[n++] = (int32_t)i;
        if ((n_tokens && allowed(mask, T_STOP)) != splash_grammar_matcher_is_complete(m) &&
            !splash_grammar_matcher_in_thinking(m))
            abort();
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        /* a token outside the mask is refused and changes nothing */
        int32_t other = (int32_t)((seed >> 33) % n_tokens);
        if (!allowed(mask, other) &&
            splash_grammar_matcher_accept_token(m, other, &err) == SPLASH_OK)
            abort();
        if (n == 0)
            break;
        int32_t pick = ids[(seed >> 17) % n];
        if (splash_grammar_matcher_accept_token(m, pick, &err) != SPLASH_OK)
            abort();
        if (pick == T_STOP)
            break;
        if (step % 8 == 7) {
            splash_grammar_matcher_rollback(m, 1);
            if (splash_grammar_matcher_accept_token(m, pick, &err) != SPLASH_OK)
                abort();
        }
        (void)splash_grammar_matcher_distance(m);
    }
    splash_grammar_matcher_destroy(m);
}

static void compiled(struct splash_grammar *g, uint64_t seed, int reasoning)
{
    walk(g, seed);
    if (reasoning) {
        struct splash_grammar *w;
        struct splash_err err;
        if (splash_grammar_wrap_reasoning(g, (enum splash_grammar_reasoning)(reasoning % 3),
                                          &fmt_qwen, &w, &err) == SPLASH_OK) {
            walk(w, seed + 1);
            splash_grammar_destroy(w);
        }
    }
    splash_grammar_destroy(g);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint8_t mode = data[0];
    json_t *doc = json_loadb((const char *)data + 1, size - 1, JSON_DECODE_ANY, NULL);
    if (!doc)
        return 0;
    struct splash_err err;
    struct splash_grammar *g;
    uint64_t seed = mode * 0x9e3779b97f4a7c15ull + size;
    if (json_is_array(doc)) {
        const struct splash_grammar_format *f = (mode & 1) ? &fmt_glm : &fmt_qwen;
        if (splash_grammar_compile_tool_calls(doc, NULL, mode & 2, f, &g, &err) == SPLASH_OK)
            compiled(g, seed, mode >> 6);
    } else {
        unsigned flags = (mode & 1) ? SPLASH_GRAMMAR_JSON_STRICT : 0;
        if (splash_grammar_compile_json_schema(doc, flags, &g, &err) == SPLASH_OK)
            compiled(g, seed, mode >> 6);
        if (json_is_object(doc) && (mode & 2)) {
            json_t *spec = NULL;
            enum splash_status st = (mode & 4) ? splash_grammar_spec_from_chat(doc, &spec, &err)
                                    : (mode & 8)
                                        ? splash_grammar_spec_from_responses(doc, &spec, &err)
                                        : splash_grammar_spec_from_messages(doc, &spec, &err);
            if (st == SPLASH_OK && spec) {
                const struct splash_grammar_format *f = (mode & 32)   ? &fmt_harmony
                                                        : (mode & 16) ? &fmt_glm
                                                                      : &fmt_qwen;
                /* harmony's optional analysis message too, now and then */
                if ((mode & 32) && (mode & 1))
                    json_object_set_new(spec, "reasoning", json_string("optional"));
                if (splash_grammar_compile_spec(spec, f, &g, &err) == SPLASH_OK)
                    compiled(g, seed, 0);
                json_decref(spec);
            }
        }
    }
    json_decref(doc);
    return 0;
}
