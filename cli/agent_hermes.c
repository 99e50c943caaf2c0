/* splash hermes: Hermes in the splash profile (splash-<port> for a server off port 8000) of the
 * user's Hermes root, ~/.hermes or the root HERMES_HOME belongs to. The profile is made with
 * `hermes profile create` on first use, and its model settings are written with Hermes's own
 * `hermes -p PROFILE config set`, so its file stays in the format Hermes keeps; Hermes's tools
 * and the root's config.yaml stay the user's. The key is named by variable (key_env). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/agent_launch.h"
#include "cli/agents.h"

/* The root: HERMES_HOME, or its root when it names a profile (<root>/profiles/<name>). */
static int hermes_root(char *out, size_t size)
{
    const char *home = getenv("HERMES_HOME"), *user = getenv("HOME");
    int n;
    if (home && *home)
        n = snprintf(out, size, "%s", home);
    else if (user && user[0] == '/')
        n = snprintf(out, size, "%s/.hermes", user);
    else
        return -1;
    if (n < 0 || (size_t)n >= size)
        return -1;
    while (n > 1 && out[n - 1] == '/')
        out[--n] = 0;
    char *last = strrchr(out, '/');
    if (last && last > out) {
        *last = 0;
        char *parent = strrchr(out, '/');
        if (parent && !strcmp(parent, "/profiles"))
            *parent = 0; /* HERMES_HOME is a profile: its root holds profiles/ */
        else
            *last = '/';
    }
    return 0;
}

/* Runs hermes with argv (NULL-terminated after the program), output to stderr; 0 on success. */
static int run_hermes(char *const *argv)
{
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        dup2(STDERR_FILENO, STDOUT_FILENO);
        execvp("hermes", argv);
        _exit(127);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

int splash_cmd_hermes(int argc, char **argv)
{
    static const struct splash_agent a = {
        "hermes", "hermes", "Hermes",
        "curl -fsSL https://raw.githubusercontent.com/NousResearch/hermes-agent/main/scripts/"
        "install.sh | bash"};
    struct splash_agent_server s;
    int rc = splash_agent_prepare(&a, argc, argv, &s);
    if (rc)
        return rc;
    char root[4096], dir[4200], profile[32];
    if (s.port == 8000)
        snprintf(profile, sizeof profile, "splash");
    else
        snprintf(profile, sizeof profile, "splash-%d", s.port);
    if (hermes_root(root, sizeof root)) {
        fprintf(stderr, "splash hermes: neither HERMES_HOME nor HOME names Hermes's root\n");
        return 1;
    }
    snprintf(dir, sizeof dir, "%s/profiles/%s", root, profile);
    struct stat st;
    if (stat(dir, &st) != 0) {
        char *create[] = {"hermes", "profile", "create", profile, NULL};
        if (run_hermes(create)) {
            fprintf(stderr, "splash hermes: hermes profile create %s failed\n", profile);
            return 1;
        }
    }
    /* Hermes reserves the output limit out of the context it compacts at */
    int64_t output = s.lock.context < 131072 ? s.lock.context / 4 : SPLASH_CLIENT_RESPONSE_TOKENS;
    char provider[64], url[400], context[32], tokens[32];
    char k_api[96], k_transport[96], k_key[96];
    snprintf(provider, sizeof provider, "custom:%s", profile);
    snprintf(url, sizeof url, "%s/v1", s.base_url);
    snprintf(context, sizeof context, "%lld", (long long)s.lock.context);
    snprintf(tokens, sizeof tokens, "%lld", (long long)output);
    snprintf(k_api, sizeof k_api, "providers.%s.api", profile);
    snprintf(k_transport, sizeof k_transport, "providers.%s.transport", profile);
    snprintf(k_key, sizeof k_key, "providers.%s.key_env", profile);
    const char *settings[][2] = {
        {k_api, url},
        {k_transport, "chat_completions"},
        {s.key ? k_key : NULL, "SPLASH_API_KEY"},
        {"model.provider", provider},
        {"model.default", s.lock.model},
        {"model.context_length", context},
        {"model.max_tokens", tokens},
    };
    for (size_t i = 0; i < sizeof settings / sizeof settings[0]; i++) {
        if (!settings[i][0])
            continue;
        char *set[] = {"hermes", "-p", profile, "config", "set", (char *)settings[i][0],
                       (char *)settings[i][1], NULL};
        if (run_hermes(set)) {
            fprintf(stderr, "splash hermes: hermes -p %s config set %s failed\n", profile,
                    settings[i][0]);
            return 1;
        }
    }
    char *extra[] = {"-p", profile, NULL};
    return splash_agent_exec(&a, &s, extra);
}
