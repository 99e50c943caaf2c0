/* `splash serve` option parsing. */
#include "server/options.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "server/units.h"
#include "splash/family.h"


struct opt {
    const char *name;
    const char *arg;    /* shown in the help, NULL for flags */
    const char *help;
};

static const struct opt opts_table[] = {
    {"--model", "OWNER/REPO[:VARIANT]", "the upstream model, or with --model-dir the name the API reports"},
    {"--model-dir", "PATH", "serve a local GGUF file, split part or model directory"},
    {"--mmproj", "PATH", "a local GGUF vision projector (not in this build: refused)"},
    {"--revision", "REV", "an upstream branch, tag or commit"},
    {"--draft-model", "OWNER/REPO|PATH|none", "the DFlash2 draft in place of the family's (a repository, a local directory), or none"},
    {"--language-only", NULL, "skip vision loading"},
    {"--offline", NULL, "start the installed model without asking the Hub"},
    {"--port", "N", "HTTP port (SPLASH_PORT or 8000)"},
    {"--host", "ADDR", "bind address (127.0.0.1)"},
    {"--allowed-host", "NAME", "an additional HTTP Host name; repeatable"},
    {"--allowed-origin", "ORIGIN", "an origin whose pages may call the API, or '*'; repeatable"},
    {"--api-key", "KEY", "require this key (SPLASH_API_KEY)"},
    {"--no-webui", NULL, "disable the chat page"},
    {"--max-memory", "SIZE", "lower the memory ceiling, e.g. 28G (auto)"},
    {"--max-context", "TOKENS", "the context limit, e.g. 100K or 1M (auto)"},
    {"--kv-format", "int8|bf16", "KV cache storage (int8)"},
    {"--state-format", "fp32|bf16", "recurrent state storage (fp32)"},
    {"--ple-memory", "SIZE|auto|off", "PLE table cache (not in this build: auto or off only)"},
    {"--expert-memory", "SIZE|auto|off", "memory for a MoE's routed experts: a store they stream through (SIZE), all loaded (off), or as the memory plan leaves (auto)"},
    {"--sparse-kv-memory", "SIZE|auto", "memory for KV read back from disk (not in this build: auto only)"},
    {"--idle-release", "DURATION|off", "idle time before the weights' memory is released (10m)"},
    {"--max-cache-disk", "SIZE|auto|0", "disk quota for the prefix cache (auto)"},
    {"--max-cache-disk-writes", "SIZE", "most the disk cache writes a day (0: no limit)"},
    {"--persistent-cache", NULL, "keep the disk cache across restarts"},
    {"--cache-dir", "PATH", "where --persistent-cache keeps its files ($XDG_CACHE_HOME/splash/prefix-cache)"},
    {"--served-model-name", "NAME", "an additional model name the API accepts; repeatable"},
    {"--announce-served-name", NULL, "report the first --served-model-name in responses"},
    {"--default-reasoning-effort", "EFFORT", "effort of requests that set none"},
    {"--thinking-token-budget", "TOKENS", "thinking tokens of a request that sets no budget"},
    {"--thinking-end-text", "TEXT", "text that ends thinking where a budget runs out"},
    {"--max-request-size", "SIZE", "largest HTTP request body (128M)"},
    {"--max-image-pixels", "N", "maximum resized pixels per image (4194304)"},
    {"--request-timeout", "DURATION", "time a request may take from its arrival (none)"},
    {"--queue-size", "N", "requests admitted at once, running or waiting (32)"},
    {"--decode-share", "X", "decode time owed per unit of prefill time (0.5)"},
    {"--disable-ane", NULL, "accepted; there is no Neural Engine on this platform"},
    {"--activations", "auto", "int8 activations where faster (bf16 is refused: not implemented)"},
    {"--speculative", "auto|dflash|mtp|ngram|off", "how decode cycles propose tokens to verify (auto: the draft, else the model's MTP layers, else prompt lookup)"},
    {"--verify-rows", "auto|all", "rows each decode cycle verifies (auto: the budget's rule; all: every row the output limit leaves)"},
    {"--allow-idle-sleep", NULL, "accepted; nothing to keep awake on this platform"},
    {"--threads", "N", "worker threads (physical cores)"},
    {"--demo", NULL, "serve the tiny story model shipped with Splash (packaging/demo)"},
};

void splash_serve_help(void)
{
    printf("usage: splash serve --model OWNER/REPO[:VARIANT] [--model-dir PATH] [options]\n\n");
    for (size_t i = 0; i < sizeof opts_table / sizeof opts_table[0]; i++) {
        char left[64];
        snprintf(left, sizeof left, "%s%s%s", opts_table[i].name, opts_table[i].arg ? " " : "",
                 opts_table[i].arg ? opts_table[i].arg : "");
        printf("  %-36s %s\n", left, opts_table[i].help);
    }
    printf("\nexamples:\n"
           "  splash serve --model local/qwen --model-dir /models/Qwen3.5-0.8B-Q4_K_M.gguf\n"
           "  splash serve --demo\n");
}

static int fail(char *msg, size_t size, const char *fmt, const char *a, const char *b)
{
    snprintf(msg, size, fmt, a, b ? b : "");
    return -1;
}

/* OWNER/REPO as the installer takes a draft repository: one slash between two names */
static int repo_id_form(const char *v)
{
    const char *slash = strchr(v, '/');
    return slash && slash != v && slash[1] && !strchr(slash + 1, '/') && !strchr(v, ':') &&
           v[0] != '.';
}

static int known(const char *name)
{
    for (size_t i = 0; i < sizeof opts_table / sizeof opts_table[0]; i++)
        if (!strcmp(opts_table[i].name, name))
            return 1;
    return 0;
}

static int takes_value(const char *name)
{
    for (size_t i = 0; i < sizeof opts_table / sizeof opts_table[0]; i++)
        if (!strcmp(opts_table[i].name, name))
            return opts_table[i].arg != NULL;
    return 0;
}

static int parse_int(const char *s, long lo, long hi, long *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (!*s || *end || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

static int size_or(const char *v, uint64_t *out, int allow_off)
{
    if (!strcmp(v, "auto")) {
        *out = 0;
        return 0;
    }
    if (allow_off && !strcmp(v, "off")) {
        *out = UINT64_MAX;
        return 0;
    }
    return splash_parse_size(v, out);
}

static const char *const efforts[] = {"none", "minimal", "low", "medium", "high", "xhigh", "max", NULL};

static int valid_effort(const char *e)
{
    for (size_t i = 0; efforts[i]; i++)
        if (!strcmp(efforts[i], e))
            return 1;
    return 0;
}

/* An origin is '*', "null" or scheme://host[:port] with no wildcard. */
static int valid_origin(const char *o)
{
    if (!strcmp(o, "*"))
        return 1;
    if (strchr(o, '*'))
        return 0;
    const char *sep = strstr(o, "://");
    return sep && sep > o && sep[3];
}

/* server.md "API model aliases": names that keep discovery URLs unambiguous. */
static int valid_alias(const char *a)
{
    if (!*a)
        return 0;
    for (const unsigned char *c = (const unsigned char *)a; *c; c++)
        if (*c <= ' ' || *c == 0x7f || *c == '\\' || *c == '%' || *c == '?' || *c == '#')
            return 0;
    /* path segments: none empty, "." or ".." */
    const char *seg = a;
    for (;;) {
        const char *slash = strchr(seg, '/');
        size_t n = slash ? (size_t)(slash - seg) : strlen(seg);
        if (n == 0 || (n == 1 && seg[0] == '.') || (n == 2 && seg[0] == '.' && seg[1] == '.'))
            return 0;
        if (!slash)
            return 1;
        seg = slash + 1;
    }
}

static int apply(struct splash_serve_opts *o, const char *name, const char *v, char *msg, size_t sz)
{
    long n;
    uint64_t u;
    double d;
    if (!strcmp(name, "--model")) o->model = v;
    else if (!strcmp(name, "--model-dir")) o->model_dir = v;
    else if (!strcmp(name, "--mmproj")) o->mmproj = v;
    else if (!strcmp(name, "--revision")) o->revision = v;
    else if (!strcmp(name, "--draft-model")) o->draft_model = v;
    else if (!strcmp(name, "--language-only")) o->language_only = 1;
    else if (!strcmp(name, "--offline")) o->offline = 1;
    else if (!strcmp(name, "--port")) {
        if (parse_int(v, 1, 65535, &n))
            return fail(msg, sz, "--port: %s is not a port number (1 to 65535)", v, NULL);
        o->port = (int)n;
    } else if (!strcmp(name, "--host")) o->host = v;
    else if (!strcmp(name, "--allowed-host")) {
        if (o->n_allowed_hosts == SPLASH_MAX_LIST)
            return fail(msg, sz, "--allowed-host: at most 16%s", "", NULL);
        o->allowed_hosts[o->n_allowed_hosts++] = v;
    } else if (!strcmp(name, "--allowed-origin")) {
        if (!valid_origin(v))
            return fail(msg, sz, "--allowed-origin: %s is not an origin (patterns are refused; "
                                 "only a bare '*' admits every origin)", v, NULL);
        if (o->n_allowed_origins == SPLASH_MAX_LIST)
            return fail(msg, sz, "--allowed-origin: at most 16%s", "", NULL);
        o->allowed_origins[o->n_allowed_origins++] = v;
    } else if (!strcmp(name, "--api-key")) {
        if (!*v)
            return fail(msg, sz, "--api-key: the key is empty%s", "", NULL);
        o->api_key = v;
    } else if (!strcmp(name, "--no-webui")) o->no_webui = 1;
    else if (!strcmp(name, "--max-memory")) {
        if (size_or(v, &o->max_memory, 0))
            return fail(msg, sz, "--max-memory: %s is not a size (e.g. 28G) or auto", v, NULL);
    } else if (!strcmp(name, "--max-context")) {
        if (!strcmp(v, "auto"))
            o->max_context = 0;
        else if (splash_parse_tokens(v, &u) || u == 0)
            return fail(msg, sz, "--max-context: %s is not a token count (e.g. 100K, 1M) or auto", v, NULL);
        else
            o->max_context = u;
    } else if (!strcmp(name, "--kv-format")) {
        if (!strcmp(v, "int8")) o->kv_format = SPLASH_KV_INT8;
        else if (!strcmp(v, "bf16")) o->kv_format = SPLASH_KV_BF16;
        else return fail(msg, sz, "--kv-format: %s (int8 or bf16)", v, NULL);
    } else if (!strcmp(name, "--state-format")) {
        if (!strcmp(v, "fp32")) o->state_format = SPLASH_STATE_F32;
        else if (!strcmp(v, "bf16")) o->state_format = SPLASH_STATE_BF16;
        else return fail(msg, sz, "--state-format: %s (fp32 or bf16)", v, NULL);
    } else if (!strcmp(name, "--ple-memory")) {
        if (size_or(v, &o->ple_memory, 1))
            return fail(msg, sz, "--ple-memory: %s is not a size, auto or off", v, NULL);
    } else if (!strcmp(name, "--expert-memory")) {
        if (size_or(v, &o->expert_memory, 1))
            return fail(msg, sz, "--expert-memory: %s is not a size, auto or off", v, NULL);
        if (!o->expert_memory && strcmp(v, "auto"))
            return fail(msg, sz, "--expert-memory: %s holds no expert (a size, auto or off)", v,
                        NULL);
    } else if (!strcmp(name, "--sparse-kv-memory")) {
        if (size_or(v, &o->sparse_kv_memory, 0))
            return fail(msg, sz, "--sparse-kv-memory: %s is not a size or auto", v, NULL);
    } else if (!strcmp(name, "--idle-release")) {
        if (!strcmp(v, "off"))
            o->idle_release = -1;
        else if (splash_parse_duration(v, &d))
            return fail(msg, sz, "--idle-release: %s is not a duration (90s, 30m, 1.5h) or off", v, NULL);
        else
            o->idle_release = d;
    } else if (!strcmp(name, "--max-cache-disk")) {
        if (!strcmp(v, "auto"))
            o->max_cache_disk = -1;
        else if (splash_parse_size(v, &u))
            return fail(msg, sz, "--max-cache-disk: %s is not a size, auto or 0", v, NULL);
        else
            o->max_cache_disk = (int64_t)u;
    } else if (!strcmp(name, "--max-cache-disk-writes")) {
        if (splash_parse_size(v, &o->max_cache_disk_writes))
            return fail(msg, sz, "--max-cache-disk-writes: %s is not a size", v, NULL);
    } else if (!strcmp(name, "--persistent-cache")) o->persistent_cache = 1;
    else if (!strcmp(name, "--cache-dir")) o->cache_dir = v;
    else if (!strcmp(name, "--served-model-name")) {
        if (!valid_alias(v))
            return fail(msg, sz, "--served-model-name: %s is not a usable name (no whitespace, control "
                                 "characters, \\, %%, ?, # or empty, . or .. path segments)", v, NULL);
        if (o->n_served_names == SPLASH_MAX_LIST)
            return fail(msg, sz, "--served-model-name: at most 16%s", "", NULL);
        o->served_names[o->n_served_names++] = v;
    } else if (!strcmp(name, "--announce-served-name")) o->announce_served_name = 1;
    else if (!strcmp(name, "--default-reasoning-effort")) {
        if (!valid_effort(v))
            return fail(msg, sz, "--default-reasoning-effort: %s (none, minimal, low, medium, high, xhigh or max)", v, NULL);
        o->default_reasoning_effort = v;
    } else if (!strcmp(name, "--thinking-token-budget")) {
        if (splash_parse_tokens(v, &u))
            return fail(msg, sz, "--thinking-token-budget: %s is not a token count", v, NULL);
        o->thinking_token_budget = (int64_t)u;
    } else if (!strcmp(name, "--thinking-end-text")) o->thinking_end_text = v;
    else if (!strcmp(name, "--max-request-size")) {
        if (splash_parse_size(v, &o->max_request_size) || o->max_request_size == 0)
            return fail(msg, sz, "--max-request-size: %s is not a size (e.g. 128M)", v, NULL);
    } else if (!strcmp(name, "--max-image-pixels")) {
        if (parse_int(v, 1, 1L << 40, &n))
            return fail(msg, sz, "--max-image-pixels: %s is not a pixel count", v, NULL);
        o->max_image_pixels = (uint64_t)n;
    } else if (!strcmp(name, "--request-timeout")) {
        if (splash_parse_duration(v, &d) || d <= 0)
            return fail(msg, sz, "--request-timeout: %s is not a duration", v, NULL);
        o->request_timeout = d;
    } else if (!strcmp(name, "--queue-size")) {
        if (parse_int(v, 1, 65536, &n))
            return fail(msg, sz, "--queue-size: %s is not a count of at least 1", v, NULL);
        o->queue_size = (int)n;
    } else if (!strcmp(name, "--decode-share")) {
        char *end;
        d = strtod(v, &end);
        if (!*v || *end || !isfinite(d) || d < 0)
            return fail(msg, sz, "--decode-share: %s is not a non-negative number", v, NULL);
        o->decode_share = d;
    } else if (!strcmp(name, "--disable-ane")) o->disable_ane = 1;
    else if (!strcmp(name, "--activations")) {
        if (strcmp(v, "auto") && strcmp(v, "bf16"))
            return fail(msg, sz, "--activations: %s (auto or bf16)", v, NULL);
        o->activations = v;
    } else if (!strcmp(name, "--speculative")) {
        if (strcmp(v, "auto") && strcmp(v, "dflash") && strcmp(v, "mtp") && strcmp(v, "ngram") &&
            strcmp(v, "off"))
            return fail(msg, sz, "--speculative: %s (auto, dflash, mtp, ngram or off)", v, NULL);
        o->speculative = v;
    } else if (!strcmp(name, "--verify-rows")) {
        if (strcmp(v, "auto") && strcmp(v, "all"))
            return fail(msg, sz, "--verify-rows: %s (auto or all)", v, NULL);
        o->verify_rows = v;
    } else if (!strcmp(name, "--allow-idle-sleep")) o->allow_idle_sleep = 1;
    else if (!strcmp(name, "--threads")) {
        if (parse_int(v, 1, 1024, &n))
            return fail(msg, sz, "--threads: %s is not a thread count", v, NULL);
        o->threads = (int)n;
    } else if (!strcmp(name, "--demo")) o->demo = 1;
    return 0;
}

static void defaults(struct splash_serve_opts *o)
{
    memset(o, 0, sizeof *o);
    o->port = 8000;
    o->host = "127.0.0.1";
    o->idle_release = 600;
    o->max_cache_disk = -1;
    o->thinking_token_budget = -1;
    o->max_request_size = 128ull << 20;
    o->max_image_pixels = 4194304;
    o->queue_size = 32;
    o->decode_share = 0.5;
    o->activations = "auto";
    o->verify_rows = "auto";
    o->speculative = "auto";
}

int splash_serve_opts_parse(struct splash_serve_opts *o, int argc, char **argv, char *msg,
                            size_t msg_size)
{
    defaults(o);
    /* environment first; flags override */
    const char *env;
    if ((env = getenv("SPLASH_PORT")) && *env && apply(o, "--port", env, msg, msg_size))
        return -1;
    if ((env = getenv("SPLASH_API_KEY")) && *env)
        o->api_key = env;
    if ((env = getenv("SPLASH_DEFAULT_REASONING_EFFORT")) && *env &&
        apply(o, "--default-reasoning-effort", env, msg, msg_size))
        return -1;
    if ((env = getenv("SPLASH_THINKING_TOKEN_BUDGET")) && *env &&
        apply(o, "--thinking-token-budget", env, msg, msg_size))
        return -1;
    if ((env = getenv("SPLASH_THINKING_END_TEXT")) && *env)
        o->thinking_end_text = env;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            splash_serve_help();
            return 1;
        }
        char name[64];
        const char *value = NULL;
        const char *eq = strchr(a, '=');
        if (!strncmp(a, "--", 2) && eq && (size_t)(eq - a) < sizeof name) {
            snprintf(name, sizeof name, "%.*s", (int)(eq - a), a);
            value = eq + 1;
        } else {
            snprintf(name, sizeof name, "%s", a);
        }
        if (!known(name))
            return fail(msg, msg_size, "%s: unknown option (see splash serve --help)", a, NULL);
        if (takes_value(name) && !value) {
            if (i + 1 >= argc)
                return fail(msg, msg_size, "%s: needs a value", name, NULL);
            value = argv[++i];
        } else if (!takes_value(name) && value) {
            return fail(msg, msg_size, "%s: takes no value", name, NULL);
        }
        if (apply(o, name, value, msg, msg_size))
            return -1;
    }
    /* combinations server.md refuses */
    if (!o->model && !o->demo)
        return fail(msg, msg_size, "--model: required (OWNER/REPO[:VARIANT]), or --demo%s", "", NULL);
    if (o->model && !strchr(o->model, '/'))
        return fail(msg, msg_size, "--model: %s is not OWNER/REPO[:VARIANT]", o->model, NULL);
    if (o->mmproj && !o->model_dir)
        return fail(msg, msg_size, "--mmproj: requires --model-dir%s", "", NULL);
    if (o->mmproj && o->language_only)
        return fail(msg, msg_size, "--mmproj: cannot be combined with --language-only%s", "", NULL);
    if (o->revision && o->model_dir)
        return fail(msg, msg_size, "--revision: cannot be combined with --model-dir%s", "", NULL);
    if (o->persistent_cache && o->max_cache_disk == 0)
        return fail(msg, msg_size, "--persistent-cache: needs the SSD cache, which --max-cache-disk 0 "
                                   "turns off%s", "", NULL);
    /* PLATFORM.md: bf16 keeps bf16/f32 activations; every matmul here quantizes them to
     * the weight format's int8 activation type, so bf16 would be accepted and ignored */
    if (!strcmp(o->activations, "bf16"))
        return fail(msg, msg_size, "--activations bf16: this build has int8 activation kernels only "
                                   "(bf16/f32 activations are not implemented); use auto%s", "", NULL);
    /* options whose machinery this build lacks are refused, not accepted and ignored */
    if (o->mmproj)
        return fail(msg, msg_size, "--mmproj: vision is not available in this build; leave it out "
                                   "to serve the model's text%s", "", NULL);
    /* --draft-model: none, a local directory, or (installing from the Hub) OWNER/REPO, which
     * the installer checks against the target before any weight moves (models.md "Drafts") */
    int hub = o->model && !o->model_dir && !o->demo;
    if (o->draft_model && strcmp(o->draft_model, "none")) {
        char config[4096];
        snprintf(config, sizeof config, "%s/config.json", o->draft_model);
        struct stat sb;
        int is_dir = !stat(o->draft_model, &sb) && S_ISDIR(sb.st_mode);
        if (!(hub && !is_dir && repo_id_form(o->draft_model)) && access(config, R_OK) != 0)
            return fail(msg, msg_size, "--draft-model: %s holds no readable config.json (a local "
                                       "DFlash2 draft directory, OWNER/REPO with --model, or none)",
                        o->draft_model, NULL);
        if (!strcmp(o->speculative, "ngram") || !strcmp(o->speculative, "off"))
            return fail(msg, msg_size, "--draft-model with --speculative %s: the draft would not "
                                       "be used (auto or dflash use it)",
                        o->speculative, NULL);
    }
    /* from the Hub the family's draft installs beside the target; whether it has one is
     * known once the installer ran (serve_install.c) */
    if (!strcmp(o->speculative, "dflash") && o->draft_model && !strcmp(o->draft_model, "none"))
        return fail(msg, msg_size, "--speculative dflash: --draft-model none leaves no draft%s",
                    "", NULL);
    if (!strcmp(o->speculative, "dflash") && !o->draft_model && !hub)
        return fail(msg, msg_size, "--speculative dflash: needs --draft-model PATH (a local DFlash2 "
                                   "draft) with --model-dir or --demo%s",
                    "", NULL);
    if (o->ple_memory || o->sparse_kv_memory)
        return fail(msg, msg_size, "%s: not available in this build (weights and caches stay "
                                   "resident)",
                    o->ple_memory ? "--ple-memory" : "--sparse-kv-memory", NULL);
    if (o->cache_dir && !o->persistent_cache)
        return fail(msg, msg_size, "--cache-dir: needs --persistent-cache%s", "", NULL);
    if (o->max_cache_disk_writes && o->max_cache_disk == 0)
        return fail(msg, msg_size, "--max-cache-disk-writes: needs the SSD cache, which "
                    "--max-cache-disk 0 turns off%s", "", NULL);
    if (o->announce_served_name && !o->n_served_names)
        return fail(msg, msg_size, "--announce-served-name: needs --served-model-name%s", "", NULL);
    return 0;
}
