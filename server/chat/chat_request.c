/* System-message merging, history replay and template variables for chat requests. */
#include <stdlib.h>
#include <string.h>

#include "server/chat/chat_request.h"

/* The text of a content: a string, or its text parts joined. */
static void append_text(json_t *out_str_holder, const json_t *content)
{
    const char *prev = json_string_value(json_object_get(out_str_holder, "t"));
    size_t plen = prev ? strlen(prev) : 0;
    json_t *parts = json_array();
    if (json_is_string(content)) {
        json_array_append(parts, (json_t *)content);
    } else if (json_is_array(content)) {
        size_t i;
        const json_t *p;
        json_array_foreach(content, i, p) {
            const json_t *t = json_object_get(p, "text");
            if (json_is_string(t))
                json_array_append(parts, (json_t *)t);
        }
    }
    size_t add = 0, i;
    const json_t *p;
    json_array_foreach(parts, i, p)
        add += json_string_length(p);
    char *buf = malloc(plen + add + 3);
    if (buf) {
        size_t k = 0;
        if (plen) {
            memcpy(buf, prev, plen);
            k = plen;
            buf[k++] = '\n';
            buf[k++] = '\n';
        }
        json_array_foreach(parts, i, p) {
            memcpy(buf + k, json_string_value(p), json_string_length(p));
            k += json_string_length(p);
        }
        json_object_set_new(out_str_holder, "t", json_stringn(buf, k));
        free(buf);
    }
    json_decref(parts);
}

json_t *splash_chat_merge_leading_system(const json_t *messages)
{
    json_t *out = json_array();
    size_t i = 0, n = json_array_size(messages);
    json_t *holder = json_object();
    for (; i < n; i++) {
        const json_t *m = json_array_get(messages, i);
        const char *role = json_string_value(json_object_get(m, "role"));
        if (!role || (strcmp(role, "system") != 0 && strcmp(role, "developer") != 0))
            break;
        append_text(holder, json_object_get(m, "content"));
    }
    if (i > 0) {
        json_t *t = json_object_get(holder, "t");
        json_array_append_new(out, json_pack("{s:s,s:o}", "role", "system", "content",
                                             t ? json_incref(t) : json_string("")));
    }
    for (; i < n; i++)
        json_array_append(out, json_array_get(messages, i));
    json_decref(holder);
    return out;
}

json_t *splash_chat_replay_assistant(const json_t *items, const char *reasoning)
{
    json_t *holder = json_object();
    json_t *calls = json_array();
    size_t i;
    const json_t *it;
    json_array_foreach(items, i, it) {
        const char *type = json_string_value(json_object_get(it, "type"));
        if (!type)
            continue;
        if (strcmp(type, "text") == 0) {
            /* texts are joined as written, without a separator */
            const char *prev = json_string_value(json_object_get(holder, "t"));
            const json_t *t = json_object_get(it, "text");
            if (!json_is_string(t))
                continue;
            size_t plen = prev ? strlen(prev) : 0, tl = json_string_length(t);
            char *buf = malloc(plen + tl + 1);
            if (!buf)
                continue;
            if (plen)
                memcpy(buf, prev, plen);
            memcpy(buf + plen, json_string_value(t), tl);
            json_object_set_new(holder, "t", json_stringn(buf, plen + tl));
            free(buf);
        } else if (strcmp(type, "tool_call") == 0) {
            json_t *fn = json_pack("{s:O?,s:O?}", "name", json_object_get(it, "name"),
                                   "arguments", json_object_get(it, "arguments"));
            json_t *call = json_pack("{s:s,s:o}", "type", "function", "function", fn);
            if (json_object_get(it, "id"))
                json_object_set(call, "id", json_object_get(it, "id"));
            json_array_append_new(calls, call);
        }
    }
    json_t *t = json_object_get(holder, "t");
    json_t *msg = json_pack("{s:s,s:o}", "role", "assistant", "content",
                            t ? json_incref(t) : json_string(""));
    if (json_array_size(calls))
        json_object_set(msg, "tool_calls", calls);
    if (reasoning)
        json_object_set_new(msg, "reasoning_content", json_string(reasoning));
    json_decref(calls);
    json_decref(holder);
    return msg;
}

/* What Splash passes itself; chat_template_kwargs cannot set these. */
static const char *const reserved[] = {
    "messages", "tools", "add_generation_prompt", "documents", "bos_token", "eos_token",
    "pad_token", "unk_token", NULL,
};

enum splash_status splash_chat_template_vars(const struct splash_chat_vars_opts *o, json_t **out,
                                             struct splash_err *err)
{
    *out = NULL;
    const json_t *kw_thinking = json_object_get(o->kwargs, "enable_thinking");
    if (o->kwargs && !json_is_object(o->kwargs))
        return splash_err_set(err, SPLASH_ERR_INVALID, "chat_template_kwargs must be an object");
    for (size_t i = 0; reserved[i]; i++)
        if (json_object_get(o->kwargs, reserved[i]))
            return splash_err_set(err, SPLASH_ERR_INVALID, "chat_template_kwargs cannot set "
                                  "%s", reserved[i]);
    if (kw_thinking && !json_is_boolean(kw_thinking) && !json_is_null(kw_thinking))
        return splash_err_set(err, SPLASH_ERR_INVALID, "chat_template_kwargs.enable_thinking "
                              "must be a boolean");
    json_t *vars = json_object();
    json_object_set(vars, "messages", (json_t *)o->messages);
    json_object_set_new(vars, "tools", o->tools ? json_incref((json_t *)o->tools) : json_null());
    json_object_set_new(vars, "documents", json_null());
    json_object_set_new(vars, "add_generation_prompt", json_boolean(o->add_generation_prompt));
    if (o->special)
        json_object_update(vars, (json_t *)o->special);
    int effort = o->effort;
    /* enable_thinking in the kwargs outranks the effort */
    if (json_is_false(kw_thinking))
        effort = SPLASH_EFFORT_NONE;
    else if (json_is_true(kw_thinking) && (effort < 0 || effort == SPLASH_EFFORT_NONE))
        effort = o->report && o->report->default_effort >= 0 ? o->report->default_effort : -2;
    if (effort == -2) {
        /* thinking on at the template's own default effort */
        json_object_set_new(vars, "enable_thinking", json_true());
    } else if (effort >= 0 && effort < SPLASH_EFFORT_COUNT) {
        json_object_set_new(vars, "enable_thinking", json_boolean(effort != SPLASH_EFFORT_NONE));
        int as = o->report ? (int)o->report->render_as[effort] : effort;
        if (!(effort == SPLASH_EFFORT_NONE && o->report && o->report->none_by_switch_only))
            json_object_set_new(vars, "reasoning_effort",
                                json_string(splash_effort_name((enum splash_effort)as)));
    }
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)o->kwargs, key, v) {
        if (strcmp(key, "enable_thinking") == 0)
            continue; /* applied above, as an effort */
        json_object_set(vars, key, v);
    }
    *out = vars;
    return SPLASH_OK;
}
