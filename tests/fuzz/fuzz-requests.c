/* Fuzzes the request decoders: OpenAI chat messages, Anthropic Messages and
 * Responses bodies through normalisation, template rendering and tokenizing,
 * and the generation parameters, with the built-in vocabulary and template.
 * An input whose first byte is 0x01 is raw HTTP instead: the rest goes over a
 * loopback socket to the real HTTP front (libmicrohttpd, framing and security
 * checks, body limits), whose routes run the same decoders on the body; the
 * server must answer or close within 10 s of the input's end. The same bytes go
 * through the head gate's scan (server/http_scan.c) whole and in pieces, which must
 * clear the same bytes and refuse for the same reason. */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <jansson.h>

#include "cli/modelgen/builtin_vocab.h"
#include "core/gguf_write.h"
#include "server/text/tokenizer/tokenizer.h"
#include "server/api_prompt.h"
#include "server/app.h"
#include "server/chat/chat_format.h"
#include "server/chat_setup.h"
#include "server/api.h"
#include "server/engine/protocol.h"
#include "server/gen_read.h"
#include "server/generation.h"
#include "server/http.h"
#include "server/http_scan.h"
#include "server/options.h"

static struct splash_app app;
static struct splash_serve_opts opts;
static struct splash_serve_opts http_opts;
static struct splash_http *http;
static int http_port;

static void decode_body(json_t *body);

/* The routes of the raw-HTTP mode: the body through the decoders, a small answer. */
static void route_decode(void *appv, const struct splash_http_request *req,
                         struct splash_http_reply *reply)
{
    json_t *body = splash_api_parse_body(req, reply);
    if (!body)
        return;
    decode_body(body);
    reply->json = json_pack("{s:s}", "status", "decoded");
}

static void route_ok(void *appv, const struct splash_http_request *req,
                     struct splash_http_reply *reply)
{
    reply->json = json_pack("{s:s}", "status", "ok");
}

static const struct splash_route fuzz_routes[] = {
    {"GET", "/health", route_ok, 1},
    {"GET", "/v1/models/*", route_ok, 0},
    {"POST", "/v1/chat/completions", route_decode, 0},
    {"POST", "/v1/messages", route_decode, 0},
};

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    char path[64];
    snprintf(path, sizeof path, "/tmp/splash-fuzz-vocab-%d.gguf", (int)getpid());
    struct splash_err err;
    struct splash_gguf_writer *w = splash_gguf_writer_create();
    if (splash_builtin_vocab_write(w, splash_builtin_vocab_min_size(), &err) ||
        splash_gguf_writer_set_str(w, "general.architecture", "qwen35", &err) ||
        splash_gguf_writer_write_file(w, path, &err)) {
        fprintf(stderr, "fuzz-requests: %s\n", err.msg);
        abort();
    }
    splash_gguf_writer_destroy(w);
    char *args[] = {"serve", "--demo", NULL};
    char msg[512];
    if (splash_serve_opts_parse(&opts, 2, args, msg, sizeof msg) != 0)
        abort();
    app.opts = &opts;
    app.model_name = "fuzz/model";
    pthread_mutex_init(&app.lock, NULL);
    if (splash_tokenizer_load_gguf(path, &app.tok, &err) != SPLASH_OK ||
        /* no family plugins in the fuzz build: the vocabulary is Qwen's */
        splash_chat_setup(&app, path, &splash_chat_format_qwen, &err) != SPLASH_OK) {
        fprintf(stderr, "fuzz-requests: %s\n", err.msg);
        abort();
    }
    unlink(path);
    char *hargs[] = {"serve", "--demo", "--api-key", "fuzzkey", "--max-request-size", "64K",
                     "--allowed-origin", "http://ok.example", NULL};
    if (splash_serve_opts_parse(&http_opts, 8, hargs, msg, sizeof msg) != 0)
        abort();
    http_opts.port = 0; /* an ephemeral loopback port */
    signal(SIGPIPE, SIG_IGN);
    http = splash_http_start(&http_opts, fuzz_routes, sizeof fuzz_routes / sizeof fuzz_routes[0],
                             &app, msg, sizeof msg);
    if (!http || (http_port = splash_http_port(http)) <= 0) {
        fprintf(stderr, "fuzz-requests: %s\n", msg);
        abort();
    }
    return 0;
}

/* Sends the bytes, ends the input, and reads the answer until the server closes. */
static void raw_http(const uint8_t *data, size_t size)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)http_port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0)
        abort();
    size_t off = 0;
    while (off < size) {
        ssize_t n = send(fd, data + off, size - off, MSG_NOSIGNAL);
        if (n <= 0)
            break; /* refused and closed early: fine */
        off += (size_t)n;
    }
    shutdown(fd, SHUT_WR);
    char buf[4096];
    for (;;) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int rc = poll(&pfd, 1, 10000);
        if (rc == 0) {
            fprintf(stderr, "fuzz-requests: the server neither answered nor closed in 10 s\n");
            abort();
        }
        if (rc < 0 && errno == EINTR)
            continue;
        ssize_t n = recv(fd, buf, sizeof buf, 0);
        if (n <= 0)
            break;
    }
    close(fd);
}

/* Scans the stream as it would arrive `step` bytes at a time (a gate never holds more
 * than a head's worth of uncleared bytes); the bytes cleared and the scan's end. */
static size_t scan_in_steps(const uint8_t *data, size_t size, size_t step,
                            struct splash_http_scan *s)
{
    memset(s, 0, sizeof *s);
    size_t cleared = 0, have = 0;
    while (have < size && !s->why) {
        have = have + step < size ? have + step : size;
        if (have - cleared > SPLASH_HTTP_HEAD_MAX)
            have = cleared + SPLASH_HTTP_HEAD_MAX;
        size_t before = cleared;
        for (size_t n; (n = splash_http_scan(s, (const char *)data + cleared, have - cleared));)
            cleared += n;
        if (cleared == before && have - cleared == SPLASH_HTTP_HEAD_MAX && !s->why)
            abort(); /* a full head's worth of bytes neither cleared nor refused */
    }
    return cleared;
}

static void scan_agrees(const uint8_t *data, size_t size)
{
    struct splash_http_scan whole, split;
    size_t a = scan_in_steps(data, size, SPLASH_HTTP_HEAD_MAX, &whole);
    size_t step = size ? 1 + data[size - 1] % 7 : 1;
    size_t b = scan_in_steps(data, size, step, &split);
    if (a != b || (whole.why != split.why) || whole.heads != split.heads) {
        fprintf(stderr, "fuzz-requests: the head scan differs whole (%zu, %s) and in %zu-byte "
                        "pieces (%zu, %s)\n",
                a, whole.why ? whole.why : "-", step, b, split.why ? split.why : "-");
        abort();
    }
}

static void drop_reply(struct splash_http_reply *reply)
{
    if (reply->json)
        json_decref(reply->json);
    free(reply->text);
    memset(reply, 0, sizeof *reply);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size && data[0] == 0x01) {
        scan_agrees(data + 1, size - 1);
        raw_http(data + 1, size - 1);
        return 0;
    }
    json_t *body = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, NULL);
    if (!json_is_object(body)) {
        if (body)
            json_decref(body);
        return 0;
    }
    decode_body(body);
    return 0;
}

static void decode_body(json_t *body)
{
    char msg[1024];
    /* OpenAI chat */
    json_t *messages;
    struct splash_err nerr;
    if (splash_chat_normalize(&app, json_object_get(body, "messages"), &messages, &nerr) == SPLASH_OK) {
        json_t *tools = json_object_get(body, "tools");
        int effort = -1;
        if (!splash_api_check_tools(tools, "tools", msg, sizeof msg) &&
            !splash_api_effort(json_object_get(body, "reasoning_effort"), "reasoning_effort", &effort,
                               msg, sizeof msg) &&
            !splash_api_check_kwargs(json_object_get(body, "chat_template_kwargs"), msg, sizeof msg)) {
            struct splash_api_prompt p = {0};
            splash_api_prompt_make(&app, messages, tools, effort,
                                   json_object_get(body, "chat_template_kwargs"), &p, msg, sizeof msg);
            splash_api_prompt_free(&p);
        }
        json_decref(messages);
    }
    /* Anthropic Messages and Responses */
    struct splash_http_reply reply = {0};
    struct splash_api_prompt p = {0};
    if (splash_api_messages_prompt(&app, body, &p, &reply) == 0)
        splash_api_prompt_free(&p);
    drop_reply(&reply);
    memset(&p, 0, sizeof p);
    if (splash_api_responses_prompt(&app, body, &p, &reply) == 0)
        splash_api_prompt_free(&p);
    drop_reply(&reply);
    /* the typed request from each API, through the SUBMIT frame and back; and the body
     * itself as a SUBMIT frame's (the engine's reader) */
    enum splash_status (*readers[])(const json_t *, struct splash_gen_params *,
                                    struct splash_err *) = {
        splash_gen_read_openai, splash_gen_read_responses, splash_gen_read_messages};
    for (size_t i = 0; i < sizeof readers / sizeof *readers; i++) {
        int32_t one = 1;
        struct splash_submit s = {.prompt = &one, .n_prompt = 1, .reuse_token = -1};
        struct splash_err err;
        if (readers[i](body, &s.params, &err) != SPLASH_OK)
            continue;
        json_t *frame = splash_submit_to_json(&s);
        struct splash_submit back;
        if (splash_submit_from_json(frame, &back, &err) != SPLASH_OK)
            abort(); /* what the front writes the engine must read */
        splash_submit_free(&back);
        json_decref(frame);
        splash_gen_params_free(&s.params);
    }
    struct splash_submit raw;
    struct splash_err err;
    if (splash_submit_from_json(body, &raw, &err) == SPLASH_OK)
        splash_submit_free(&raw);
    json_decref(body);
}
