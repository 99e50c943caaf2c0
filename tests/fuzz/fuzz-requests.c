/* Fuzzes the request decoders: OpenAI chat messages, Anthropic Messages and
 * Responses bodies through normalisation, template rendering and tokenizing,
 * and the generation parameters, with the built-in vocabulary and template. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "cli/modelgen/builtin_vocab.h"
#include "core/gguf_write.h"
#include "server/text/tokenizer/tokenizer.h"
#include "server/api_prompt.h"
#include "server/app.h"
#include "server/chat_setup.h"
#include "server/generation.h"
#include "server/options.h"

static struct splash_app app;
static struct splash_serve_opts opts;

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
        splash_chat_setup(&app, path, msg, sizeof msg) != 0) {
        fprintf(stderr, "fuzz-requests: %s %s\n", err.msg, msg);
        abort();
    }
    unlink(path);
    return 0;
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
    json_t *body = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, NULL);
    if (!json_is_object(body)) {
        if (body)
            json_decref(body);
        return 0;
    }
    char msg[1024];
    /* OpenAI chat */
    json_t *messages = splash_chat_normalize(&app, json_object_get(body, "messages"), msg, sizeof msg);
    if (messages) {
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
    /* generation parameters */
    json_t *submit = json_object();
    splash_gen_params(body, submit, msg, sizeof msg);
    json_decref(submit);
    json_decref(body);
    return 0;
}
