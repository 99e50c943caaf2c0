/* splash codex: Codex through the Responses API, configured by --config overrides at launch (a
 * model_providers entry naming SPLASH_API_KEY as its key's variable); nothing is written. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/agent_launch.h"
#include "cli/agents.h"

/* A TOML basic string of text: quotes, with " and \ and control characters escaped. */
static int toml_string(const char *text, char *out, size_t size)
{
    size_t o = 0;
    if (size < 3)
        return -1;
    out[o++] = '"';
    for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
        char esc[8];
        int n;
        if (*p == '"' || *p == '\\')
            n = snprintf(esc, sizeof esc, "\\%c", *p);
        else if (*p < 0x20 || *p == 0x7f)
            n = snprintf(esc, sizeof esc, "\\u%04x", *p);
        else
            n = snprintf(esc, sizeof esc, "%c", *p);
        if (o + (size_t)n + 2 > size)
            return -1;
        memcpy(out + o, esc, (size_t)n);
        o += (size_t)n;
    }
    out[o++] = '"';
    out[o] = 0;
    return 0;
}

int splash_cmd_codex(int argc, char **argv)
{
    static const struct splash_agent a = {"codex", "codex", "Codex", "npm install -g @openai/codex"};
    struct splash_agent_server s;
    int rc = splash_agent_prepare(&a, argc, argv, &s);
    if (rc)
        return rc;
    char model[1100], url[400];
    if (toml_string(s.lock.model, model, sizeof model) ||
        snprintf(url, sizeof url, "\"%s/v1\"", s.base_url) >= (int)sizeof url) {
        fprintf(stderr, "splash codex: the model ID is too long\n");
        return 1;
    }
    static char o_provider[] = "model_provider=\"splash\"";
    static char o_name[] = "model_providers.splash.name=\"Splash\"";
    static char o_wire[] = "model_providers.splash.wire_api=\"responses\"";
    static char o_key[] = "model_providers.splash.env_key=\"SPLASH_API_KEY\"";
    char o_url[480], o_model[1200], o_context[64];
    snprintf(o_url, sizeof o_url, "model_providers.splash.base_url=%s", url);
    snprintf(o_model, sizeof o_model, "model=%s", model);
    snprintf(o_context, sizeof o_context, "model_context_window=%lld", (long long)s.lock.context);
    char *extra[16];
    int n = 0;
    char *const overrides[] = {o_provider, o_name, o_url, o_wire, o_model, o_context,
                               s.key ? o_key : NULL};
    for (size_t i = 0; i < sizeof overrides / sizeof overrides[0]; i++) {
        if (!overrides[i])
            continue;
        extra[n++] = "-c";
        extra[n++] = overrides[i];
    }
    extra[n] = NULL;
    return splash_agent_exec(&a, &s, extra);
}
