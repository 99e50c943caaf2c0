/* libFuzzer target: the Jinja parser and renderer on arbitrary template text, rendered with a
 * conversation and tools under tight sandbox bounds. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <jansson.h>

#include "server/chat/jinja.h"

static json_t *vars;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!vars)
        vars = json_loads(
            "{\"messages\":[{\"role\":\"system\",\"content\":\"sys\"},"
            "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"hi\"},"
            "{\"type\":\"image\"}]},{\"role\":\"assistant\",\"content\":null,"
            "\"reasoning_content\":\"r\",\"tool_calls\":[{\"type\":\"function\",\"function\":"
            "{\"name\":\"f\",\"arguments\":{\"a\":1,\"b\":[1.5,true,null],\"c\":\"x\"}}}]},"
            "{\"role\":\"tool\",\"content\":\"ok\"}],\"tools\":[{\"type\":\"function\","
            "\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\",\"properties\":"
            "{\"a\":{\"type\":\"integer\"}}}}}],\"add_generation_prompt\":true,"
            "\"enable_thinking\":false,\"bos_token\":\"<s>\",\"eos_token\":\"</s>\"}",
            0, NULL);
    struct splash_jinja_template *t = NULL;
    if (splash_jinja_parse((const char *)data, size, &t, NULL) != SPLASH_OK)
        return 0;
    struct splash_jinja_limits lim = {.max_output = 1 << 20, .max_memory = 16 << 20,
                                      .max_steps = 20000, .max_depth = 40};
    struct splash_jinja_render_opts opts = {.limits = &lim, .now = 1768478400};
    char *out = NULL;
    struct splash_err err;
    splash_jinja_render(t, vars, &opts, &out, NULL, &err);
    free(out);
    splash_jinja_free(t);
    return 0;
}
