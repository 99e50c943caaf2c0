/* Third parties' plugins, built out of tree from `make install`ed headers and
 * `pkg-config splash-plugin` only (examples/plugin-family-hello, examples/plugin-format-hello),
 * are picked up by `splash plugins --plugin-dir`, pass model-check and serve: a HELLO8 model
 * (a Qwen hybrid whose matrices are in the example format, its GGUF type id the plugin's)
 * and a hello model (the example family's forward pass) each answer a completion. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <curl/curl.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/modelgen/builtin_vocab.h"
#include "core/gguf_write.h"
#include "splash/act.h"
#include "splash/fp.h"
#include "tests/support/rng.h"

static char tmp[] = "/tmp/splash-oot-XXXXXX";

static int run(const char *cmd, char *out, size_t size)
{
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    size_t n = fread(out, 1, size - 1, p);
    out[n] = 0;
    return pclose(p);
}

/* Installs into a private prefix and builds both examples there, once for the file. */
static int setup(void **state)
{
    (void)state;
    if (!mkdtemp(tmp))
        return -1;
    char cmd[4096], out[16384];
    snprintf(cmd, sizeof cmd, "make -s install PREFIX=%s/prefix >%s/install.log 2>&1", tmp, tmp);
    if (system(cmd) != 0) {
        fprintf(stderr, "make install failed (%s/install.log)\n", tmp);
        return -1;
    }
    static const char *const examples[] = {"plugin-family-hello", "plugin-format-hello"};
    for (int i = 0; i < 2; i++) {
        /* nothing but the installed headers and pkg-config */
        snprintf(cmd, sizeof cmd,
                 "cp -r examples/%s %s/%s && cd %s/%s && "
                 "env -u CPATH -u C_INCLUDE_PATH PKG_CONFIG_PATH=%s/prefix/lib/pkgconfig "
                 "make -s CFLAGS='-O2 -Wall -Wextra -Werror -std=c11' 2>&1",
                 examples[i], tmp, examples[i], tmp, examples[i], tmp);
        if (run(cmd, out, sizeof out) != 0) {
            fprintf(stderr, "%s build failed: %s\n", examples[i], out);
            return -1;
        }
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
    return system(cmd) == 0 ? 0 : -1;
}

/* `splash ARGS` from the installed prefix; its output in out. */
static int splash(char *out, size_t size, const char *fmt, ...)
{
    char args[2048], cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof cmd, "%s/prefix/bin/splash %s 2>&1", tmp, args);
    return run(cmd, out, size);
}

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    close(fd);
    return ntohs(a.sin_port);
}

struct body {
    char text[65536];
    size_t n;
};

static size_t on_data(char *p, size_t size, size_t n, void *ctx)
{
    struct body *b = ctx;
    size_t len = size * n;
    size_t room = sizeof b->text - 1 - b->n;
    memcpy(b->text + b->n, p, len < room ? len : room);
    b->n += len < room ? len : room;
    b->text[b->n] = 0;
    return len;
}

/* GET (post NULL) or POST a JSON body; returns the HTTP status (0: no answer). */
static long http(int port, const char *path, const char *post, struct body *b)
{
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, path);
    memset(b, 0, sizeof *b);
    CURL *c = curl_easy_init();
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 60L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, b);
    if (post) {
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, post);
    }
    long status = 0;
    if (curl_easy_perform(c) == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    return status;
}

/* Serves model with plugins from plugin_dir, asks one completion, stops the server. */
static void serve_and_ask(const char *model, const char *plugin_dir, const char *name)
{
    char exe[512], log[512], port_s[16];
    snprintf(exe, sizeof exe, "%s/prefix/bin/splash", tmp);
    snprintf(log, sizeof log, "%s/serve-%s.log", tmp, name);
    int port = free_port();
    snprintf(port_s, sizeof port_s, "%d", port);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(fd, 1);
        dup2(fd, 2);
        execl(exe, exe, "serve", "--model", "test/hello", "--model-dir", model, "--port", port_s,
              "--threads", "1", "--max-context", "512", "--no-webui", "--plugin-dir", plugin_dir,
              (char *)NULL);
        _exit(127);
    }
    struct body b;
    long st = 0;
    for (int i = 0; i < 600 && st != 200; i++) { /* 60 s to start */
        if (waitpid(pid, NULL, WNOHANG) == pid)
            break;
        st = http(port, "/ready", NULL, &b);
        if (st != 200)
            usleep(100 * 1000);
    }
    char out[8192] = "";
    if (st != 200) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        char cmd[600];
        snprintf(cmd, sizeof cmd, "tail -20 %s", log);
        run(cmd, out, sizeof out);
        fail_msg("%s: the server did not become ready:\n%s", name, out);
    }
    st = http(port, "/v1/completions",
              "{\"prompt\": \"Once upon a time\", \"max_tokens\": 6, \"temperature\": 0}", &b);
    kill(pid, SIGTERM);
    int status;
    waitpid(pid, &status, 0);
    if (st != 200 || !strstr(b.text, "\"completion_tokens\":6"))
        fail_msg("%s: completion answered %ld: %s", name, st, b.text);
}

static void test_plugins_listed(void **state)
{
    (void)state;
    char out[16384];
    assert_int_equal(splash(out, sizeof out, "plugins --plugin-dir %s/plugin-family-hello", tmp), 0);
    if (!strstr(out, "hello          family 0.3"))
        fail_msg("hello plugin not listed:\n%s", out);
    assert_non_null(strstr(out, "gguf architectures: hello"));
    assert_int_equal(splash(out, sizeof out, "plugins --plugin-dir %s/plugin-format-hello", tmp), 0);
    if (!strstr(out, "hello8         format 0.1") || !strstr(out, "formats: HELLO8(201)"))
        fail_msg("hello8 plugin not listed:\n%s", out);
}

static void test_format_plugin_model_checks_and_serves(void **state)
{
    (void)state;
    char out[16384], model[512], dir[512];
    snprintf(model, sizeof model, "%s/hello8.gguf", tmp);
    snprintf(dir, sizeof dir, "%s/plugin-format-hello", tmp);
    if (splash(out, sizeof out,
               "make-model --plugin-dir %s --arch qwen35 --shape qwen35-tiny --type HELLO8 "
               "--out %s",
               dir, model))
        fail_msg("make-model: %s", out);
    if (splash(out, sizeof out, "model-check --plugin-dir %s %s", dir, model) ||
        !strstr(out, " · ok"))
        fail_msg("model-check: %s", out);
    /* the file's matrices carry the plugin's type id: without it they are unreadable */
    assert_int_not_equal(splash(out, sizeof out, "model-check %s", model), 0);
    if (!strstr(out, "unknown tensor type 201"))
        fail_msg("model-check without the plugin: %s", out);
    serve_and_ask(model, dir, "hello8");
}

/* A hello model: the built-in vocabulary, Q8_0 tables of random values (served GGUFs
 * are quantized). */
static void write_hello_model(const char *path)
{
    enum { N_EMBD = 64 };
    struct splash_err err;
    int64_t n_vocab = splash_builtin_vocab_min_size();
    struct splash_gguf_writer *w = splash_gguf_writer_create();
    assert_non_null(w);
    assert_int_equal(splash_gguf_writer_set_str(w, "general.architecture", "hello", &err), SPLASH_OK);
    assert_int_equal(splash_gguf_writer_set_u32(w, "hello.embedding_length", N_EMBD, &err), SPLASH_OK);
    assert_int_equal(splash_gguf_writer_set_u32(w, "hello.vocab_size", (uint32_t)n_vocab, &err),
                     SPLASH_OK);
    assert_int_equal(splash_gguf_writer_set_u32(w, "hello.context_length", 2048, &err), SPLASH_OK);
    if (splash_builtin_vocab_write(w, n_vocab, &err))
        fail_msg("vocabulary: %s", err.msg);
    size_t n_blocks = (size_t)(N_EMBD * n_vocab) / SPLASH_QK8_0;
    struct splash_q8_0_block *tables[2];
    uint64_t rng = 7;
    static const char *const names[] = {"token_embd.weight", "output.weight"};
    const int64_t ne[2] = {N_EMBD, n_vocab};
    for (int t = 0; t < 2; t++) {
        tables[t] = malloc(n_blocks * sizeof *tables[t]);
        assert_non_null(tables[t]);
        for (size_t i = 0; i < n_blocks; i++) {
            tables[t][i].d = splash_fp32_to_fp16(1.0f / 127.0f);
            for (int j = 0; j < SPLASH_QK8_0; j++)
                tables[t][i].qs[j] = (int8_t)((int)(test_splitmix64(&rng) % 255) - 127);
        }
        assert_int_equal(splash_gguf_writer_add_tensor(w, names[t], 8 /* Q8_0 */, 2, ne, tables[t],
                                                       n_blocks * sizeof *tables[t], &err),
                         SPLASH_OK);
    }
    if (splash_gguf_writer_write_file(w, path, &err))
        fail_msg("%s: %s", path, err.msg);
    splash_gguf_writer_destroy(w);
    free(tables[0]);
    free(tables[1]);
}

static void test_family_plugin_model_checks_and_serves(void **state)
{
    (void)state;
    char out[16384], model[512], dir[512];
    snprintf(model, sizeof model, "%s/hello.gguf", tmp);
    snprintf(dir, sizeof dir, "%s/plugin-family-hello", tmp);
    write_hello_model(model);
    if (splash(out, sizeof out, "model-check --plugin-dir %s %s", dir, model) ||
        !strstr(out, "Hello (hello)") || !strstr(out, " · ok"))
        fail_msg("model-check: %s", out);
    serve_and_ask(model, dir, "hello");
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plugins_listed),
        cmocka_unit_test(test_format_plugin_model_checks_and_serves),
        cmocka_unit_test(test_family_plugin_model_checks_and_serves),
    };
    int rc = cmocka_run_group_tests(tests, setup, teardown);
    curl_global_cleanup();
    return rc;
}
