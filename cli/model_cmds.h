/* `splash make-model`, `splash run` and `splash bench`: random-weight models for
 * tests and benchmarks, streaming generation, and llama-bench-like timings. Each
 * takes argv from the subcommand's name (argv[0]) on and returns the process exit
 * status (0 ok, 1 failure, 2 usage). All three need the plugins loaded.
 *
 *   splash make-model --arch A (--shape NAME | --dims K=V,...) [--type MIX] [--vocab N]
 *                     [--seed N] [--threads N] --out FILE
 *   splash run --model-dir PATH [--prompt TEXT] [-n N] [--temp T] [--top-k K] [--top-p P]
 *              [--min-p P] [--seed N] [--repeat-penalty R] [--threads N]
 *   splash bench --model-dir PATH [-p 512] [-n 128] [--threads N] [--json] */
#ifndef SPLASH_CLI_MODEL_CMDS_H
#define SPLASH_CLI_MODEL_CMDS_H

int splash_cmd_make_model(int argc, char **argv);
int splash_cmd_run(int argc, char **argv);
int splash_cmd_bench(int argc, char **argv);

#endif
