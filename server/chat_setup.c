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
 * directory's chat_template.jinja / tokenizer_config.json. */
static enum splash_status template_of(const char *path, char **out, struct splash_err *err)
{
    struct stat sb;
    enum splash_status st;
    *out = NULL;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        if ((st = splash_st_chat_template(path, out, err)) != SPLASH_OK)
            return st;
        if (!*out)
            return splash_err_set(err, SPLASH_ERR_NOT_FOUND,
                                  "%s: the model has no chat template (chat_template.jinja or "
                                  "tokenizer_config.json's chat_template)", path);
        return SPLASH_OK;
    }
    struct splash_meta *m;
    if ((st = splash_meta_open_gguf(path, SPLASH_GGUF_HEADERS_ONLY, &m, err)) != SPLASH_OK)
        return st;
    const char *t = NULL;
    if (splash_meta_api_get()->get_str(m, "tokenizer.chat_template", &t, err) != SPLASH_OK)
        st = splash_err_set(err, SPLASH_ERR_NOT_FOUND,
                            "%s: the model has no chat template (tokenizer.chat_template)", path);
    else if (!(*out = strdup(t)))
        st = splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory");
    splash_meta_close(m);
    return st;
}

enum splash_status splash_chat_format_of_model(const struct splash_registry *r, const char *path,
                                               const struct splash_chat_format **format,
                                               struct splash_err *err)
{
    struct splash_meta *m;
    struct stat sb;
    enum splash_status st =
        stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)
            ? splash_st_target_open(r, path, SPLASH_ST_HEADERS_ONLY, &m, err)
            : splash_meta_open_gguf(path, SPLASH_GGUF_HEADERS_ONLY, &m, err);
    if (st)
        return st;
    const struct splash_family_plugin *family;
    struct splash_family_verdict verdict;
    st = splash_family_select(r, m, &family, &verdict, err);
    splash_meta_close(m);
    if (st)
        return st;
    if (!(*format = splash_chat_format_find(verdict.chat_format)))
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                              "%s: family %s names chat format %.16s, which this server does not "
                              "speak (qwen, flint, harmony)",
                              path, family->header.name, verdict.chat_format);
    return SPLASH_OK;
}

enum splash_status splash_chat_setup(struct splash_app *app, const char *path,
                                     const struct splash_chat_format *format,
                                     struct splash_err *err)
{
    enum splash_status st;
    if ((st = template_of(path, &app->template_text, err)) != SPLASH_OK)
        return st;
    app->format = format;
    struct splash_chat_format_ids ids;
    if ((st = splash_chat_format_check(app->format, tokenize_cb, app->tok, &ids, err)) != SPLASH_OK)
        return st;
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
    /* the tokens a grammar writes tool calls and think tags (harmony: its messages) with */
    struct splash_err gerr;
    {
        struct splash_grammar_format *gf = calloc(1, sizeof *gf);
        enum splash_grammar_call_syntax calls = app->format->calls == SPLASH_CALLS_GLM_ARGS
                                                    ? SPLASH_GRAMMAR_CALLS_GLM_ARGS
                                                : app->format->calls == SPLASH_CALLS_HARMONY
                                                    ? SPLASH_GRAMMAR_CALLS_HARMONY
                                                    : SPLASH_GRAMMAR_CALLS_QWEN_XML;
        if (!gf)
            return splash_err_set(err, SPLASH_ERR_NOMEM, "chat format %s: out of memory",
                                  app->format->name);
        if ((st = splash_grammar_format_init(gf, calls, app->tok, &gerr)) != SPLASH_OK) {
            free(gf);
            return splash_err_set(err, st, "chat format %s: %s", app->format->name, gerr.msg);
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
                                        64, err->msg, sizeof err->msg);
    if (n_end < 0)
        return SPLASH_ERR_INVALID;
    app->n_think_end = n_end;
    app->think_close_id = splash_tokenizer_find_special(app->tok, app->format->think_close);
    app->call_open_id = splash_tokenizer_find_special(app->tok, app->format->call_open);
    struct splash_later_system_probe probe;
    if ((st = splash_template_probe_later_system(app->template_text, strlen(app->template_text),
                                           app->special, &app->chat_template, &probe,
                                           &gerr)) != SPLASH_OK)
        return splash_err_set(err, st, "chat template: %s", gerr.msg);
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
                                      &gerr) == SPLASH_OK) {
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
    return SPLASH_OK;
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
