/* The Hugging Face environment variables, with huggingface_hub's defaults. */
#include "server/hub/env.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char *var(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

/* huggingface_hub's _is_true: "1", "ON", "YES" or "TRUE" in any case. */
static int is_true(const char *v)
{
    return v && (!strcmp(v, "1") || !strcasecmp(v, "on") || !strcasecmp(v, "yes") ||
                 !strcasecmp(v, "true"));
}

/* "~/x" as os.path.expanduser reads it. */
static int expand(const char *in, char *out, size_t size)
{
    const char *home = getenv("HOME");
    int n;
    if (in[0] == '~' && (in[1] == '/' || !in[1]) && home)
        n = snprintf(out, size, "%s%s", home, in + 1);
    else
        n = snprintf(out, size, "%s", in);
    return n >= 0 && (size_t)n < size;
}

static void strip(char *s)
{
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1]))
        s[--n] = 0;
    size_t lead = strspn(s, " \t\r\n");
    memmove(s, s + lead, n - lead + 1);
}

enum splash_status splash_hub_env_read(struct splash_hub_env *env, struct splash_err *err)
{
    memset(env, 0, sizeof *env);
    const char *ep = var("HF_ENDPOINT");
    snprintf(env->endpoint, sizeof env->endpoint, "%s", ep ? ep : "https://huggingface.co");
    size_t n = strlen(env->endpoint);
    while (n && env->endpoint[n - 1] == '/')
        env->endpoint[--n] = 0;
    if (strncmp(env->endpoint, "http://", 7) && strncmp(env->endpoint, "https://", 8))
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "HF_ENDPOINT %.200s: not an http:// or https:// URL", env->endpoint);

    char home[PATH_MAX];
    const char *hf_home = var("HF_HOME");
    const char *xdg = var("XDG_CACHE_HOME");
    if (hf_home)
        snprintf(home, sizeof home, "%s", hf_home);
    else
        snprintf(home, sizeof home, "%s/huggingface", xdg ? xdg : "~/.cache");
    if (!expand(home, env->home, sizeof env->home))
        return splash_err_set(err, SPLASH_ERR_INVALID, "HF_HOME: path too long");
    const char *cache = var("HF_HUB_CACHE");
    if (!cache)
        cache = var("HUGGINGFACE_HUB_CACHE");
    char buf[PATH_MAX];
    if (cache)
        snprintf(buf, sizeof buf, "%s", cache);
    else if (snprintf(buf, sizeof buf, "%s/hub", env->home) >= (int)sizeof buf)
        return splash_err_set(err, SPLASH_ERR_INVALID, "HF_HOME: path too long");
    if (!expand(buf, env->cache, sizeof env->cache))
        return splash_err_set(err, SPLASH_ERR_INVALID, "HF_HUB_CACHE: path too long");
    if (env->cache[0] != '/')
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "HF_HUB_CACHE %.200s: not an absolute path (is HOME set?)",
                              env->cache);

    env->offline = is_true(var("HF_HUB_OFFLINE")) || is_true(var("TRANSFORMERS_OFFLINE"));

    const char *token = var("HF_TOKEN");
    if (!token)
        token = var("HUGGING_FACE_HUB_TOKEN");
    if (token) {
        snprintf(env->token, sizeof env->token, "%s", token);
    } else {
        char path[PATH_MAX];
        const char *tp = var("HF_TOKEN_PATH");
        if (tp ? !expand(tp, path, sizeof path)
               : snprintf(path, sizeof path, "%s/token", env->home) >= (int)sizeof path)
            return splash_err_set(err, SPLASH_ERR_INVALID, "HF_TOKEN_PATH: path too long");
        FILE *f = fopen(path, "r");
        if (f) {
            size_t got = fread(env->token, 1, sizeof env->token - 1, f);
            env->token[got] = 0;
            fclose(f);
        }
    }
    strip(env->token);
    for (const char *c = env->token; *c; c++)
        if ((unsigned char)*c < 0x21 || (unsigned char)*c > 0x7e)
            return splash_err_set(err, SPLASH_ERR_INVALID,
                                  "HF_TOKEN: holds a character a token cannot have");
    return SPLASH_OK;
}
