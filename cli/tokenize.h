/* `splash tokenize` and `splash detokenize`: the model's tokenizer from the
 * command line. Each takes argv from the subcommand's name (argv[0]) on and
 * returns the process exit status (0 ok, 1 failure, 2 usage).
 *
 *   splash tokenize --model-dir PATH [--special] TEXT   prints ids, space-separated
 *   splash detokenize --model-dir PATH [--special] ID...  prints the text
 *
 * PATH is a GGUF file or a directory holding tokenizer.json. --special matches
 * control tokens written in TEXT (tokenize) or renders them (detokenize).
 * TEXT "-" reads standard input. Neither command needs plugins. */
#ifndef SPLASH_CLI_TOKENIZE_H
#define SPLASH_CLI_TOKENIZE_H

int splash_cmd_tokenize(int argc, char **argv);
int splash_cmd_detokenize(int argc, char **argv);

#endif
