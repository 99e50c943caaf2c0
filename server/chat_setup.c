/* Startup probes of the chat template (models.md "Tokenizer and chat templates"). */
#include "server/chat_setup.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "server/text/grammar/grammar.h"
#include "core/family.h"
#include "core/meta.h"
#include "core/registry.h"
#include "core/st_target.h"
#include "server/text/tokenizer/tokenizer.h"
#include "server/chat/chat_format.h"
#include "server/chat/jinja.h"
#include "server/chat/template_probe.h"
#include "server/console.h"
#include "server/think_budget.h"

static int tokenize_cb(void *user, const char *text, size_t len, int32_t *ids, size_t max)
{
    struct splash_token_buf buf = {0};
    struct splash_err err;
    if (splash_tokenizer_encode(user, text, len, SPLASH_TOKENIZE_PARSE_SPECIAL, &buf, &err))
        return -1;
    size_t n = buf.n < max ? buf.n : max;
    memcpy(ids, buf.ids, n * sizeof *ids);
    int count = (int)buf.n;
    splash_token_buf_free(&buf);
    return count;
}

static json_t *special_tokens(const struct splash_tokenizer *tok)
{
    json_t *s = json_object();
    size_t len;
    int32_t bos = splash_tokenizer_bos(tok), eos = splash_tokenizer_eos(tok);
    const char *p;
    if (bos >= 0 && (p = splash_tokenizer_piece(tok, bos, SPLASH_DETOK_SPECIAL, &len)))
        json_object_set_new(s, "bos_token", json_stringn(p, len));
    if (eos >= 0 && (p = splash_tokenizer_piece(tok, eos, SPLASH_DETOK_SPECIAL, &len)))
        json_object_set_new(s, "eos_token", json_stringn(p, len));
    return s;
}

/* The model's chat template (malloc'ed): a GGUF's tokenizer.chat_template, or a checkpoint
 * directory's chat_template.jinja / tokenizer_config.json. NULL with msg when none. */
static char *template_of(const char *path, char *msg, size_t size)
{
    struct splash_err err;
    struct stat sb;
    char *text = NULL;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        if (splash_st_chat_template(path, &text, &err) != SPLASH_OK)
            snprintf(msg, size, "%s", err.msg);
        else if (!text)
            snprintf(msg, size, "%s: the model has no chat template (chat_template.jinja or "
                                "tokenizer_config.json's chat_template)", path);
        return text;
    }
    struct splash_meta *m;
    if (splash_meta_open_gguf(path, SPLASH_GGUF_HEADERS_ONLY, &m, &err) != SPLASH_OK) {
        snprintf(msg, size, "%s", err.msg);
        return NULL;
    }
    const char *t = NULL;
    if (splash_meta_api_get()->get_str(m, "tokenizer.chat_template", &t, &err) != SPLASH_OK)
        snprintf(msg, size, "%s: the model has no chat template (tokenizer.chat_template)", path);
    else if (!(text = strdup(t)))
        snprintf(msg, size, "out of memory");
    splash_meta_close(m);
    return text;
}

/* The chat format the model's family names (models.md "Chat formats"). */
static const struct splash_chat_format *format_of(const char *path, char *msg, size_t size)
{
    struct splash_err err;
    struct splash_meta *m;
    struct stat sb;
    enum splash_status st =
        stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)
            ? splash_st_target_open(splash_registry_global(), path, SPLASH_ST_HEADERS_ONLY, &m,
                                    &err)
            : splash_meta_open_gguf(path, SPLASH_GGUF_HEADERS_ONLY, &m, &err);
    if (st) {
        snprintf(msg, size, "%s", err.msg);
        return NULL;
    }
    const struct splash_family_plugin *family;
    struct splash_family_verdict verdict;
    st = splash_family_select(splash_registry_global(), m, &family, &verdict, &err);
    splash_meta_close(m);
    if (st) {
        snprintf(msg, size, "%s", err.msg);
        return NULL;
    }
    const struct splash_chat_format *f = splash_chat_format_find(verdict.chat_format);
    if (!f)
        snprintf(msg, size, "%s: family %s names chat format %.16s, which this server does not "
                            "speak (qwen, flint, harmony)",
                 path, family->header.name, verdict.chat_format);
    return f;
}

int splash_chat_setup(struct splash_app *app, const char *path, char *msg, size_t size)
{
    struct splash_err err;
    if (!(app->template_text = template_of(path, msg, size)))
        return -1;
    if (!(app->format = format_of(path, msg, size)))
        return -1;
    struct splash_chat_format_ids ids;
    if (splash_chat_format_check(app->format, tokenize_cb, app->tok, &ids, &err) != SPLASH_OK) {
        snprintf(msg, size, "%s", err.msg);
        return -1;
    }
    app->reuse_token = ids.cache_reuse_after;
    app->n_stop_ids = 0;
    for (int i = 0; app->format->stops[i] && app->n_stop_ids < 8; i++)
        if (ids.stops[i] >= 0)
            app->stop_ids[app->n_stop_ids++] = ids.stops[i];
    app->special = special_tokens(app->tok);
    for (size_t id = 0; id < splash_tokenizer_n_tokens(app->tok); id++) {
        size_t n = 0;
        splash_tokenizer_piece(app->tok, (int32_t)id, SPLASH_DETOK_SPECIAL, &n);
        if (n > app->max_token_bytes)
            app->max_token_bytes = n;
    }
    /* the tokens a grammar writes tool calls and think tags with; the grammars write no
     * harmony (api_grammar.c refuses constrained output there) */
    if (app->format->calls != SPLASH_CALLS_HARMONY) {
        struct splash_grammar_format *gf = calloc(1, sizeof *gf);
        enum splash_grammar_call_syntax calls = app->format->calls == SPLASH_CALLS_GLM_ARGS
                                                    ? SPLASH_GRAMMAR_CALLS_GLM_ARGS
                                                    : SPLASH_GRAMMAR_CALLS_QWEN_XML;
        if (!gf || splash_grammar_format_init(gf, calls, app->tok, &err) != SPLASH_OK) {
            snprintf(msg, size, "chat format %s: %s", app->format->name,
                     gf ? err.msg : "out of memory");
            free(gf);
            return -1;
        }
        app->grammar_format = gf;
    }
    /* the thinking end: --thinking-end-text, else the close the template writes after a
     * reasoning (a line break then </think> for Qwen's, </think> alone for Flint's) */
    char default_end[32];
    snprintf(default_end, sizeof default_end, "%s%s", app->format->model_opens_think ? "" : "\n",
             app->format->think_close);
    const char *end_text = app->opts->thinking_end_text ? app->opts->thinking_end_text : default_end;
    int n_end = splash_think_end_tokens(app->tok, end_text, app->format->think_close, app->think_end,
                                        64, msg, size);
    if (n_end < 0)
        return -1;
    app->n_think_end = n_end;
    app->think_close_id = splash_tokenizer_find_special(app->tok, app->format->think_close);
    app->call_open_id = splash_tokenizer_find_special(app->tok, app->format->call_open);
    struct splash_later_system_probe probe;
    if (splash_template_probe_later_system(app->template_text, strlen(app->template_text),
                                           app->special, &app->chat_template, &probe,
                                           &err) != SPLASH_OK) {
        snprintf(msg, size, "chat template: %s", err.msg);
        return -1;
    }
    app->later_system = (int)probe.outcome;
    char line[512];
    splash_later_system_describe(&probe, "default", line, sizeof line);
    splash_console_line(SPLASH_CONSOLE_OUT, "%s", line);
    struct splash_effort_report report;
    /* a model that opens its reasoning itself decides whether to reason, whatever the
     * effort; harmony's model always reasons, and the effort reaches it as the template's
     * "Reasoning:" line, which the probe reports */
    bool model_decides =
        app->format->model_opens_think && app->format->calls != SPLASH_CALLS_HARMONY;
    if (splash_template_probe_efforts(app->chat_template, app->special, model_decides, &report,
                                      &err) == SPLASH_OK) {
        app->thinks_by_default = report.thinks;
        app->default_effort = report.default_effort;
        int override = -1;
        enum splash_effort e;
        if (app->opts->default_reasoning_effort &&
            splash_effort_parse(app->opts->default_reasoning_effort, &e))
            override = (int)e;
        app->reasoning = splash_effort_report_json(&report, override);
        app->effort_report = malloc(sizeof report);
        if (app->effort_report)
            memcpy(app->effort_report, &report, sizeof report);
        if (override >= 0)
            app->default_effort = override;
    } else {
        app->thinks_by_default = -1;
        app->default_effort = -1;
        app->reasoning = json_pack("{s:n, s:[], s:n}", "thinks", "efforts", "default");
    }
    return 0;
}

void splash_chat_teardown(struct splash_app *app)
{
    splash_jinja_free(app->chat_template);
    free(app->template_text);
    if (app->special)
        json_decref(app->special);
    if (app->reasoning)
        json_decref(app->reasoning);
    free(app->effort_report);
    free(app->grammar_format);
}
