/* Fuzzes encode and decode with the full Qwen3 vocabulary: random bytes are
 * refused unless valid UTF-8, and text that NFC leaves unchanged must come
 * back byte for byte, whole and through the streaming decoder.
 *
 * The first input byte picks the mode (bit 0: parse_special); the rest is the
 * text. The vocabulary is ../shared/testdata/tokenizer/qwen3-vocab.gguf from
 * the repository root, or $SPLASH_TESTDATA/tokenizer/qwen3-vocab.gguf. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <utf8proc.h>

#include "server/text/tokenizer/tokenizer.h"

static struct splash_tokenizer *tok;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    const char *dir = getenv("SPLASH_TESTDATA");
    char path[512];
    snprintf(path, sizeof path, "%s/tokenizer/qwen3-vocab.gguf",
             dir && *dir ? dir : "../shared/testdata");
    struct splash_err err;
    if (splash_tokenizer_load(path, &tok, &err)) {
        fprintf(stderr, "fuzz-tokenizer: %s\n", err.msg);
        abort();
    }
    return 0;
}

static int valid_utf8(const uint8_t *s, size_t n)
{
    utf8proc_ssize_t i = 0;
    while ((size_t)i < n) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t k = utf8proc_iterate(s + i, (utf8proc_ssize_t)(n - (size_t)i), &cp);
        if (k <= 0)
            return 0;
        i += k;
    }
    return 1;
}

static int nfc_unchanged(const uint8_t *s, size_t n)
{
    utf8proc_uint8_t *nfc = NULL;
    utf8proc_ssize_t k = utf8proc_map(s, (utf8proc_ssize_t)n, &nfc,
                                      UTF8PROC_STABLE | UTF8PROC_COMPOSE);
    int same = k >= 0 && (size_t)k == n && memcmp(nfc, s, n) == 0;
    free(nfc);
    return same;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    unsigned flags = data[0] & 1 ? SPLASH_TOKENIZE_PARSE_SPECIAL : 0;
    const char *text = (const char *)data + 1;
    size_t len = size - 1;

    struct splash_token_buf ids = {0};
    struct splash_err err;
    enum splash_status st = splash_tokenizer_encode(tok, text, len, flags, &ids, &err);
    if (st) {
        /* only invalid UTF-8 is refused, and then nothing is appended */
        if (st != SPLASH_ERR_INVALID || valid_utf8(data + 1, len) || ids.n != 0)
            abort();
        splash_token_buf_free(&ids);
        return 0;
    }
    if (!valid_utf8(data + 1, len))
        abort();
    for (size_t i = 0; i < ids.n; i++) {
        if (ids.ids[i] < 0 || (size_t)ids.ids[i] >= splash_tokenizer_n_tokens(tok))
            abort();
    }

    /* control tokens only come from parse_special, so rendering them is the inverse */
    unsigned detok = flags ? SPLASH_DETOK_SPECIAL : 0;
    struct splash_tok_bytes whole = {0}, streamed = {0};
    if (splash_tokenizer_decode(tok, ids.ids, ids.n, detok, &whole, &err))
        abort();
    struct splash_detok_stream s;
    splash_detok_stream_init(&s, tok, detok);
    for (size_t i = 0; i < ids.n; i++) {
        if (splash_detok_stream_push(&s, ids.ids[i], &streamed, &err))
            abort();
        /* what the stream has let out never ends inside a character */
        if (!valid_utf8((const uint8_t *)streamed.data, streamed.len))
            abort();
    }
    if (splash_detok_stream_flush(&s, &streamed, &err))
        abort();
    if (whole.len != streamed.len || (whole.len && memcmp(whole.data, streamed.data, whole.len)))
        abort();
    int same = whole.len == len && (len == 0 || memcmp(whole.data, text, len) == 0);
    if (!same && nfc_unchanged(data + 1, len))
        abort();

    splash_tok_bytes_free(&whole);
    splash_tok_bytes_free(&streamed);
    splash_token_buf_free(&ids);
    return 0;
}
