/* splash: one binary, subcommands. */
#include <stdio.h>
#include <string.h>

#include "cli/agents.h"
#include "cli/commands.h"
#include "cli/logits.h"
#include "cli/model_cmds.h"
#include "cli/tokenize.h"

enum command_flags {
    NEEDS_PLUGINS = 1,    /* loads the plugins before it runs */
    PASSES_ARGUMENTS = 2, /* an agent launcher: every argument, --help too, goes to its client */
};

struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    int flags; /* enum command_flags */
    const char *help;
};

static const struct command commands[] = {
    {"model-check", splash_cmd_model_check, NEEDS_PLUGINS, "check a model's metadata before downloading weights"},
    {"plugins", splash_cmd_plugins, NEEDS_PLUGINS, "list loaded and refused plugins"},
    {"serve", splash_cmd_serve, NEEDS_PLUGINS, "serve a model over the OpenAI and Anthropic APIs"},
    {"pull", splash_cmd_pull, NEEDS_PLUGINS, "install a Hub model as serve does, without serving it"},
    {"prepare", splash_cmd_prepare, NEEDS_PLUGINS, "check and assemble local model files; print the directory"},
    {"models", splash_cmd_models, 0, "list the installed models"},
    {"list", splash_cmd_models, 0, "the same as models"},
    {"logits", splash_cmd_logits, NEEDS_PLUGINS, "teacher-forced logits of a token sequence"},
    {"template", splash_cmd_template, 0, "render a request with a chat template"},
    {"tokenize", splash_cmd_tokenize, 0, "print the token ids of a text"},
    {"detokenize", splash_cmd_detokenize, 0, "print the text of token ids"},
    {"engine", splash_cmd_engine, NEEDS_PLUGINS, "(internal) the engine process splash serve runs"},
    {"make-model", splash_cmd_make_model, NEEDS_PLUGINS, "write a random-weight model for tests and benchmarks"},
    {"run", splash_cmd_run, NEEDS_PLUGINS, "generate text from a prompt, with prompt and generation speed"},
    {"bench", splash_cmd_bench, NEEDS_PLUGINS, "time prefill and decode like llama-bench"},
    {"claude", splash_cmd_claude, PASSES_ARGUMENTS, "run Claude Code against the running server"},
    {"codex", splash_cmd_codex, PASSES_ARGUMENTS, "run Codex against the running server"},
    {"opencode", splash_cmd_opencode, PASSES_ARGUMENTS, "run OpenCode against the running server"},
    {"pi", splash_cmd_pi, PASSES_ARGUMENTS, "run Pi against the running server"},
    {"hermes", splash_cmd_hermes, PASSES_ARGUMENTS, "run Hermes against the running server"},
    {"wait-ready", splash_cmd_wait_ready, 0, "wait until a server's /ready answers (systemd, Docker)"},
};

static int internal(const struct command *c)
{
    return !strncmp(c->help, "(internal)", 10);
}

/* One subcommand a line, for the shell completions and the man page: name, summary and,
 * for a command whose --help is not splash's (a launcher), "passes-arguments". */
static void list_commands(void)
{
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!internal(&commands[i]))
            printf("%s\t%s%s\n", commands[i].name, commands[i].help,
                   (commands[i].flags & PASSES_ARGUMENTS) ? "\tpasses-arguments" : "");
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
        if (commands[i].flags & NEEDS_PLUGINS)
            cli_load_plugins(&sub_argc, sub_argv);
        return commands[i].run(sub_argc, sub_argv);
    }
    fprintf(stderr, "splash: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
