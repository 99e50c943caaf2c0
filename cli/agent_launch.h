/* What every agent launcher (splash claude|codex|opencode|pi|hermes, server.md "Agent
 * launchers") does around its client's own settings: take its own --port, find the running
 * server by its runtime lock, check the API key, keep proxies off loopback, and exec the client
 * with the other arguments as they came. */
#ifndef SPLASH_CLI_AGENT_LAUNCH_H
#define SPLASH_CLI_AGENT_LAUNCH_H

#include <stdint.h>

#include "cli/runtime_lock.h"

/* Output limit per response the launchers give OpenCode, Pi and Hermes (server.md). */
#define SPLASH_CLIENT_RESPONSE_TOKENS 32768

struct splash_agent {
    const char *command;      /* claude */
    const char *program;      /* the client's executable, found on PATH */
    const char *product;      /* Claude Code */
    const char *install_hint; /* npm install -g @anthropic-ai/claude-code */
};

struct splash_agent_server {
    struct splash_runtime_lock lock;
    int port;
    char base_url[320]; /* http://127.0.0.1:PORT, no trailing slash */
    const char *key;    /* SPLASH_API_KEY's value when the server wants a key, else NULL */
    char **args;        /* the arguments for the client (NULL-terminated) */
    int n_args;
};

/* Reads the launcher's --port (else SPLASH_PORT, else 8000, else the one server running),
 * drops the first "--", finds the server and checks the key. argv[0] is the subcommand.
 * Returns 0, or the exit status after printing why on stderr. */
int splash_agent_prepare(const struct splash_agent *a, int argc, char **argv,
                         struct splash_agent_server *s);

/* Adds 127.0.0.1, localhost and ::1 to NO_PROXY and no_proxy where a proxy variable is set. */
void splash_agent_no_proxy(void);

/* setenv that reports failure: 0, or -1 after printing. */
int splash_agent_setenv(const char *name, const char *value);

/* Runs program with extra (NULL-terminated, may be NULL) and then the client's arguments in
 * place of this process. Returns only on failure: 127 with the install hint when the client is
 * not installed, 126 otherwise. */
int splash_agent_exec(const struct splash_agent *a, const struct splash_agent_server *s,
                      char *const *extra);

#endif
