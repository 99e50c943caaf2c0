/* splash: one binary, subcommands. */
#include <stdio.h>
#include <string.h>

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
};

static void usage(FILE *out)
{
    fprintf(out, "usage: splash COMMAND [OPTIONS]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(out, "  %-12s %s\n", commands[i].name, commands[i].help);
    fprintf(out, "\n  --version    print the version\n");
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
