/* Generation plumbing shared by every API adapter. */
#include "server/generation.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/chat/chat_format.h"
#include "server/console.h"
#include "server/http.h"
#include <utf8proc.h>

static double mono_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* 12345 -> "12,345" */
static const char *grouped(int64_t v, char *buf, size_t size)
{
    char raw[32];
    snprintf(raw, sizeof raw, "%lld", (long long)v);
    size_t n = strlen(raw), o = 0;
    for (size_t i = 0; i < n && o + 2 < size; i++) {
        if (i && (n - i) % 3 == 0 && raw[0] != '-')
            buf[o++] = ',';
        buf[o++] = raw[i];
    }
    buf[o] = 0;
    return buf;
}

int64_t splash_gen_context_overflow(struct splash_app *app, size_t n_prompt)
{
    /* the engine's own rule: the prompt must leave a position for the output */
    int64_t n_ctx = splash_app_context(app);
    return n_ctx > 0 && (int64_t)n_prompt >= n_ctx ? n_ctx : 0;
}

int splash_gen_start(struct splash_gen *g, struct splash_app *app, const int32_t *prompt,
                     size_t n_prompt, const struct splash_gen_params *params,
                     const char *reasoning, struct splash_http_reply *reply)
{
    memset(g, 0, sizeof *g);
    g->app = app;
    g->prompt_tokens = (int64_t)n_prompt;
    int64_t n_ctx = splash_gen_context_overflow(app, n_prompt);
    if (n_ctx) {
        char message[200];
        snprintf(message, sizeof message,
                 "This model's maximum context length is %lld tokens, and the prompt has %lld, "
                 "which leaves no room for output: shorten it, or serve a longer --max-context",
                 (long long)n_ctx, (long long)n_prompt);
        splash_reply_error(reply, 400, "invalid_request_error", "context_length_exceeded", message);
        return -1;
    }
    struct splash_submit submit = {.prompt = (int32_t *)prompt, .n_prompt = n_prompt,
                                   .reuse_token = app->format ? app->reuse_token : -1,
                                   .params = *params};
    for (int i = 0; i < app->n_stop_ids && i < SPLASH_GEN_MAX_STOP_IDS; i++)
        submit.stop_ids[submit.n_stop++] = app->stop_ids[i];
    if (submit.reuse_token < 0)
        submit.reuse_token = -1;
    g->want_logprobs = params->logprobs;
    g->top_logprobs = params->top_logprobs;
    if (g->want_logprobs)
        g->logprobs = json_array();
    const char *code = NULL;
    char message[512];
    int retry_after = 0;
    g->pending = splash_engine_submit(app->engine, &submit, &code, message, sizeof message,
                                      &retry_after);
    if (!g->pending) {
        int status = !strcmp(code, "engine_recovering") ? 503
                     : !strcmp(code, "request_quarantined") ? 400
                                                             : 500;
        splash_reply_error(reply, status,
                           status == 400 ? "invalid_request_error" : "server_error",
                           code, message);
        reply->retry_after = status == 503 ? retry_after : 0;
        if (g->logprobs)
            json_decref(g->logprobs);
        g->logprobs = NULL;
        return -1;
    }
    /* harmony's markup is control tokens, and its parser reads the messages by them: they
     * reach it as their text (other formats' tags are added tokens, text already) */
    splash_detok_stream_init(&g->detok, app->tok,
                             app->format->calls == SPLASH_CALLS_HARMONY ? SPLASH_DETOK_SPECIAL : 0);
    g->request = splash_pending_id(g->pending);
    g->started = mono_now();
    if (app->opts->request_timeout > 0)
        g->deadline = g->started + app->opts->request_timeout;
    snprintf(g->reasoning, sizeof g->reasoning, "%s", reasoning ? reasoning : "");
    return 0;
}

/* The Started line, once the engine takes the request into a lane and knows what the
 * prefix cache gave it. */
static void announce_start(struct splash_gen *g, const json_t *cached, int from_disk)
{
    char input[32], hit[32];
    g->cached_tokens = json_integer_value(cached);
    splash_console_line(SPLASH_CONSOLE_OUT, "Started · request %llu · input %s · cached %s%s%s%s",
                        (unsigned long long)g->request,
                        grouped(g->prompt_tokens, input, sizeof input),
                        grouped(g->cached_tokens, hit, sizeof hit),
                        from_disk ? " (read back from the SSD cache)" : "",
                        g->reasoning[0] ? " · " : "", g->reasoning);
}

/* A token's text as a JSON string: a byte-level token may hold part of a character, which
 * becomes U+FFFD here (its exact bytes go in "bytes"). */
static json_t *token_text(const char *piece, size_t len)
{
    json_t *s = json_stringn(piece ? piece : "", piece ? len : 0);
    if (s)
        return s;
    char *clean = malloc(len * 3 + 1);
    if (!clean)
        return json_string("");
    size_t o = 0;
    const utf8proc_uint8_t *p = (const utf8proc_uint8_t *)piece;
    for (size_t i = 0; i < len;) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t k = utf8proc_iterate(p + i, (utf8proc_ssize_t)(len - i), &cp);
        if (k <= 0) {
            memcpy(clean + o, "\xEF\xBF\xBD", 3);
            o += 3;
            i++;
        } else {
            memcpy(clean + o, p + i, (size_t)k);
            o += (size_t)k;
            i += (size_t)k;
        }
    }
    s = json_stringn(clean, o);
    free(clean);
    return s ? s : json_string("");
}

/* {token, logprob, bytes} of one token, as OpenAI's logprobs give each; control tokens
 * (an end of turn) show their text, as OpenAI's do. */
static json_t *token_logprob(const struct splash_gen *g, int32_t id, double lp)
{
    size_t len = 0;
    const char *piece = splash_tokenizer_piece(g->app->tok, id, SPLASH_DETOK_SPECIAL, &len);
    json_t *bytes = json_array();
    for (size_t i = 0; piece && i < len; i++)
        json_array_append_new(bytes, json_integer((unsigned char)piece[i]));
    return json_pack("{s:o, s:f, s:o}", "token", token_text(piece, len), "logprob", lp, "bytes",
                     bytes);
}

static void append_logprob(struct splash_gen *g, int32_t id, double lp, json_t *top)
{
    json_t *alts = json_array();
    for (size_t i = 0; json_is_array(top) && i < json_array_size(top); i++) {
        json_t *pair = json_array_get(top, i);
        json_array_append_new(alts,
                              token_logprob(g, (int32_t)json_integer_value(json_array_get(pair, 0)),
                                            json_number_value(json_array_get(pair, 1))));
    }
    json_t *entry = token_logprob(g, id, lp);
    json_object_set_new(entry, "top_logprobs", alts);
    json_array_append_new(g->logprobs, entry);
}

/* Replaces invalid UTF-8 in out[from..] with U+FFFD: a model may emit byte tokens that
 * never form a character, and every API returns text as JSON strings. */
static void sanitize_utf8(struct splash_tok_bytes *out, size_t from)
{
    size_t n = out->len - from;
    if (!n)
        return;
    const utf8proc_uint8_t *p = (const utf8proc_uint8_t *)out->data + from;
    int valid = 1;
    for (size_t i = 0; i < n;) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t k = utf8proc_iterate(p + i, (utf8proc_ssize_t)(n - i), &cp);
        if (k <= 0) {
            valid = 0;
            break;
        }
        i += (size_t)k;
    }
    if (valid)
        return;
    char *clean = malloc(n * 3 + 1);
    if (!clean)
        return;
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t k = utf8proc_iterate(p + i, (utf8proc_ssize_t)(n - i), &cp);
        if (k <= 0) {
            memcpy(clean + o, "\xEF\xBF\xBD", 3);
            o += 3;
            i++;
        } else {
            memcpy(clean + o, p + i, (size_t)k);
            o += (size_t)k;
            i += (size_t)k;
        }
    }
    if (from + o + 1 > out->cap) {
        char *grown = realloc(out->data, from + o + 1);
        if (!grown) {
            free(clean);
            return;
        }
        out->data = grown;
        out->cap = from + o + 1;
    }
    memcpy(out->data + from, clean, o);
    out->len = from + o;
    out->data[out->len] = 0;
    free(clean);
}

int splash_gen_next(struct splash_gen *g, struct splash_tok_bytes *out, int timeout_ms)
{
    size_t from = out->len;
    if (g->done)
        return 0;
    struct splash_event ev;
    if (g->deadline > 0) {
        double left = g->deadline - mono_now();
        if (left <= 0) {
            /* --request-timeout: the request ends here, in the engine too */
            splash_pending_cancel(g->pending);
            g->done = 1;
            snprintf(g->error_code, sizeof g->error_code, "request_timeout");
            snprintf(g->error_message, sizeof g->error_message,
                     "the request ran past --request-timeout (%.0f s)", g->app->opts->request_timeout);
            return 0;
        }
        if (timeout_ms < 0 || left * 1000 < timeout_ms)
            timeout_ms = (int)(left * 1000) + 1;
    }
    /* a client that goes away while the engine works cancels its request, streamed or
     * not: its connection is looked at every 250 ms, tokens coming or not */
    for (;;) {
        double t = mono_now();
        if (t - g->client_checked >= 0.25) {
            g->client_checked = t;
            if (splash_http_client_gone()) {
                splash_pending_cancel(g->pending);
                g->done = 1;
                snprintf(g->finish_reason, sizeof g->finish_reason, "cancelled");
                return 0;
            }
        }
        int slice = timeout_ms < 0 || timeout_ms > 250 ? 250 : timeout_ms;
        if (splash_pending_next(g->pending, &ev, slice))
            break;
        if (timeout_ms >= 0 && (timeout_ms -= slice) <= 0)
            return 1;
    }
    if (ev.kind == SPLASH_EV_TOKENS) {
        json_t *t = json_object_get(ev.body, "t");
        if (json_object_get(ev.body, "cached") && !g->announced) {
            g->announced = 1; /* a request that yields its lane starts again */
            announce_start(g, json_object_get(ev.body, "cached"),
                           json_is_true(json_object_get(ev.body, "from_disk")));
        }
        if (!g->first_token && json_array_size(t))
            g->first_token = mono_now();
        for (size_t i = 0; i < json_array_size(t); i++) {
            int32_t id = (int32_t)json_integer_value(json_array_get(t, i));
            struct splash_err err;
            splash_detok_stream_push(&g->detok, id, out, &err);
            g->completion_tokens++;
            if (g->logprobs)
                append_logprob(g, id, json_number_value(json_array_get(json_object_get(ev.body, "lp"), i)),
                               json_array_get(json_object_get(ev.body, "top"), i));
        }
    } else if (ev.kind == SPLASH_EV_DONE) {
        g->done = 1;
        snprintf(g->finish_reason, sizeof g->finish_reason, "%s",
                 json_string_value(json_object_get(ev.body, "finish_reason"))
                     ? json_string_value(json_object_get(ev.body, "finish_reason"))
                     : "stop");
        g->cached_tokens = json_integer_value(json_object_get(ev.body, "cached_tokens"));
        json_t *spec = json_object_get(ev.body, "speculation");
        g->spec_proposed = json_integer_value(json_object_get(spec, "proposed"));
        g->spec_accepted = json_integer_value(json_object_get(spec, "accepted"));
        g->spec_cycles = json_integer_value(json_object_get(spec, "cycles"));
        json_t *pc = json_object_get(ev.body, "prefix_cache");
        if (json_is_object(pc)) {
            pthread_mutex_lock(&g->app->lock);
            json_decref(g->app->prefix_cache);
            g->app->prefix_cache = json_deep_copy(pc);
            pthread_mutex_unlock(&g->app->lock);
        }
        json_t *se = json_object_get(ev.body, "streamed_experts");
        if (json_is_object(se))
            splash_engine_client_note_experts(g->app->engine, se);
    } else {
        g->done = 1;
        const char *code = json_string_value(json_object_get(ev.body, "code"));
        const char *message = json_string_value(json_object_get(ev.body, "message"));
        snprintf(g->error_code, sizeof g->error_code, "%s", code ? code : "engine_failed");
        snprintf(g->error_message, sizeof g->error_message, "%s", message ? message : "");
    }
    json_decref(ev.body);
    sanitize_utf8(out, from);
    return g->done ? 0 : 1;
}

void splash_gen_end(struct splash_gen *g)
{
    if (g->pending && g->request) {
        double t = mono_now() - g->started;
        double gen_s = g->first_token ? mono_now() - g->first_token : 0;
        char out[32];
        if (g->error_code[0])
            splash_console_line(SPLASH_CONSOLE_ERR, "Error · request %llu · %s: %s",
                                (unsigned long long)g->request, g->error_code, g->error_message);
        else if (!g->done || !strcmp(g->finish_reason, "cancelled"))
            splash_console_line(SPLASH_CONSOLE_OUT, "Cancelled · request %llu · output %s · %.1f s",
                                (unsigned long long)g->request,
                                grouped(g->completion_tokens, out, sizeof out), t);
        else {
            /* speculation: tokens each verify cycle kept (its accepted proposals) */
            char spec[48] = "";
            if (g->spec_cycles > 0)
                snprintf(spec, sizeof spec, " · accepted %.1f/cycle",
                         (double)g->spec_accepted / (double)g->spec_cycles);
            splash_console_line(SPLASH_CONSOLE_OUT,
                                "Done · request %llu · output %s · %s · %.1f s · %.1f tokens/s%s",
                                (unsigned long long)g->request,
                                grouped(g->completion_tokens, out, sizeof out), g->finish_reason, t,
                                gen_s > 0 && g->completion_tokens > 1
                                    ? (double)(g->completion_tokens - 1) / gen_s
                                    : 0.0,
                                spec);
        }
    }
    if (g->pending)
        splash_pending_release(g->pending);
    g->pending = NULL;
    if (g->logprobs)
        json_decref(g->logprobs);
    g->logprobs = NULL;
    pthread_mutex_lock(&g->app->lock);
    g->app->tokens_generated += (uint64_t)g->completion_tokens;
    g->app->prompt_tokens_total += (uint64_t)g->prompt_tokens;
    g->app->draft_proposed += (uint64_t)g->spec_proposed;
    g->app->draft_accepted += (uint64_t)g->spec_accepted;
    g->app->draft_cycles += (uint64_t)g->spec_cycles;
    pthread_mutex_unlock(&g->app->lock);
}

int splash_gen_error_status(const struct splash_gen *g)
{
    if (!strcmp(g->error_code, "capacity_exhausted") || !strcmp(g->error_code, "engine_recovering") ||
        !strcmp(g->error_code, "shutting_down"))
        return 503;
    if (!strcmp(g->error_code, "request_timeout"))
        return 504;
    if (!strcmp(g->error_code, "context_length_exceeded") || !strcmp(g->error_code, "invalid_request"))
        return 400;
    return 500;
}
