/* splash template: renders a request with a chat template exactly as the template produces it,
 * or prints the later-system probe's outcome. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <jansson.h>

#include "cli/commands.h"
#include "core/gguf.h"
#include "server/chat/jinja.h"
#include "server/chat/template_probe.h"


static void usage(FILE *f)
{
    fprintf(f, "usage: splash template (--model-dir PATH | --template FILE) --request FILE.json "
               "[--probe] [--now ISO8601]\n"
               "  Renders the request (messages, tools, add_generation_prompt, kwargs) with the\n"
               "  chat template to stdout, as the template produces it. With --probe, prints the\n"
               "  later-system probe's outcome instead. --now sets strftime_now's clock, such as\n"
               "  2026-01-15T12:00:00 (local wall-clock time) or 2026-01-15T12:00:00Z (an instant,\n"
               "  shown in local time), so a render compares with a reference's fixed clock.\n");
}

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n + 65536 + 1 > cap) {
            cap = cap ? cap * 2 : 131072;
            char *nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = nb;
        }
        size_t r = fread(buf + n, 1, 65536, f);
        n += r;
        if (r < 65536)
            break;
    }
    fclose(f);
    buf[n] = 0;
    *len = n;
    return buf;
}

/* A special token as tokenizer_config.json writes it: a string or {"content": ...}. */
static void set_token(json_t *special, const char *name, const json_t *v)
{
    if (json_is_object(v))
        v = json_object_get(v, "content");
    if (json_is_string(v))
        json_object_set(special, name, (json_t *)v);
}

/* tokenizer_config.json: its chat_template (a string, or named variants: "default") and tokens */
static char *template_from_config(const char *path, json_t *special)
{
    json_error_t jerr;
    json_t *cfg = json_load_file(path, 0, &jerr);
    if (!cfg)
        return NULL;
    const json_t *t = json_object_get(cfg, "chat_template");
    char *text = NULL;
    if (json_is_string(t)) {
        text = strdup(json_string_value(t));
    } else if (json_is_array(t)) {
        size_t i;
        const json_t *v;
        json_array_foreach(t, i, v) {
            const char *name = json_string_value(json_object_get(v, "name"));
            if (name && strcmp(name, "default") == 0)
                text = strdup(json_string_value(json_object_get(v, "template")));
        }
    }
    static const char *const names[] = {"bos_token", "eos_token", "pad_token", "unk_token"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        set_token(special, names[i], json_object_get(cfg, names[i]));
    json_decref(cfg);
    return text;
}

static const char *gguf_token(const struct splash_gguf *g, const char *id_key)
{
    const struct splash_gguf_kv *id = splash_gguf_find_kv(g, id_key);
    const struct splash_gguf_kv *toks = splash_gguf_find_kv(g, "tokenizer.ggml.tokens");
    if (!id || !toks || toks->type != GGUF_ARRAY || toks->arr_type != GGUF_STRING)
        return NULL;
    uint64_t i = id->v.u64;
    return i < toks->n ? ((char **)toks->arr)[i] : NULL;
}

static char *template_from_gguf(const char *path, json_t *special, char *why, size_t why_size)
{
    struct splash_gguf *g = NULL;
    struct splash_err err = {{0}};
    if (splash_gguf_open(path, SPLASH_GGUF_HEADERS_ONLY, &g, &err) != SPLASH_OK) {
        snprintf(why, why_size, "%s", err.msg);
        return NULL;
    }
    const struct splash_gguf_kv *kv = splash_gguf_find_kv(g, "tokenizer.chat_template");
    char *text = kv && kv->type == GGUF_STRING ? strdup(kv->v.str) : NULL;
    if (!text)
        snprintf(why, why_size, "%.400s: no tokenizer.chat_template", path);
    static const struct {
        const char *key, *name;
    } ids[] = {{"tokenizer.ggml.bos_token_id", "bos_token"},
               {"tokenizer.ggml.eos_token_id", "eos_token"},
               {"tokenizer.ggml.padding_token_id", "pad_token"}};
    for (size_t i = 0; i < sizeof ids / sizeof *ids; i++) {
        const char *tok = gguf_token(g, ids[i].key);
        if (tok)
            json_object_set_new(special, ids[i].name, json_string(tok));
    }
    splash_gguf_close(g);
    return text;
}

static char *template_from_model_dir(const char *path, json_t *special, char *why,
                                     size_t why_size)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        snprintf(why, why_size, "%.400s: no such file or directory", path);
        return NULL;
    }
    if (!S_ISDIR(st.st_mode))
        return template_from_gguf(path, special, why, why_size);
    char p[4096];
    snprintf(p, sizeof p, "%s/tokenizer_config.json", path);
    if (stat(p, &st) == 0) {
        char *t = template_from_config(p, special);
        if (!t)
            snprintf(why, why_size, "%.400s: no chat_template", p);
        return t;
    }
    DIR *d = opendir(path);
    if (!d) {
        snprintf(why, why_size, "%.400s: cannot read the directory", path);
        return NULL;
    }
    char *t = NULL;
    struct dirent *e;
    while ((e = readdir(d)) && !t) {
        size_t n = strlen(e->d_name);
        if (n > 5 && strcmp(e->d_name + n - 5, ".gguf") == 0 && !strstr(e->d_name, "mmproj")) {
            snprintf(p, sizeof p, "%s/%s", path, e->d_name);
            t = template_from_gguf(p, special, why, why_size);
        }
    }
    closedir(d);
    if (!t && !why[0])
        snprintf(why, why_size, "%.400s: no tokenizer_config.json or GGUF with a chat template",
                 path);
    return t;
}

/* --now: YYYY-MM-DDTHH:MM:SS (or a space for the T), then nothing (local time), Z, or
 * +HH:MM / -HH:MM. 0 with *out Unix seconds, -1 when malformed. */
static int parse_now(const char *s, int64_t *out)
{
    struct tm tm = {0};
    char sep;
    int used = 0;
    if (sscanf(s, "%4d-%2d-%2d%c%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &sep,
               &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &used) != 7 ||
        (sep != 'T' && sep != ' ') || tm.tm_mon < 1 || tm.tm_mon > 12 || tm.tm_mday < 1 ||
        tm.tm_mday > 31 || tm.tm_hour > 23 || tm.tm_min > 59 || tm.tm_sec > 60)
        return -1;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    const char *zone = s + used;
    if (!*zone) {
        tm.tm_isdst = -1;
        time_t t = mktime(&tm);
        *out = (int64_t)t;
        return t == (time_t)-1 ? -1 : 0;
    }
    int64_t offset = 0;
    if (strcmp(zone, "Z")) {
        int hh, mm, n = 0;
        if ((zone[0] != '+' && zone[0] != '-') ||
            sscanf(zone + 1, "%2d:%2d%n", &hh, &mm, &n) != 2 || zone[1 + n] || hh > 23 || mm > 59)
            return -1;
        offset = (zone[0] == '-' ? -1 : 1) * (int64_t)(hh * 3600 + mm * 60);
    }
    *out = (int64_t)timegm(&tm) - offset;
    return 0;
}

int splash_cmd_template(int argc, char **argv)
{
    const char *model_dir = NULL, *template_path = NULL, *request_path = NULL;
    bool probe = false;
    struct splash_jinja_render_opts render = {0};
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--model-dir") == 0 && i + 1 < argc)
            model_dir = argv[++i];
        else if (strcmp(argv[i], "--template") == 0 && i + 1 < argc)
            template_path = argv[++i];
        else if (strcmp(argv[i], "--request") == 0 && i + 1 < argc)
            request_path = argv[++i];
        else if (strcmp(argv[i], "--probe") == 0)
            probe = true;
        else if (strcmp(argv[i], "--now") == 0 && i + 1 < argc) {
            if (parse_now(argv[++i], &render.now) != 0) {
                fprintf(stderr, "splash template: --now %s is not YYYY-MM-DDTHH:MM:SS[Z|+HH:MM]\n",
                        argv[i]);
                return 2;
            }
        }
        else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "splash template: unknown argument %s\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    if (!model_dir == !template_path || (!request_path && !probe)) {
        usage(stderr);
        return 2;
    }
    int rc = 1;
    json_t *special = json_object();
    json_t *request = NULL;
    char why[512] = "";
    size_t len = 0;
    char *src = NULL;
    if (template_path) {
        src = read_file(template_path, &len);
        if (!src)
            snprintf(why, sizeof why, "%s: cannot read the file", template_path);
    } else {
        src = template_from_model_dir(model_dir, special, why, sizeof why);
        len = src ? strlen(src) : 0;
    }
    if (!src) {
        fprintf(stderr, "splash template: %s\n", why);
        goto out_free_special;
    }
    if (request_path) {
        json_error_t jerr;
        request = json_load_file(request_path, 0, &jerr);
        if (!json_is_object(request)) {
            fprintf(stderr, "splash template: %s: line %d: %s\n", request_path, jerr.line,
                    request ? "not a JSON object" : jerr.text);
            goto out_free_src;
        }
    }
    if (probe) {
        struct splash_jinja_template *use = NULL;
        struct splash_later_system_probe p;
        struct splash_err err = {{0}};
        if (splash_template_probe_later_system(src, len, special, &use, &p, &err) != SPLASH_OK) {
            fprintf(stderr, "splash template: %s\n", err.msg);
            goto out_free_request;
        }
        char line[700];
        splash_later_system_describe(&p, template_path ? template_path : model_dir, line,
                                     sizeof line);
        printf("%s\n", line);
        splash_jinja_free(use);
        rc = 0;
        goto out_free_request;
    }
    struct splash_jinja_template *t = NULL;
    struct splash_err perr = {{0}};
    if (splash_jinja_parse(src, len, &t, &perr) != SPLASH_OK) {
        fprintf(stderr, "splash template: %s\n", perr.msg);
        goto out_free_request;
    }
    /* the variables transformers passes: with a bare --template, special tokens such as
     * bos_token come from the request's kwargs */
    json_t *vars = json_object();
    json_object_set(vars, "messages", json_object_get(request, "messages"));
    json_t *tools = json_object_get(request, "tools");
    json_object_set_new(vars, "tools", tools ? json_incref(tools) : json_null());
    json_object_set_new(vars, "documents", json_null());
    json_t *agp = json_object_get(request, "add_generation_prompt");
    json_object_set_new(vars, "add_generation_prompt", agp ? json_incref(agp) : json_false());
    json_object_update(vars, special);
    json_t *kwargs = json_object_get(request, "kwargs");
    if (json_is_object(kwargs))
        json_object_update(vars, kwargs);
    char *out = NULL;
    size_t out_len = 0;
    struct splash_err rerr;
    char message[2048]; /* raise_exception's text whole, as Jinja2 prints it */
    render.message = message;
    render.message_size = sizeof message;
    if (splash_jinja_render(t, vars, &render, &out, &out_len, &rerr) != SPLASH_OK) {
        fprintf(stderr, "%s\n", message);
    } else {
        rc = fwrite(out, 1, out_len, stdout) == out_len && fflush(stdout) == 0 ? 0 : 1;
    }
    free(out);
    json_decref(vars);
    splash_jinja_free(t);
out_free_request:
    json_decref(request);
out_free_src:
    free(src);
out_free_special:
    json_decref(special);
    return rc;
}
