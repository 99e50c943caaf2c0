/* A third-party family plugin built against the installed headers alone.
 * It claims GGUF architecture "hello" and declares one tensor, so
 * `splash model-check` and `splash plugins` can show it at work. */
#include <splash/family.h>
#include <splash/host.h>
#include <stdio.h>

static const char *const hello_archs[] = {"hello", NULL};
static const char *const hello_types[] = {"hello_lm", NULL};

static enum splash_status hello_check(const struct splash_host *host, const struct splash_meta *m,
                                      struct splash_family_verdict *v, struct splash_err *err)
{
    int64_t n_embd;
    enum splash_status st = host->meta->get_i64(m, "hello.embedding_length", &n_embd, err);
    if (st != SPLASH_OK)
        return st;
    v->score = 1;
    snprintf(v->architecture, sizeof v->architecture, "Hello (hello)");
    snprintf(v->summary, sizeof v->summary, "hidden %lld", (long long)n_embd);
    return SPLASH_OK;
}

static enum splash_status hello_declare(const struct splash_host *host, const struct splash_meta *m,
                                        splash_decl_emit_fn emit, void *ctx, struct splash_err *err)
{
    int64_t n_embd;
    enum splash_status st = host->meta->get_i64(m, "hello.embedding_length", &n_embd, err);
    if (st != SPLASH_OK)
        return st;
    struct splash_tensor_decl d = {.name = "token_embd.weight", .layer = -1, .n_dims = 2,
                                   .ne = {n_embd, 16, 1, 1}, .accept = SPLASH_ACCEPT_LINEAR};
    emit(ctx, &d);
    return SPLASH_OK;
}

static const struct splash_family_plugin hello_plugin = {
    .header = SPLASH_PLUGIN_HEADER_INIT(SPLASH_PLUGIN_FAMILY, "hello", "0.1",
                                        struct splash_family_plugin),
    .gguf_architectures = hello_archs,
    .model_types = hello_types,
    .check_config = hello_check,
    .declare_tensors = hello_declare,
};

static const struct splash_plugin_header *hello_entry(const struct splash_host *host)
{
    host->log(SPLASH_LOG_DEBUG, "hello", "registered");
    return &hello_plugin.header;
}

SPLASH_PLUGIN_DEFINE(family_hello, hello_entry)
