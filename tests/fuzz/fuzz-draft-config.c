/* Fuzzes the DFlash2 draft's config.json checks (families/drafts/dflash2/dflash2_config.c) against
 * a fixed target's sizes (hidden 256, vocabulary 2048, 8 layers). The input is the draft's
 * config.json text. */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/meta.h"
#include "core/registry.h"
#include "families/drafts/dflash2/dflash2.h"

static char dir[64];
static char target_path[128], draft_path[128];
static struct splash_registry *reg;
static struct splash_meta *target;

static void cleanup(void)
{
    splash_meta_close(target);
    remove(target_path);
    remove(draft_path);
    rmdir(dir);
}

static int write_file(const char *path, const void *data, size_t size)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t n = fwrite(data, 1, size, f);
    return fclose(f) == 0 && n == size ? 0 : -1;
}

static int init(void)
{
    static const char tcfg[] =
        "{\"model_type\": \"qwen3_5_text\", \"hidden_size\": 256, \"vocab_size\": 2048, "
        "\"num_hidden_layers\": 8}";
    snprintf(dir, sizeof dir, "/tmp/splash-fuzz-draft-XXXXXX");
    if (!mkdtemp(dir))
        return -1;
    snprintf(target_path, sizeof target_path, "%s/target.json", dir);
    snprintf(draft_path, sizeof draft_path, "%s/config.json", dir);
    struct splash_err err;
    if (write_file(target_path, tcfg, sizeof tcfg - 1) ||
        splash_meta_open_config(target_path, &target, &err))
        return -1;
    reg = splash_registry_create();
    atexit(cleanup);
    return reg ? 0 : -1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!reg && init())
        __builtin_trap();
    if (write_file(draft_path, data, size))
        return 0;
    struct splash_meta *m = NULL;
    struct splash_err err;
    if (splash_meta_open_config(draft_path, &m, &err))
        return 0;
    struct dflash2_config cfg;
    memset(err.msg, 1, sizeof err.msg);
    enum splash_status st = dflash2_config_read(splash_registry_host(reg), m, target, &cfg, &err);
    if (st && !memchr(err.msg, 0, sizeof err.msg))
        __builtin_trap(); /* the message must be a terminated string */
    if (!st) {
        /* an accepted config holds what the kernels take */
        if (cfg.n_taps < 1 || cfg.n_taps > SPLASH_DRAFT_MAX_TAPS || cfg.block < 8 ||
            cfg.mask_token < 0 || cfg.mask_token >= cfg.n_vocab || cfg.n_embd != 256)
            __builtin_trap();
        char summary[160];
        dflash2_config_summary(&cfg, summary, sizeof summary);
    }
    splash_meta_close(m);
    return 0;
}
