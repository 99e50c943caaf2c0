/* Generation plumbing for the Messages and Responses adapters. */
#include "server/api_run.h"

#include "server/chat/chat_format.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Names the stop sequence that matched. At a match the filter released the text before `cut`
 * and still holds, NUL-terminated, the text from where the match begins. */
static const char *matched_stop(const struct splash_stop_filter *f, size_t cut)
{
    const char *best = NULL;
    for (int i = 0; f->held && i < f->n_stops; i++) {
        size_t n = strlen(f->stops[i]);
        if (!strncmp(f->held + cut, f->stops[i], n) && (!best || n > strlen(best)))
            best = f->stops[i];
    }
    return best ? best : (f->n_stops ? f->stops[0] : NULL);
}

static void deliver(struct splash_api_run *r, const struct splash_chat_delta *d)
{
    splash_chat_result_add(&r->result, d);
    if (r->fn)
        r->fn(r->user, d);
}

static void deliver_text(struct splash_api_run *r, const char *text, size_t len)
{
    if (!len)
        return;
    struct splash_chat_delta d = {SPLASH_DELTA_CONTENT, 0, text, len};
    deliver(r, &d);
}

/* Text still held for a possible stop sequence goes out before anything that is not text. */
static void release_held(struct splash_api_run *r)
{
    if (!r->stops.n_stops || !r->stops.n_held)
        return;
    char *out = NULL;
    size_t n = 0;
    splash_stop_filter_flush(&r->stops, &out, &n);
    deliver_text(r, out, n);
    free(out);
}

static void on_delta(void *user, const struct splash_chat_delta *d)
{
    struct splash_api_run *r = user;
    if (r->stop_matched)
        return; /* everything after a stop sequence is dropped */
    r->in_reasoning = d->kind == SPLASH_DELTA_REASONING;
    if (d->kind != SPLASH_DELTA_CONTENT || !r->stops.n_stops) {
        if (d->kind != SPLASH_DELTA_CONTENT)
            release_held(r);
        deliver(r, d);
        return;
    }
    char *out = NULL;
    size_t n = 0;
    if (splash_stop_filter_feed(&r->stops, d->text, d->len, &out, &n))
        r->stop_matched = matched_stop(&r->stops, n);
    deliver_text(r, out, n);
    free(out);
}

int splash_api_check_stops(const json_t *stops, const char *field, char *msg, size_t msg_size)
{
    if (!stops || json_is_null(stops))
        return 0;
    if (!json_is_array(stops) || json_array_size(stops) > SPLASH_MAX_STOPS) {
        snprintf(msg, msg_size, "%s must be an array of at most %d strings", field,
                 SPLASH_MAX_STOPS);
        return -1;
    }
    for (size_t i = 0; i < json_array_size(stops); i++) {
        if (!json_is_string(json_array_get(stops, i))) {
            snprintf(msg, msg_size, "%s[%zu] must be a string", field, i);
            return -1;
        }
    }
    return 0;
}

int splash_api_run_init(struct splash_api_run *r, struct splash_app *app,
                        const struct splash_api_prompt *p, const json_t *tools, const json_t *stops,
                        splash_chat_delta_fn fn, void *user)
{
    memset(r, 0, sizeof *r);
    r->app = app;
    r->fn = fn;
    r->user = user;
    r->in_reasoning = p->prompt.thinks;
    char msg[128];
    if (splash_stop_filter_init(&r->stops, stops, msg, sizeof msg))
        return -1;
    /* the parser reads the tools' schemas while the output streams, after the request's body
     * is gone: it keeps its own reference */
    r->tools = tools ? json_deep_copy(tools) : NULL;
    struct splash_chat_parser_opts po = {
        .format = app->format, .starts_in_reasoning = p->prompt.thinks, .tools = r->tools};
    r->parser = splash_chat_parser_create(&po);
    if (!r->parser) {
        splash_api_run_free(r);
        return -1;
    }
    return 0;
}

int splash_api_run_start(struct splash_api_run *r, const struct splash_api_prompt *p,
                         const struct splash_gen_params *params, const char *reasoning,
                         struct splash_http_reply *reply)
{
    if (!splash_app_admit(r->app, reply))
        return -1;
    r->admitted = 1;
    if (splash_gen_start(&r->gen, r->app, p->ids.ids, p->ids.n, params, reasoning, reply))
        return -1;
    r->started = 1;
    return 0;
}

int splash_api_run_pump(struct splash_api_run *r, int timeout_ms)
{
    if (r->ended)
        return 0;
    struct splash_tok_bytes text = {0};
    int64_t before = r->gen.completion_tokens;
    int running = splash_gen_next(&r->gen, &text, timeout_ms);
    if (text.len)
        splash_chat_parser_feed(r->parser, text.data, text.len, on_delta, r);
    /* the think block's close ends the reasoning: it is not a reasoning token */
    int closes = text.len == strlen(r->app->format->think_close) &&
                 !memcmp(text.data, r->app->format->think_close, text.len);
    if (r->in_reasoning && !closes)
        r->reasoning_tokens += r->gen.completion_tokens - before;
    if (closes)
        r->in_reasoning = 0;
    splash_tok_bytes_free(&text);
    if (r->stop_matched) {
        r->ended = 1;
        return 0;
    }
    if (!running) {
        splash_chat_parser_finish(r->parser, on_delta, r);
        release_held(r);
        r->ended = 1;
    }
    return running;
}

int splash_api_run_hit_limit(const struct splash_api_run *r)
{
    return !r->stop_matched && !strcmp(r->gen.finish_reason, "length");
}

void splash_api_run_free(struct splash_api_run *r)
{
    if (r->started)
        splash_gen_end(&r->gen);
    if (r->admitted)
        splash_app_release(r->app);
    r->started = r->admitted = 0;
    if (r->parser)
        splash_chat_parser_destroy(r->parser);
    r->parser = NULL;
    splash_stop_filter_free(&r->stops);
    splash_chat_result_free(&r->result);
    if (r->tools)
        json_decref(r->tools);
    r->tools = NULL;
}
