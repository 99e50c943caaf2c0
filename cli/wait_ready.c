/* `splash wait-ready`: waits until a server's /ready answers 200, the readiness check
 * of the systemd units (ExecStartPost) and the Docker image (HEALTHCHECK). */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/commands.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: splash wait-ready [--host HOST] [--port PORT] [--timeout SECONDS]\n"
            "Waits until the server at HOST:PORT answers GET /ready with 200 (its model is\n"
            "loaded): exit 0, or 1 once SECONDS passed (0: ask once).\n"
            "  --host HOST        the server's --host (default 127.0.0.1; 0.0.0.0 and :: ask loopback)\n"
            "  --port PORT        the server's port (default SPLASH_PORT or 8000)\n"
            "  --timeout SECONDS  how long to wait (default 600)\n");
}

struct body {
    char text[256];
    size_t len;
};

static size_t keep_body(char *data, size_t size, size_t n, void *userp)
{
    struct body *b = userp;
    size_t bytes = size * n, room = sizeof b->text - 1 - b->len;
    size_t take = bytes < room ? bytes : room;
    memcpy(b->text + b->len, data, take);
    b->len += take;
    b->text[b->len] = 0;
    return bytes;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* One GET: the HTTP status (0 when nothing answered, why in last). */
static long ask_ready(CURL *curl, const char *url, char *last, size_t last_size)
{
    struct body b = {.len = 0};
    b.text[0] = 0;
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &b);
    CURLcode rc = curl_easy_perform(curl);
    if (rc != CURLE_OK) {
        snprintf(last, last_size, "%s", curl_easy_strerror(rc));
        return 0;
    }
    long status = 0;
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    for (char *c = b.text; *c; c++)
        if (*c == '\n' || *c == '\r')
            *c = ' ';
    snprintf(last, last_size, "HTTP %ld %s", status, b.text);
    return status;
}

static int parse_number(const char *flag, const char *text, long lo, long hi, long *out)
{
    char *end = NULL;
    long v = strtol(text, &end, 10);
    if (!*text || *end || v < lo || v > hi) {
        fprintf(stderr, "splash wait-ready: %s %s: expected a whole number from %ld to %ld\n", flag,
                text, lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}

int splash_cmd_wait_ready(int argc, char **argv)
{
    const char *host = "127.0.0.1";
    const char *env_port = getenv("SPLASH_PORT");
    long port = 8000, timeout = 600;
    if (env_port && *env_port && parse_number("SPLASH_PORT", env_port, 1, 65535, &port))
        return 2;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
        if (i + 1 >= argc || (strcmp(a, "--host") && strcmp(a, "--port") && strcmp(a, "--timeout"))) {
            fprintf(stderr, "splash wait-ready: %s %s\n", a,
                    i + 1 >= argc && !strncmp(a, "--", 2) ? "needs a value" : "is not an option");
            usage(stderr);
            return 2;
        }
        const char *v = argv[++i];
        if (!strcmp(a, "--host"))
            host = v;
        else if (parse_number(a, v, a[2] == 'p' ? 1 : 0, a[2] == 'p' ? 65535 : 86400,
                              a[2] == 'p' ? &port : &timeout))
            return 2;
    }
    /* a server listening on every address answers on loopback */
    if (!strcmp(host, "0.0.0.0") || !*host)
        host = "127.0.0.1";
    else if (!strcmp(host, "::"))
        host = "::1";
    char url[512];
    snprintf(url, sizeof url, strchr(host, ':') ? "http://[%s]:%ld/ready" : "http://%s:%ld/ready",
             host, port);

    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        fprintf(stderr, "splash wait-ready: libcurl failed to start\n");
        return 1;
    }
    CURL *curl = curl_easy_init();
    if (!curl) {
        fprintf(stderr, "splash wait-ready: libcurl failed to start\n");
        curl_global_cleanup();
        return 1;
    }
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_NOPROXY, "*"); /* loopback: never through a proxy */
    curl_easy_setopt(curl, CURLOPT_TIMEOUT, 5L);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, keep_body);
    char last[320] = "";
    double deadline = now_s() + (double)timeout;
    int ready = 0;
    for (;;) {
        if (ask_ready(curl, url, last, sizeof last) == 200) {
            ready = 1;
            break;
        }
        if (now_s() >= deadline)
            break;
        struct timespec pause = {.tv_sec = 0, .tv_nsec = 250 * 1000 * 1000};
        nanosleep(&pause, NULL);
    }
    curl_easy_cleanup(curl);
    curl_global_cleanup();
    if (!ready) {
        fprintf(stderr, "splash wait-ready: %s not ready after %ld s: %s\n", url, timeout, last);
        return 1;
    }
    return 0;
}
