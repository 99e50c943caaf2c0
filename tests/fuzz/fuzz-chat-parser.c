/* Fuzzes the streaming parse of a model's output (server/chat/chat_parser.c): whatever
 * a model writes, in any split into tokens, nothing crashes and every split gives the
 * reasoning, answer and calls the whole text gives.
 *
 * Input: byte 0 picks the format (bit 0: qwen / flint, bit 3: harmony over either),
 * whether the prompt opened a think block (bit 1) and whether the request has tools (bit 2); byte 1 seeds the split;
 * the rest is the output, which must be UTF-8 as the server hands it over (others are
 * skipped). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <utf8proc.h>

#include "server/chat/chat_format.h"
#include "server/chat/chat_parser.h"

/* Every JSON-schema type a call's argument converts by. */
static const char tools_json[] =
    "[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\","
    "\"properties\":{\"s\":{\"type\":\"string\"},\"i\":{\"type\":\"integer\"},"
    "\"n\":{\"type\":\"number\"},\"b\":{\"type\":\"boolean\"},\"o\":{\"type\":\"object\"},"
    "\"a\":{\"type\":\"array\"},\"u\":{\"type\":[\"string\",\"null\"]}}}}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":{"
    "\"type\":\"object\",\"properties\":{\"location\":{\"type\":\"string\"}}}}}]";

static json_t *tools;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    tools = json_loads(tools_json, 0, NULL);
    if (!tools)
        abort();
    return 0;
}

/* Parses out[0..n) in pieces: whole when seed is 0, else lengths 1..8 drawn from seed. */
static void parse(const struct splash_chat_parser_opts *o, const char *out, size_t n,
                  uint32_t seed, struct splash_chat_result *r)
{
    struct splash_chat_parser *p = splash_chat_parser_create(o);
    if (!p)
        abort();
    memset(r, 0, sizeof *r);
    for (size_t i = 0; i < n;) {
        size_t piece = n - i;
        if (seed) {
            seed = seed * 1103515245u + 12345u;
            piece = 1 + (seed >> 16) % 8;
            if (piece > n - i)
                piece = n - i;
        }
        splash_chat_parser_feed(p, out + i, piece, splash_chat_result_add, r);
        i += piece;
    }
    splash_chat_parser_finish(p, splash_chat_result_add, r);
    splash_chat_parser_destroy(p);
}

static int same_bytes(const char *a, size_t an, const char *b, size_t bn)
{
    return an == bn && (an == 0 || memcmp(a, b, an) == 0);
}

static int same_result(const struct splash_chat_result *a, const struct splash_chat_result *b)
{
    if (!same_bytes(a->reasoning, a->reasoning_len, b->reasoning, b->reasoning_len) ||
        !same_bytes(a->content, a->content_len, b->content, b->content_len) ||
        a->n_calls != b->n_calls)
        return 0;
    for (size_t i = 0; i < a->n_calls; i++)
        if (strcmp(a->calls[i].name, b->calls[i].name) ||
            !same_bytes(a->calls[i].args, a->calls[i].args_len, b->calls[i].args,
                        b->calls[i].args_len))
            return 0;
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    struct splash_chat_parser_opts o = {
        .format = data[0] & 8   ? &splash_chat_format_harmony
                  : data[0] & 1 ? &splash_chat_format_flint
                                : &splash_chat_format_qwen,
        .starts_in_reasoning = (data[0] & 2) != 0,
        .tools = data[0] & 4 ? tools : NULL};
    const char *out = (const char *)data + 2;
    size_t n = size - 2;
    for (size_t i = 0; i < n;) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t k =
            utf8proc_iterate((const utf8proc_uint8_t *)out + i, (utf8proc_ssize_t)(n - i), &cp);
        if (k <= 0)
            return 0;
        i += (size_t)k;
    }
    struct splash_chat_result whole, split;
    parse(&o, out, n, 0, &whole);
    parse(&o, out, n, 0x9e3779b9u ^ data[1], &split);
    /* a call's arguments are a JSON object */
    for (size_t i = 0; i < whole.n_calls; i++) {
        json_t *args =
            json_loadb(whole.calls[i].args, whole.calls[i].args_len, JSON_ALLOW_NUL, NULL);
        if (!json_is_object(args)) {
            fprintf(stderr, "call %zu: arguments are not a JSON object: %.*s\n", i,
                    (int)whole.calls[i].args_len, whole.calls[i].args);
            abort();
        }
        json_decref(args);
    }
    if (!same_result(&whole, &split)) {
        fprintf(stderr, "lengths: reasoning %zu / %zu, content %zu / %zu\n", whole.reasoning_len,
                split.reasoning_len, whole.content_len, split.content_len);
        fprintf(stderr, "whole: reasoning [%.*s] content [%.*s] %zu calls\n",
                (int)whole.reasoning_len, whole.reasoning ? whole.reasoning : "",
                (int)whole.content_len, whole.content ? whole.content : "", whole.n_calls);
        fprintf(stderr, "split: reasoning [%.*s] content [%.*s] %zu calls\n",
                (int)split.reasoning_len, split.reasoning ? split.reasoning : "",
                (int)split.content_len, split.content ? split.content : "", split.n_calls);
        for (size_t i = 0; i < whole.n_calls && i < split.n_calls; i++)
            fprintf(stderr, "call %zu: %s %.*s | %s %.*s\n", i, whole.calls[i].name,
                    (int)whole.calls[i].args_len, whole.calls[i].args, split.calls[i].name,
                    (int)split.calls[i].args_len, split.calls[i].args);
        abort();
    }
    splash_chat_result_free(&whole);
    splash_chat_result_free(&split);
    return 0;
}
