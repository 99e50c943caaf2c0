/* The agent launchers, one per client (server.md "Agent launchers"). Each takes argv with
 * argv[0] its subcommand and returns an exit status only when it could not exec the client. */
#ifndef SPLASH_CLI_AGENTS_H
#define SPLASH_CLI_AGENTS_H

int splash_cmd_claude(int argc, char **argv);
int splash_cmd_codex(int argc, char **argv);
int splash_cmd_opencode(int argc, char **argv);
int splash_cmd_pi(int argc, char **argv);
int splash_cmd_hermes(int argc, char **argv);

#endif
