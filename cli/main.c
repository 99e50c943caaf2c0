/* splash: one binary, subcommands. */
#include <stdio.h>
#include <string.h>

#include "cli/agents.h"
#include "cli/commands.h"
#include "cli/logits.h"
#include "cli/model_cmds.h"
#include "cli/tokenize.h"

struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    int needs_plugins;
    const char *help;
};

static const struct command commands[] = {
    {"model-check", splash_cmd_model_check, 1, "check a model's metadata before downloading weights"},
    {"plugins", splash_cmd_plugins, 1, "list loaded and refused plugins"},
    {"serve", splash_cmd_serve, 1, "serve a model over the OpenAI and Anthropic APIs"},
    {"pull", splash_cmd_pull, 1, "install a Hub model as serve does, without serving it"},
    {"prepare", splash_cmd_prepare, 1, "check and assemble local model files; print the directory"},
    {"models", splash_cmd_models, 0, "list the installed models"},
    {"list", splash_cmd_models, 0, "the same as models"},
    {"logits", splash_cmd_logits, 1, "teacher-forced logits of a token sequence"},
    {"template", splash_cmd_template, 0, "render a request with a chat template"},
    {"tokenize", splash_cmd_tokenize, 0, "print the token ids of a text"},
    {"detokenize", splash_cmd_detokenize, 0, "print the text of token ids"},
    {"engine", splash_cmd_engine, 1, "(internal) the engine process splash serve runs"},
    {"make-model", splash_cmd_make_model, 1, "write a random-weight model for tests and benchmarks"},
    {"run", splash_cmd_run, 1, "generate text from a prompt, with prompt and generation speed"},
    {"bench", splash_cmd_bench, 1, "time prefill and decode like llama-bench"},
    {"claude", splash_cmd_claude, 0, "run Claude Code against the running server"},
    {"codex", splash_cmd_codex, 0, "run Codex against the running server"},
    {"opencode", splash_cmd_opencode, 0, "run OpenCode against the running server"},
    {"pi", splash_cmd_pi, 0, "run Pi against the running server"},
    {"hermes", splash_cmd_hermes, 0, "run Hermes against the running server"},
    {"wait-ready", splash_cmd_wait_ready, 0, "wait until a server's /ready answers (systemd, Docker)"},
};

static int internal(const struct command *c)
{
    return !strncmp(c->help, "(internal)", 10);
}

/* The agent launchers hand every argument, --help included, to the client they start
 * (after configuring it): completions and the man page must not run them. */
static int passes_arguments(const struct command *c)
{
    static const char *const launchers[] = {"claude", "codex", "opencode", "pi", "hermes"};
    for (size_t i = 0; i < sizeof launchers / sizeof launchers[0]; i++)
        if (!strcmp(c->name, launchers[i]))
            return 1;
    return 0;
}

/* One subcommand a line, for the shell completions and the man page: name, summary and,
 * for a command whose --help is not splash's (a launcher), "passes-arguments". */
static void list_commands(void)
{
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!internal(&commands[i]))
            printf("%s\t%s%s\n", commands[i].name, commands[i].help,
                   passes_arguments(&commands[i]) ? "\tpasses-arguments" : "");
}

static void usage(FILE *out)
{
    fprintf(out, "usage: splash COMMAND [OPTIONS]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(out, "  %-12s %s\n", commands[i].name, commands[i].help);
    fprintf(out, "\n  --version    print the version\n"
                 "  --list-commands  print each command and its summary, tab-separated\n"
                 "  --list-models    print the installed models' IDs, one a line\n");
    fprintf(out, "\nThe agent launchers (claude, codex, opencode, pi, hermes) find the server by "
                 "its runtime lock,\ntake --port PORT (or SPLASH_PORT) for a server on another "
                 "port, and pass every other\nargument to the agent; start the agent's own "
                 "arguments with -- to pass its own --port.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
        printf("splash %s\n", SPLASH_VERSION);
        return 0;
    }
    if (!strcmp(argv[1], "--list-commands")) {
        list_commands();
        return 0;
    }
    if (!strcmp(argv[1], "--list-models"))
        return splash_list_installed_models();
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "help") || !strcmp(argv[1], "-h")) {
        usage(stdout);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        if (strcmp(argv[1], commands[i].name))
            continue;
        int sub_argc = argc - 1;
        char **sub_argv = argv + 1;
        if (commands[i].needs_plugins)
            cli_load_plugins(&sub_argc, sub_argv);
        return commands[i].run(sub_argc, sub_argv);
    }
    fprintf(stderr, "splash: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
