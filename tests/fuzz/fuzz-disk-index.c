/* Fuzzes a persistent SSD tier's start (server/engine/disk_cache_index.c take_back): the input
 * is the namespace's index, pages file and states file, each behind a 4-byte little-endian
 * length (the states file takes what is left). The tier opens on them (pages of 4 tokens
 * and 64 bytes), takes back what reads as written, and each point it took back is read. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "server/engine/disk_cache.h"

static char root[64], ns[128];

/* The next part of the input: a length, then that many bytes (at most what is left). */
static const uint8_t *part(const uint8_t **data, size_t *size, size_t *len)
{
    uint32_t n = 0;
    if (*size >= 4) {
        n = (uint32_t)(*data)[0] | (uint32_t)(*data)[1] << 8 | (uint32_t)(*data)[2] << 16 |
            (uint32_t)(*data)[3] << 24;
        *data += 4;
        *size -= 4;
    }
    *len = n < *size ? n : *size;
    const uint8_t *p = *data;
    *data += *len;
    *size -= *len;
    return p;
}

static void put_file(const char *name, const uint8_t *bytes, size_t len)
{
    char path[192];
    snprintf(path, sizeof path, "%s/%s", ns, name);
    FILE *f = fopen(path, "wb");
    if (!f)
        abort();
    if (len && fwrite(bytes, 1, len, f) != len)
        abort();
    fclose(f);
}

/* The namespace's files and directories go when the fuzzer exits. */
static void remove_root(void)
{
    static const char *const files[] = {"index", "index.new", "pages", "states", "probation",
                                        "probation.new"};
    char path[192];
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        snprintf(path, sizeof path, "%s/%s", ns, files[i]);
        unlink(path);
    }
    rmdir(ns);
    rmdir(root);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!root[0]) { /* the namespace under a root of its own: nothing else is swept */
        snprintf(root, sizeof root, "/tmp/fuzz-disk-index-XXXXXX");
        if (!mkdtemp(root))
            abort();
        snprintf(ns, sizeof ns, "%s/0123456789abcdef0123456789abcdef", root);
        if (mkdir(ns, 0700) != 0)
            abort();
        atexit(remove_root);
    }
    size_t len;
    const uint8_t *index = part(&data, &size, &len);
    put_file("index", index, len);
    const uint8_t *pages = part(&data, &size, &len);
    put_file("pages", pages, len);
    put_file("states", data, size);
    char path[192];
    snprintf(path, sizeof path, "%s/probation", ns);
    unlink(path);
    struct splash_disk_opts o = {.persist_dir = ns, .quota = 1 << 20, .page_bytes = 64,
                                 .page_tokens = 4};
    struct splash_disk_cache *d;
    char why[256];
    if (splash_disk_cache_open(&o, &d, why, sizeof why) != SPLASH_OK || !d)
        return 0;
    /* whatever was taken back reads back checked (tokens the index does not give: the
     * deepest point along a run of any tokens is looked up, and none is found or it reads) */
    int32_t tokens[16] = {0};
    int32_t n = splash_disk_cache_peek(d, tokens, 16, NULL, NULL);
    uint64_t got_size;
    int cls;
    if (n)
        free(splash_disk_cache_get(d, tokens, n, &got_size, &cls));
    splash_disk_cache_probation_passed(d);
    splash_disk_cache_close(d);
    return 0;
}
