/* splash opencode: OpenCode through Chat Completions, its provider given in
 * OPENCODE_CONFIG_CONTENT at launch (merged into any the environment already holds); nothing
 * is written. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli/agent_launch.h"
#include "cli/agents.h"

int splash_cmd_opencode(int argc, char **argv)
{
    static const struct splash_agent a = {"opencode", "opencode", "OpenCode",
                                          "npm install -g opencode-ai"};
    struct splash_agent_server s;
    int rc = splash_agent_prepare(&a, argc, argv, &s);
    if (rc)
        return rc;
    json_t *config = json_object();
    const char *given = getenv("OPENCODE_CONFIG_CONTENT");
    if (given && *given) {
        json_error_t jerr;
        json_decref(config);
        config = json_loads(given, 0, &jerr);
        if (!json_is_object(config)) {
            fprintf(stderr, "splash opencode: OPENCODE_CONFIG_CONTENT is not a JSON object: %s\n",
                    config ? "another JSON value" : jerr.text);
            if (config)
                json_decref(config);
            return 1;
        }
    }
    /* OpenCode reserves the output limit out of the context it compacts at */
    int64_t output = s.lock.context < 131072 ? s.lock.context / 4 : SPLASH_CLIENT_RESPONSE_TOKENS;
    char url[400], model[600];
    snprintf(url, sizeof url, "%s/v1", s.base_url);
    snprintf(model, sizeof model, "splash/%s", s.lock.model);
    json_t *options = json_pack("{s:s}", "baseURL", url);
    if (s.key) /* OpenCode reads the key from the variable itself */
        json_object_set_new(options, "apiKey", json_string("{env:SPLASH_API_KEY}"));
    json_t *models = json_object();
    json_object_set_new(models, s.lock.model,
                        json_pack("{s:s, s:b, s:{s:I, s:I}}", "name", s.lock.model, "tool_call", 1,
                                  "limit", "context", (json_int_t)s.lock.context, "output",
                                  (json_int_t)output));
    json_t *provider = json_object_get(config, "provider");
    if (!json_is_object(provider)) {
        provider = json_object();
        json_object_set_new(config, "provider", provider);
    }
    json_object_set_new(provider, "splash",
                        json_pack("{s:s, s:s, s:o, s:o}", "npm", "@ai-sdk/openai-compatible",
                                  "name", "Splash", "options", options, "models", models));
    json_object_set_new(config, "model", json_string(model));
    json_object_set_new(config, "small_model", json_string(model));
    char *text = json_dumps(config, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(config);
    if (!text || splash_agent_setenv("OPENCODE_CONFIG_CONTENT", text)) {
        free(text);
        return 1;
    }
    free(text);
    return splash_agent_exec(&a, &s, NULL);
}
