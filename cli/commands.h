/* The splash subcommands. Each takes argv after the subcommand name's position
 * (argv[0] is the subcommand) and returns the process exit status. */
#ifndef SPLASH_CLI_COMMANDS_H
#define SPLASH_CLI_COMMANDS_H

struct splash_registry;

int splash_cmd_plugins(int argc, char **argv);
int splash_cmd_model_check(int argc, char **argv);
int splash_cmd_serve(int argc, char **argv);
int splash_cmd_template(int argc, char **argv);
int splash_cmd_engine(int argc, char **argv);
int splash_cmd_pull(int argc, char **argv);
int splash_cmd_models(int argc, char **argv);
int splash_cmd_wait_ready(int argc, char **argv);
/* `splash --list-models`: installed models' IDs on stdout (cli/installed_models.c). */
int splash_list_installed_models(void);
int splash_cmd_prepare(int argc, char **argv);

/* Loads plugins into the global registry: --plugin-dir values first, then the
 * default search path. Removes the --plugin-dir options it consumed from argv and
 * puts them first in SPLASH_PLUGIN_PATH, so the engine serve starts searches them too. */
struct splash_registry *cli_load_plugins(int *argc, char **argv);

#endif
