/* `splash serve` (the HTTP front and supervisor) and `splash engine` (the
 * engine process it spawns). */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/commands.h"
#include "cli/serve_lock.h"
#include "cli/modelgen/demo_model.h"
#include "server/engine/engine.h"
#include "server/engine/speculate.h"
#include "core/meta.h"
#include "core/registry.h"
#include "core/target.h"
#include "server/text/tokenizer/tokenizer.h"
#include "server/api.h"
#include "server/app.h"
#include "server/chat_setup.h"
#include "server/chat/jinja.h"
#include "server/console.h"
#include "server/engine_client.h"
#include "server/http.h"
#include "server/hub/serve_install.h"
#include "server/options.h"
#include "splash/family.h"

static double mono_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static char model_file[PATH_MAX];
static char draft_dir[PATH_MAX]; /* the draft the engine loads, "" for none */

static const char *resolve_model_path(const struct splash_serve_opts *o, char *msg, size_t size)
{
    if (o->demo && !o->model_dir) {
        struct splash_err err;
        if (splash_demo_model_path(model_file, sizeof model_file, &err) != SPLASH_OK) {
            snprintf(msg, size, "--demo: %s", err.msg);
            return NULL;
        }
        if (o->draft_model && strcmp(o->draft_model, "none"))
            snprintf(draft_dir, sizeof draft_dir, "%s", o->draft_model);
        return model_file;
    }
    if (o->model_dir) /* a GGUF file, any part of a split GGUF, or a directory of targets */
        return splash_hub_serve_prepare(o, model_file, sizeof model_file, draft_dir,
                                        sizeof draft_dir, msg, size)
                   ? NULL
                   : model_file;
    return splash_hub_serve_install(o, model_file, sizeof model_file, draft_dir, sizeof draft_dir,
                                    msg, size)
               ? NULL
               : model_file;
}

static sigset_t stop_signals;

/* A second Ctrl+C while the engine stops: the engine is killed at once. */
static int second_interrupt(void)
{
    struct timespec zero = {0, 0};
    return sigtimedwait(&stop_signals, NULL, &zero) == SIGINT;
}

int splash_cmd_serve(int argc, char **argv)
{
    struct splash_serve_opts o;
    char msg[1024];
    int rc = splash_serve_opts_parse(&o, argc, argv, msg, sizeof msg);
    if (rc == 1)
        return 0;
    if (rc < 0) {
        fprintf(stderr, "Error · %s\n", msg);
        return 2;
    }
    /* signals are taken by sigwait below; every thread inherits the mask */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    stop_signals = set;
    signal(SIGPIPE, SIG_IGN);
    splash_console_start();
    static struct splash_app app;
    memset(&app, 0, sizeof app);
    pthread_mutex_init(&app.lock, NULL);
    app.opts = &o;
    app.started_at = (double)time(NULL);
    app.last_activity = mono_now();
    app.model_name = o.model ? o.model : "splash/demo";
    app.demo = o.demo && !o.model_dir;
    if (app.demo)
        splash_console_line(
            SPLASH_CONSOLE_OUT,
            "Demo · serving a tiny story model: it tells simple "
            "children's stories and little else (pass --model-dir for a real model)");
    if (splash_http_check_port(&o, msg, sizeof msg)) {
        splash_console_line(SPLASH_CONSOLE_ERR, "Error · %s", msg);
        splash_console_stop(1000);
        return 1;
    }
    const char *path = resolve_model_path(&o, msg, sizeof msg);
    if (!path) {
        splash_console_line(SPLASH_CONSOLE_ERR, "Error · %s", msg);
        splash_console_stop(1000);
        return 1;
    }
    if (path != model_file)
        snprintf(model_file, sizeof model_file, "%s", path);
    struct splash_err terr;
    if (splash_tokenizer_load(path, &app.tok, &terr) != SPLASH_OK)
        snprintf(msg, sizeof msg, "%s", terr.msg);
    /* the chat side (template, probes, the format's stop tokens) reads the same file */
    const struct splash_chat_format *format = NULL;
    enum splash_status chat = SPLASH_OK;
    if (app.tok &&
        ((chat = splash_chat_format_of_model(splash_registry_global(), path, &format, &terr)) ||
         (chat = splash_chat_setup(&app, path, format, &terr))))
        snprintf(msg, sizeof msg, "%s", terr.msg);
    if (!app.tok || chat != SPLASH_OK) {
        splash_console_line(SPLASH_CONSOLE_ERR, "Error · %s", msg);
        splash_console_stop(1000);
        return 1;
    }
    if (o.n_allowed_origins && !o.api_key)
        for (int i = 0; i < o.n_allowed_origins; i++)
            if (!strcmp(o.allowed_origins[i], "*"))
                splash_console_line(SPLASH_CONSOLE_ERR,
                                    "Warning · --allowed-origin '*' without --api-key lets every "
                                    "page open in a browser use this server");
    static const char *ignored[] = {"--disable-ane: there is no Neural Engine here; prefill runs on the CPU",
                                    "--allow-idle-sleep: nothing to keep awake on this platform"};
    if (o.disable_ane)
        splash_console_line(SPLASH_CONSOLE_OUT, "Note · %s", ignored[0]);
    if (o.allow_idle_sleep)
        splash_console_line(SPLASH_CONSOLE_OUT, "Note · %s", ignored[1]);
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) {
        splash_console_line(SPLASH_CONSOLE_ERR, "Error · cannot find the splash executable");
        return 1;
    }
    exe[n] = 0;
    struct splash_engine_spawn spawn = {.exe = exe, .model_path = model_file, .threads = o.threads,
                                        .kv_format = o.kv_format, .state_format = o.state_format,
                                        .max_context = (int64_t)o.max_context,
                                        .max_memory = o.max_memory,
                                        .expert_memory = o.expert_memory,
                                        .decode_share = o.decode_share,
                                        .speculative = o.speculative,
                                        .verify_rows_all = !strcmp(o.verify_rows, "all"),
                                        .draft_model = draft_dir[0] ? draft_dir : NULL,
                                        .cache_disk = o.max_cache_disk,
                                        .cache_disk_writes = o.max_cache_disk_writes,
                                        .persistent_cache = o.persistent_cache,
                                        .cache_dir = o.cache_dir};
    splash_console_line(SPLASH_CONSOLE_OUT, "Loading · %s%s", model_file,
                        app.demo ? " (demonstration story model)" : "");
    app.engine = splash_engine_client_start(&spawn);
    if (!app.engine) {
        splash_console_line(SPLASH_CONSOLE_ERR, "Error · cannot start the engine");
        return 1;
    }
    /* wait for the engine while still answering signals */
    for (;;) {
        int retry;
        enum splash_engine_state s = splash_engine_client_state(app.engine, NULL, 0, &retry);
        if (s == SPLASH_ENGINE_READY)
            break;
        if (s == SPLASH_ENGINE_FAILED || s == SPLASH_ENGINE_STOPPED) {
            splash_engine_client_stop(app.engine, 1, NULL);
            splash_console_stop(1000);
            return 1;
        }
        struct timespec ts = {0, 100000000L};
        int sig = sigtimedwait(&set, NULL, &ts);
        if (sig == SIGINT || sig == SIGTERM) {
            splash_engine_client_stop(app.engine, 1, NULL);
            splash_console_stop(1000);
            return sig == SIGINT ? 130 : 143;
        }
    }
    json_t *info = splash_engine_client_info(app.engine);
    struct splash_http *http = splash_http_start(&o, splash_app_routes, splash_app_n_routes, &app,
                                                 msg, sizeof msg);
    if (!http) {
        splash_console_line(SPLASH_CONSOLE_ERR, "Error · %s", msg);
        splash_engine_client_stop(app.engine, 0, NULL);
        splash_console_stop(1000);
        return 1;
    }
    splash_console_line(SPLASH_CONSOLE_OUT, "Ready · %s (%s%s%s) · context %lld tokens",
                        app.model_name, json_string_value(json_object_get(info, "architecture")),
                        *json_string_value(json_object_get(info, "size")) ? ", " : "",
                        json_string_value(json_object_get(info, "size")),
                        (long long)json_integer_value(json_object_get(info, "n_ctx")));
    json_t *plan = json_object_get(info, "plan");
    const double gib = 1024.0 * 1024.0 * 1024.0;
    splash_console_line(SPLASH_CONSOLE_OUT,
                        "Memory · %.2f GiB usable (%s) · weights %.2f GiB · KV %.2f GiB for %lld "
                        "tokens · state %.2f GiB for %d lanes",
                        (double)json_integer_value(json_object_get(plan, "usable_bytes")) / gib,
                        json_string_value(json_object_get(plan, "bound")),
                        (double)json_integer_value(json_object_get(plan, "weights_bytes")) / gib,
                        (double)json_integer_value(json_object_get(plan, "kv_bytes")) / gib,
                        (long long)json_integer_value(json_object_get(plan, "kv_capacity_tokens")),
                        (double)json_integer_value(json_object_get(plan, "state_bytes")) / gib,
                        (int)json_integer_value(json_object_get(plan, "lanes")));
    /* server.md: --max-memory only lowers the budget, and the log says when it is ignored */
    const char *bound = json_string_value(json_object_get(plan, "bound"));
    if (o.max_memory && bound && strcmp(bound, "--max-memory"))
        splash_console_line(SPLASH_CONSOLE_OUT,
                            "Note · --max-memory %.2f GiB is more than the %.2f GiB %s leaves; it "
                            "is ignored",
                            (double)o.max_memory / gib,
                            (double)json_integer_value(json_object_get(plan, "usable_bytes")) / gib,
                            bound);
    char lock_path[4096]; /* written before the Serving line, for whoever waits for it */
    splash_serve_lock_publish(&app, lock_path, sizeof lock_path);
    splash_console_line(SPLASH_CONSOLE_OUT, "Serving · http://%s:%d%s", o.host, o.port,
                        o.no_webui ? "" : " (chat page at /)");
    int status = 0;
    for (;;) {
        struct timespec ts = {1, 0};
        int sig = sigtimedwait(&set, NULL, &ts);
        if (sig == SIGINT || sig == SIGTERM) {
            splash_console_line(SPLASH_CONSOLE_OUT, "Stopping · %s", sig == SIGINT ? "Ctrl+C" : "SIGTERM");
            break;
        }
        if (splash_engine_client_state(app.engine, NULL, 0, NULL) == SPLASH_ENGINE_FAILED) {
            status = splash_engine_client_exit_status(app.engine);
            break;
        }
        /* --idle-release: free the weights' memory after the idle time */
        pthread_mutex_lock(&app.lock);
        int idle = o.idle_release > 0 && !app.admitted && !app.released &&
                   mono_now() - app.last_activity > o.idle_release;
        if (idle)
            app.released = 1;
        pthread_mutex_unlock(&app.lock);
        if (idle)
            splash_engine_client_release(app.engine);
    }
    splash_serve_lock_withdraw(lock_path);
    /* drain (server.md: a stop ends within the engine's 15 s): new requests get 503
     * shutting_down; the engine's stop ends the requests in flight, each stream with an
     * error event and its end; their last bytes get up to 2 s to leave */
    splash_http_drain(http);
    splash_engine_client_stop(app.engine, 0, second_interrupt);
    for (int i = 0; i < 20 && splash_http_in_flight(http) > 0; i++)
        usleep(100000);
    splash_http_stop(http);
    splash_console_stop(1000);
    return status;
}

int splash_cmd_engine(int argc, char **argv)
{
    struct splash_engine_opts e = {.fd = -1, .decode_share = 0.5};
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *k = argv[i], *v = argv[i + 1];
        if (!strcmp(k, "--fd"))
            e.fd = (int)strtol(v, NULL, 10);
        else if (!strcmp(k, "--model-dir"))
            e.model_path = v;
        else if (!strcmp(k, "--threads"))
            e.n_threads = (int)strtol(v, NULL, 10);
        else if (!strcmp(k, "--kv-format"))
            e.kv_format = !strcmp(v, "bf16") ? SPLASH_KV_BF16 : SPLASH_KV_INT8;
        else if (!strcmp(k, "--state-format"))
            e.state_format = !strcmp(v, "bf16") ? SPLASH_STATE_BF16 : SPLASH_STATE_F32;
        else if (!strcmp(k, "--max-context"))
            e.max_context = strtoll(v, NULL, 10);
        else if (!strcmp(k, "--fit-context"))
            e.fit_context = !strcmp(v, "1");
        else if (!strcmp(k, "--max-memory"))
            e.max_memory = strtoull(v, NULL, 10);
        else if (!strcmp(k, "--expert-memory"))
            e.expert_memory = !strcmp(v, "off")    ? UINT64_MAX
                              : !strcmp(v, "auto") ? 0
                                                   : strtoull(v, NULL, 10);
        else if (!strcmp(k, "--decode-share"))
            e.decode_share = strtod(v, NULL);
        else if (!strcmp(k, "--speculative"))
            e.speculative = splash_spec_mode_parse(v);
        else if (!strcmp(k, "--verify-rows"))
            e.verify_rows_all = !strcmp(v, "all");
        else if (!strcmp(k, "--draft-model"))
            e.draft_model = v;
        else if (!strcmp(k, "--max-cache-disk"))
            e.cache_disk = !strcmp(v, "auto") ? -1 : strtoll(v, NULL, 10);
        else if (!strcmp(k, "--max-cache-disk-writes"))
            e.cache_disk_writes = strtoull(v, NULL, 10);
        else if (!strcmp(k, "--persistent-cache"))
            e.persistent_cache = !strcmp(v, "1");
        else if (!strcmp(k, "--cache-dir"))
            e.cache_dir = v;
    }
    if (e.fd < 0 || !e.model_path || e.speculative < 0) {
        fprintf(stderr, "splash engine: internal subcommand of splash serve\n");
        return 2;
    }
    /* the front stops us with SIGTERM: end the loop like a SHUTDOWN */
    signal(SIGPIPE, SIG_IGN);
    return splash_engine_main(&e);
}
