/* splash pi: Pi through Chat Completions. Adds (or replaces) a splash provider in Pi's
 * models.json, ~/.pi/agent or PI_CODING_AGENT_DIR (splash-<port> for a server off port 8000),
 * keeping the other providers and settings, then runs pi with that provider and model. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/agent_file.h"
#include "cli/agent_launch.h"
#include "cli/agents.h"

static int models_path(char *out, size_t size)
{
    const char *dir = getenv("PI_CODING_AGENT_DIR");
    const char *home = getenv("HOME");
    int n;
    if (dir && *dir)
        n = snprintf(out, size, "%s/models.json", dir);
    else if (home && home[0] == '/')
        n = snprintf(out, size, "%s/.pi/agent/models.json", home);
    else
        return -1;
    return n < 0 || (size_t)n >= size ? -1 : 0;
}

/* Pi's subcommands take no model: only a session gets the provider. */
static int is_subcommand(const char *arg)
{
    static const char *const subs[] = {"install", "remove", "uninstall", "update", "list", "config"};
    for (size_t i = 0; arg && i < sizeof subs / sizeof subs[0]; i++)
        if (!strcmp(arg, subs[i]))
            return 1;
    return 0;
}

int splash_cmd_pi(int argc, char **argv)
{
    static const struct splash_agent a = {"pi", "pi", "Pi",
                                          "npm install -g @mariozechner/pi-coding-agent"};
    struct splash_agent_server s;
    int rc = splash_agent_prepare(&a, argc, argv, &s);
    if (rc)
        return rc;
    char path[4096], msg[4200];
    if (models_path(path, sizeof path)) {
        fprintf(stderr, "splash pi: neither PI_CODING_AGENT_DIR nor HOME names Pi's directory\n");
        return 1;
    }
    struct splash_agent_file f;
    if (splash_agent_file_read(path, &f, msg, sizeof msg)) {
        fprintf(stderr, "splash pi: %s\n", msg);
        return 1;
    }
    json_t *doc = json_object();
    if (f.exists && f.len) {
        json_error_t jerr;
        json_decref(doc);
        doc = json_loads(f.text, 0, &jerr);
        if (!json_is_object(doc)) {
            fprintf(stderr, "splash pi: %s: not a JSON object (%s); fix or move it, and run "
                            "splash pi again\n",
                    f.path, doc ? "another JSON value" : jerr.text);
            if (doc)
                json_decref(doc);
            splash_agent_file_free(&f);
            return 1;
        }
    }
    json_t *providers = json_object_get(doc, "providers");
    if (!json_is_object(providers)) {
        providers = json_object();
        json_object_set_new(doc, "providers", providers);
    }
    char name[32], url[400];
    if (s.port == 8000)
        snprintf(name, sizeof name, "splash");
    else
        snprintf(name, sizeof name, "splash-%d", s.port);
    snprintf(url, sizeof url, "%s/v1", s.base_url);
    json_t *model = json_pack("{s:s, s:s, s:b, s:[s], s:I, s:i}", "id", s.lock.model, "name",
                              s.lock.model, "reasoning", s.lock.reasoning, "input", "text",
                              "contextWindow", (json_int_t)s.lock.context, "maxTokens",
                              SPLASH_CLIENT_RESPONSE_TOKENS);
    /* Pi takes apiKey for the name of a variable to read, so the key stays out of the file */
    json_object_set_new(providers, name,
                        json_pack("{s:s, s:s, s:s, s:[o]}", "baseUrl", url, "api",
                                  "openai-completions", "apiKey",
                                  s.key ? "SPLASH_API_KEY" : "splash-no-key", "models", model));
    char *text = json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(doc);
    if (!text) {
        splash_agent_file_free(&f);
        return 1;
    }
    size_t len = strlen(text);
    char *with_newline = realloc(text, len + 2);
    if (with_newline) {
        text = with_newline;
        memcpy(text + len, "\n", 2);
    }
    rc = splash_agent_file_write(&f, text, msg, sizeof msg);
    free(text);
    splash_agent_file_free(&f);
    if (rc) {
        fprintf(stderr, "splash pi: %s\n", msg);
        return 1;
    }
    /* the user's own --provider or --model wins; subcommands take neither */
    int chooses = 0;
    for (int i = 0; i < s.n_args; i++)
        chooses |= !strcmp(s.args[i], "--provider") || !strcmp(s.args[i], "--model") ||
                   !strncmp(s.args[i], "--provider=", 11) || !strncmp(s.args[i], "--model=", 8);
    if (chooses || (s.n_args && is_subcommand(s.args[0])))
        return splash_agent_exec(&a, &s, NULL);
    char *extra[] = {"--provider", name, "--model", s.lock.model, NULL};
    return splash_agent_exec(&a, &s, extra);
}
