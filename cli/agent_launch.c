/* The agent launchers' shared steps: their options, the server, proxies and exec. */
#include "cli/agent_launch.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int parse_port(const char *text, int *port)
{
    char *end;
    long v = strtol(text, &end, 10);
    if (!*text || *end || v < 1 || v > 65535)
        return -1;
    *port = (int)v;
    return 0;
}

/* Takes --port N / --port=N before the first "--" and drops that "--"; everything else stays
 * in order for the client. */
static int take_options(const struct splash_agent *a, int argc, char **argv,
                        struct splash_agent_server *s, int *port, int *port_given)
{
    s->args = calloc((size_t)argc + 1, sizeof *s->args);
    if (!s->args) {
        fprintf(stderr, "splash %s: out of memory\n", a->command);
        return 1;
    }
    int ours = 1;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (ours && !strcmp(arg, "--")) {
            ours = 0;
            continue;
        }
        const char *value = NULL;
        if (ours && !strcmp(arg, "--port")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "splash %s: --port needs a port number\n", a->command);
                return 2;
            }
            value = argv[++i];
        } else if (ours && !strncmp(arg, "--port=", 7)) {
            value = arg + 7;
        }
        if (value) {
            if (parse_port(value, port)) {
                fprintf(stderr, "splash %s: --port: %s is not a port (1-65535)\n", a->command,
                        value);
                return 2;
            }
            *port_given = 1;
            continue;
        }
        s->args[s->n_args++] = argv[i];
    }
    return 0;
}

static int find_server(const struct splash_agent *a, int port, int port_given,
                       struct splash_agent_server *s)
{
    struct splash_err err;
    enum splash_status st = splash_runtime_lock_read(port, &s->lock, &err);
    if (st == SPLASH_OK) {
        s->port = port;
        return 0;
    }
    if (st != SPLASH_ERR_NOT_FOUND) {
        fprintf(stderr, "splash %s: %s\n", a->command, err.msg);
        return 1;
    }
    int ports[64];
    int n = splash_runtime_lock_ports(ports, 64);
    if (!port_given && n == 1) {
        /* no port asked for and one server runs: that one */
        if (splash_runtime_lock_read(ports[0], &s->lock, &err) == SPLASH_OK) {
            s->port = ports[0];
            return 0;
        }
    }
    fprintf(stderr, "splash %s: no splash serve is running on port %d", a->command, port);
    if (n) {
        fprintf(stderr, "; servers run on port%s", n > 1 ? "s" : "");
        for (int i = 0; i < n; i++)
            fprintf(stderr, "%s %d", i ? "," : "", ports[i]);
        fprintf(stderr, ": pick one with --port\n");
    } else {
        fprintf(stderr, ": start one first, as in splash serve --model-dir MODEL.gguf\n");
    }
    return 1;
}

/* Loopback for a server listening on every address or on loopback itself. */
static void base_url(struct splash_agent_server *s)
{
    const char *h = s->lock.host;
    if (!*h || !strcmp(h, "0.0.0.0") || !strncmp(h, "127.", 4) || !strcmp(h, "localhost"))
        h = "127.0.0.1";
    else if (!strcmp(h, "::") || !strcmp(h, "::1"))
        h = "[::1]";
    int v6 = strchr(h, ':') && h[0] != '[';
    snprintf(s->base_url, sizeof s->base_url, "http://%s%s%s:%d", v6 ? "[" : "", h, v6 ? "]" : "",
             s->port);
}

static int check_key(const struct splash_agent *a, struct splash_agent_server *s)
{
    const char *key = getenv("SPLASH_API_KEY");
    if (!s->lock.key_required) {
        s->key = NULL;
        return 0;
    }
    if (!key || !*key) {
        fprintf(stderr,
                "splash %s: the server on port %d requires an API key: set SPLASH_API_KEY to it\n",
                a->command, s->port);
        return 1;
    }
    if (!splash_runtime_lock_key_matches(&s->lock, key)) {
        fprintf(stderr, "splash %s: SPLASH_API_KEY is not the key the server on port %d requires\n",
                a->command, s->port);
        return 1;
    }
    s->key = key;
    return 0;
}

/* Is program an executable file in a PATH directory? (Checked before anything is written for
 * a client that is not there.) */
static int on_path(const char *program)
{
    const char *path = getenv("PATH");
    if (strchr(program, '/'))
        return access(program, X_OK) == 0;
    for (const char *p = path ? path : "/usr/local/bin:/usr/bin:/bin"; *p;) {
        size_t n = strcspn(p, ":");
        char file[4096];
        if (snprintf(file, sizeof file, "%.*s/%s", (int)(n ? n : 1), n ? p : ".", program) <
                (int)sizeof file &&
            access(file, X_OK) == 0)
            return 1;
        p += n;
        if (*p == ':')
            p++;
    }
    return 0;
}

static int not_installed(const struct splash_agent *a)
{
    fprintf(stderr, "splash %s: %s is not installed (no %s on PATH); install it with: %s\n",
            a->command, a->product, a->program, a->install_hint);
    return 127;
}

int splash_agent_prepare(const struct splash_agent *a, int argc, char **argv,
                         struct splash_agent_server *s)
{
    memset(s, 0, sizeof *s);
    if (!on_path(a->program))
        return not_installed(a);
    int port = 8000, port_given = 0;
    const char *env = getenv("SPLASH_PORT");
    if (env && *env) {
        if (parse_port(env, &port)) {
            fprintf(stderr, "splash %s: SPLASH_PORT: %s is not a port (1-65535)\n", a->command,
                    env);
            return 2;
        }
        port_given = 1;
    }
    int rc = take_options(a, argc, argv, s, &port, &port_given);
    if (rc || (rc = find_server(a, port, port_given, s)) || (rc = check_key(a, s)))
        return rc;
    base_url(s);
    splash_agent_no_proxy();
    return 0;
}

int splash_agent_setenv(const char *name, const char *value)
{
    if (setenv(name, value, 1) == 0)
        return 0;
    fprintf(stderr, "splash: cannot set %s: %s\n", name, strerror(errno));
    return -1;
}

/* Does the comma-separated list already hold host? */
static int listed(const char *list, const char *host)
{
    size_t n = strlen(host);
    for (const char *p = list; p && *p;) {
        p += strspn(p, " ,");
        size_t len = strcspn(p, ",");
        size_t trimmed = len;
        while (trimmed && p[trimmed - 1] == ' ')
            trimmed--;
        if (trimmed == n && !strncmp(p, host, n))
            return 1;
        p += len;
    }
    return 0;
}

void splash_agent_no_proxy(void)
{
    static const char *const proxies[] = {"http_proxy", "https_proxy", "all_proxy",
                                          "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"};
    int proxied = 0;
    for (size_t i = 0; i < sizeof proxies / sizeof proxies[0]; i++) {
        const char *v = getenv(proxies[i]);
        proxied |= v && *v;
    }
    if (!proxied)
        return;
    static const char *const names[] = {"NO_PROXY", "no_proxy"};
    static const char *const loopback[] = {"127.0.0.1", "localhost", "::1"};
    /* the hosts either variable lists, once each, then the loopback names they lack */
    char merged[8192] = "";
    size_t len = 0;
    for (size_t k = 0; k < 2; k++) {
        const char *v = getenv(names[k]);
        if (!v)
            continue;
        if (!strcmp(v, "*"))
            return; /* no proxy for any host already */
        for (const char *p = v; *p;) {
            p += strspn(p, " ,");
            size_t n = strcspn(p, ",");
            while (n && p[n - 1] == ' ')
                n--;
            char host[1024];
            if (n && n < sizeof host) {
                memcpy(host, p, n);
                host[n] = 0;
                if (!listed(merged, host) && len + n + 2 < sizeof merged)
                    len += (size_t)snprintf(merged + len, sizeof merged - len, "%s%s",
                                            len ? "," : "", host);
            }
            p += strcspn(p, ",");
        }
    }
    for (size_t i = 0; i < 3; i++)
        if (!listed(merged, loopback[i]) && len + strlen(loopback[i]) + 2 < sizeof merged)
            len += (size_t)snprintf(merged + len, sizeof merged - len, "%s%s", len ? "," : "",
                                    loopback[i]);
    for (size_t k = 0; k < 2; k++)
        splash_agent_setenv(names[k], merged);
}

int splash_agent_exec(const struct splash_agent *a, const struct splash_agent_server *s,
                      char *const *extra)
{
    int n_extra = 0;
    while (extra && extra[n_extra])
        n_extra++;
    char **argv = calloc((size_t)(1 + n_extra + s->n_args + 1), sizeof *argv);
    if (!argv) {
        fprintf(stderr, "splash %s: out of memory\n", a->command);
        return 126;
    }
    int n = 0;
    argv[n++] = (char *)a->program;
    for (int i = 0; i < n_extra; i++)
        argv[n++] = extra[i];
    for (int i = 0; i < s->n_args; i++)
        argv[n++] = s->args[i];
    fflush(NULL);
    execvp(a->program, argv);
    int e = errno;
    free(argv);
    if (e == ENOENT)
        return not_installed(a);
    fprintf(stderr, "splash %s: cannot run %s: %s\n", a->command, a->program, strerror(e));
    return 126;
}
