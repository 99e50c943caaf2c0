/* Generation plumbing shared by every API adapter. */
#include "server/generation.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/console.h"
#include "server/http.h"
#include <utf8proc.h>

static int number_in(const json_t *body, const char *key, double lo, double hi, json_t *dst,
                     const char *dst_key, char *msg, size_t msg_size)
{
    json_t *v = json_object_get(body, key);
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_number(v) || json_number_value(v) < lo || json_number_value(v) > hi ||
        !isfinite(json_number_value(v))) {
        snprintf(msg, msg_size, "%s must be a number from %g to %g", key, lo, hi);
        return -1;
    }
    json_object_set_new(dst, dst_key, json_real(json_number_value(v)));
    return 0;
}

/* OpenAI's logit_bias: token ids (decimal keys) to a bias from -100 to 100 added to their
 * logits; the engine refuses ids past its vocabulary. */
#define MAX_LOGIT_BIAS 1024

static int logit_bias(const json_t *body, json_t *sampling, char *msg, size_t msg_size)
{
    json_t *v = json_object_get(body, "logit_bias");
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_object(v)) {
        snprintf(msg, msg_size, "logit_bias must be an object of token ids to numbers from -100 to 100");
        return -1;
    }
    if (json_object_size(v) > MAX_LOGIT_BIAS) {
        snprintf(msg, msg_size, "logit_bias: %zu tokens; at most %d", json_object_size(v),
                 MAX_LOGIT_BIAS);
        return -1;
    }
    json_t *list = json_array();
    const char *key;
    json_t *b;
    json_object_foreach(v, key, b) {
        char *end;
        long long id = strtoll(key, &end, 10);
        if (!*key || *end || id < 0 || id > INT32_MAX) {
            snprintf(msg, msg_size, "logit_bias: key \"%.40s\" is not a token id", key);
            json_decref(list);
            return -1;
        }
        if (!json_is_number(b) || json_number_value(b) < -100 || json_number_value(b) > 100) {
            snprintf(msg, msg_size, "logit_bias[\"%.40s\"] must be a number from -100 to 100", key);
            json_decref(list);
            return -1;
        }
        json_array_append_new(list, json_pack("[I, f]", (json_int_t)id, json_number_value(b)));
    }
    json_object_set_new(sampling, "logit_bias", list);
    return 0;
}

int splash_gen_params(const json_t *body, json_t *submit, char *msg, size_t msg_size)
{
    json_t *sampling = json_object();
    json_object_set_new(submit, "sampling", sampling);
    /* OpenAI's default temperature is 1 */
    json_object_set_new(sampling, "temperature", json_real(1.0));
    if (number_in(body, "temperature", 0, 2, sampling, "temperature", msg, msg_size) ||
        number_in(body, "top_p", 0, 1, sampling, "top_p", msg, msg_size) ||
        number_in(body, "min_p", 0, 1, sampling, "min_p", msg, msg_size) ||
        number_in(body, "presence_penalty", -2, 2, sampling, "presence_penalty", msg, msg_size) ||
        number_in(body, "frequency_penalty", -2, 2, sampling, "frequency_penalty", msg, msg_size) ||
        number_in(body, "repetition_penalty", 0.01, 10, sampling, "repetition_penalty", msg, msg_size))
        return -1;
    json_t *v;
    if (logit_bias(body, sampling, msg, msg_size))
        return -1;
    if ((v = json_object_get(body, "top_k")) && !json_is_null(v)) {
        if (!json_is_integer(v) || json_integer_value(v) < 0) {
            snprintf(msg, msg_size, "top_k must be a non-negative integer");
            return -1;
        }
        json_object_set(sampling, "top_k", v);
    }
    if ((v = json_object_get(body, "seed")) && !json_is_null(v)) {
        if (!json_is_integer(v)) {
            snprintf(msg, msg_size, "seed must be an integer");
            return -1;
        }
        json_object_set(sampling, "seed", v);
    }
    /* one choice per request: n > 1 is refused rather than silently answered once */
    if ((v = json_object_get(body, "n")) && !json_is_null(v) &&
        (!json_is_integer(v) || json_integer_value(v) != 1)) {
        snprintf(msg, msg_size, "n must be 1: this server generates one choice per request");
        return -1;
    }
    if ((v = json_object_get(body, "stream")) && !json_is_null(v) && !json_is_boolean(v)) {
        snprintf(msg, msg_size, "stream must be a boolean");
        return -1;
    }
    if ((v = json_object_get(body, "stream_options")) && !json_is_null(v) && !json_is_object(v)) {
        snprintf(msg, msg_size, "stream_options must be an object");
        return -1;
    }
    json_t *mt = json_object_get(body, "max_completion_tokens");
    if (!mt || json_is_null(mt))
        mt = json_object_get(body, "max_tokens");
    if (mt && !json_is_null(mt)) {
        if (!json_is_integer(mt) || json_integer_value(mt) < 1) {
            snprintf(msg, msg_size, "%s must be a positive integer",
                     json_object_get(body, "max_completion_tokens") ? "max_completion_tokens"
                                                                     : "max_tokens");
            return -1;
        }
        json_object_set(submit, "max_tokens", mt);
    }
    if ((v = json_object_get(body, "logprobs")) && !json_is_null(v)) {
        if (json_is_boolean(v)) {
            json_object_set(submit, "logprobs", v);
        } else if (json_is_integer(v) && json_integer_value(v) >= 0 && json_integer_value(v) <= 20) {
            /* legacy completions: logprobs is the number of alternatives */
            json_object_set_new(submit, "logprobs", json_true());
            json_object_set(submit, "top_logprobs", v);
        } else {
            snprintf(msg, msg_size, "logprobs must be a boolean (or 0-20 for completions)");
            return -1;
        }
    }
    if ((v = json_object_get(body, "top_logprobs")) && !json_is_null(v)) {
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 20) {
            snprintf(msg, msg_size, "top_logprobs must be an integer from 0 to 20");
            return -1;
        }
        json_object_set(submit, "top_logprobs", v);
    }
    return 0;
}

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
                     size_t n_prompt, json_t *submit, const char *reasoning,
                     struct splash_http_reply *reply)
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
    json_t *ids = json_array();
    for (size_t i = 0; i < n_prompt; i++)
        json_array_append_new(ids, json_integer(prompt[i]));
    json_object_set_new(submit, "prompt", ids);
    json_t *stops = json_array();
    for (int i = 0; i < app->n_stop_ids; i++)
        json_array_append_new(stops, json_integer(app->stop_ids[i]));
    json_object_set_new(submit, "stop_ids", stops);
    if (app->format && app->reuse_token >= 0)
        json_object_set_new(submit, "reuse_token", json_integer(app->reuse_token));
    g->want_logprobs = json_is_true(json_object_get(submit, "logprobs"));
    g->top_logprobs = (int)json_integer_value(json_object_get(submit, "top_logprobs"));
    if (g->want_logprobs)
        g->logprobs = json_array();
    const char *code = NULL;
    char message[512];
    int retry_after = 0;
    g->pending = splash_engine_submit(app->engine, submit, &code, message, sizeof message,
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
    splash_detok_stream_init(&g->detok, app->tok, 0);
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
        json_t *pc = json_object_get(ev.body, "prefix_cache");
        if (json_is_object(pc)) {
            pthread_mutex_lock(&g->app->lock);
            json_decref(g->app->prefix_cache);
            g->app->prefix_cache = json_deep_copy(pc);
            pthread_mutex_unlock(&g->app->lock);
        }
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
        else
            splash_console_line(SPLASH_CONSOLE_OUT,
                                "Done · request %llu · output %s · %s · %.1f s · %.1f tokens/s",
                                (unsigned long long)g->request,
                                grouped(g->completion_tokens, out, sizeof out), g->finish_reason, t,
                                gen_s > 0 && g->completion_tokens > 1
                                    ? (double)(g->completion_tokens - 1) / gen_s
                                    : 0.0);
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
