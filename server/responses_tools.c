/* Responses tools: namespaces flattened, hosted tools left out, names mapped both ways. */
#include "server/responses_tools.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/console.h"
#include "server/schema_shape.h"

/* Tools OpenAI's servers run themselves (or whose calls are item types of their own): a local
 * server has nothing to run them with, and a client such as Codex offers them by default. */
static const char *const hosted[] = {
    "web_search",  "web_search_preview", "web_search_preview_2025_03_11", "web_search_2025_08_26",
    "file_search", "code_interpreter",   "computer",                      "computer_use",
    "computer_use_preview", "mcp",       "image_generation",              "local_shell",
    "shell",       "apply_patch",        "tool_search",
};
#define N_HOSTED (sizeof hosted / sizeof hosted[0])

static int hosted_index(const char *type)
{
    for (size_t i = 0; i < N_HOSTED; i++)
        if (!strcmp(type, hosted[i]))
            return (int)i;
    return -1;
}

/* One console note per hosted type while the server runs: a client sends them every turn. */
static void note_dropped(int index)
{
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    static unsigned char noted[N_HOSTED];
    pthread_mutex_lock(&lock);
    int first = !noted[index];
    noted[index] = 1;
    pthread_mutex_unlock(&lock);
    if (first)
        splash_console_line(SPLASH_CONSOLE_OUT,
                            "Note · Responses tool %s left out: this server cannot run hosted "
                            "tools; the model sees the function tools (said once per type)",
                            hosted[index]);
}

/* A function tool's fields, checked where the client wrote them (where: "tools[2]"). */
static int check_function(const json_t *t, const char *where, char *msg, size_t size)
{
    json_t *name = json_object_get(t, "name"), *desc = json_object_get(t, "description");
    json_t *params = json_object_get(t, "parameters");
    if (!json_is_string(name) || !json_string_length(name)) {
        snprintf(msg, size, "%s.name must be a non-empty string", where);
        return -1;
    }
    if (desc && !json_is_null(desc) && !json_is_string(desc)) {
        snprintf(msg, size, "%s.description must be a string", where);
        return -1;
    }
    if (params && !json_is_null(params) && !json_is_object(params)) {
        snprintf(msg, size, "%s.parameters must be an object", where);
        return -1;
    }
    char path[128];
    snprintf(path, sizeof path, "%s.parameters", where);
    if (json_is_object(params) && splash_schema_shape_check(params, path, msg, size))
        return -1;
    return 0;
}

static void count_name(json_t *counts, const json_t *name)
{
    if (!json_is_string(name))
        return;
    const char *n = json_string_value(name);
    json_object_set_new(counts, n, json_integer(json_integer_value(json_object_get(counts, n)) + 1));
}

/* Checks a namespace and adds its function tools to out under the names the model sees. */
static int add_namespace(struct splash_responses_tools *t, const json_t *ns, size_t i,
                         const json_t *counts, char *msg, size_t size)
{
    json_t *name = json_object_get(ns, "name"), *members = json_object_get(ns, "tools");
    json_t *ns_desc = json_object_get(ns, "description");
    if (!json_is_string(name) || !json_string_length(name)) {
        snprintf(msg, size, "tools[%zu].name must be a non-empty string (the namespace)", i);
        return -1;
    }
    if (!json_is_array(members)) {
        snprintf(msg, size, "tools[%zu].tools must be an array", i);
        return -1;
    }
    for (size_t j = 0; j < json_array_size(members); j++) {
        json_t *m = json_array_get(members, j);
        const char *type = json_string_value(json_object_get(m, "type"));
        json_t *inner = json_object_get(m, "name");
        if (!type || strcmp(type, "function")) {
            snprintf(msg, size, "tools[%zu].tools[%zu].type %s is not supported: only function "
                                "tools are",
                     i, j, type ? type : "(missing)");
            return -1;
        }
        char where[48];
        snprintf(where, sizeof where, "tools[%zu].tools[%zu]", i, j);
        if (check_function(m, where, msg, size))
            return -1;
        /* the tool's own name where no other tool has it, else qualified by its namespace */
        char model_name[512];
        const char *in = json_string_value(inner);
        if (json_integer_value(json_object_get(counts, in)) > 1)
            snprintf(model_name, sizeof model_name, "%s.%s", json_string_value(name), in);
        else
            snprintf(model_name, sizeof model_name, "%s", in);
        if (json_object_get(t->to_client, model_name)) {
            snprintf(msg, size, "tools[%zu].tools[%zu]: %s is offered twice", i, j, model_name);
            return -1;
        }
        json_t *fn = json_deep_copy(m);
        json_object_set_new(fn, "name", json_string(model_name));
        json_object_del(fn, "defer_loading");
        /* the namespace's description tells the model what the group is for */
        json_t *desc = json_object_get(m, "description");
        if (json_is_string(ns_desc) && json_string_length(ns_desc)) {
            char *joined = NULL;
            if (asprintf(&joined, "%s%s(%s: %s)", json_is_string(desc) ? json_string_value(desc) : "",
                         json_is_string(desc) && json_string_length(desc) ? "\n\n" : "",
                         json_string_value(name), json_string_value(ns_desc)) >= 0) {
                json_object_set_new(fn, "description", json_string(joined));
                free(joined);
            }
        }
        json_array_append_new(t->flat, fn);
        json_object_set_new(t->to_client, model_name,
                            json_pack("{s:O, s:O}", "name", inner, "namespace", name));
        char key[1024];
        snprintf(key, sizeof key, "%s\n%s", json_string_value(name), in);
        json_object_set_new(t->to_model, key, json_string(model_name));
    }
    return 0;
}

int splash_responses_tools_read(const json_t *tools, struct splash_responses_tools *out,
                                char *msg, size_t msg_size)
{
    out->flat = json_array();
    out->to_client = json_object();
    out->to_model = json_object();
    if (!tools || json_is_null(tools))
        return 0;
    if (!json_is_array(tools)) {
        snprintf(msg, msg_size, "tools must be an array");
        goto fail;
    }
    /* how many tools have each name, to qualify a namespaced name that collides */
    json_t *counts = json_object();
    for (size_t i = 0; i < json_array_size(tools); i++) {
        json_t *t = json_array_get(tools, i);
        const char *type = json_string_value(json_object_get(t, "type"));
        if (type && !strcmp(type, "function"))
            count_name(counts, json_object_get(t, "name"));
        if (type && !strcmp(type, "namespace"))
            for (size_t j = 0; j < json_array_size(json_object_get(t, "tools")); j++)
                count_name(counts, json_object_get(json_array_get(json_object_get(t, "tools"), j),
                                                   "name"));
    }
    for (size_t i = 0; i < json_array_size(tools); i++) {
        json_t *t = json_array_get(tools, i);
        const char *type = json_string_value(json_object_get(t, "type"));
        if (!json_is_object(t) || !type) {
            snprintf(msg, msg_size, "tools[%zu].type must be a string", i);
            json_decref(counts);
            goto fail;
        }
        if (!strcmp(type, "function")) {
            char where[32];
            snprintf(where, sizeof where, "tools[%zu]", i);
            if (check_function(t, where, msg, msg_size)) {
                json_decref(counts);
                goto fail;
            }
            json_array_append(out->flat, t);
        } else if (!strcmp(type, "namespace")) {
            if (add_namespace(out, t, i, counts, msg, msg_size)) {
                json_decref(counts);
                goto fail;
            }
        } else if (hosted_index(type) >= 0) {
            note_dropped(hosted_index(type));
        } else {
            snprintf(msg, msg_size,
                     "tools[%zu].type %s is not supported: only function tools (alone or in a "
                     "namespace) are",
                     i, type);
            json_decref(counts);
            goto fail;
        }
    }
    json_decref(counts);
    return 0;
fail:
    splash_responses_tools_free(out);
    return -1;
}

void splash_responses_tools_free(struct splash_responses_tools *t)
{
    if (t->flat)
        json_decref(t->flat);
    if (t->to_client)
        json_decref(t->to_client);
    if (t->to_model)
        json_decref(t->to_model);
    t->flat = t->to_client = t->to_model = NULL;
}

const char *splash_responses_tools_model_name(const struct splash_responses_tools *t,
                                              const char *name, const char *ns)
{
    if (!ns || !*ns)
        return name;
    char key[1024];
    snprintf(key, sizeof key, "%s\n%s", ns, name);
    const char *m = json_string_value(json_object_get(t->to_model, key));
    return m ? m : name;
}

void splash_responses_tools_name_call(const json_t *to_client, json_t *item,
                                      const char *model_name, size_t len)
{
    char name[512];
    snprintf(name, sizeof name, "%.*s", (int)(len < sizeof name ? len : sizeof name - 1),
             model_name ? model_name : "");
    json_t *client = to_client ? json_object_get(to_client, name) : NULL;
    if (client) {
        json_object_set(item, "name", json_object_get(client, "name"));
        json_object_set(item, "namespace", json_object_get(client, "namespace"));
    } else {
        json_object_set_new(item, "name", json_stringn(model_name ? model_name : "", len));
    }
}
