/* The settings files the launchers rewrite (Pi's models.json, the Hermes profile's config):
 * read whole, replaced by rename so a client never reads half of one, a rewritten file keeping
 * its mode and a new one private (server.md "Agent launchers"). */
#ifndef SPLASH_CLI_AGENT_FILE_H
#define SPLASH_CLI_AGENT_FILE_H

#include <stddef.h>
#include <sys/types.h>

struct splash_agent_file {
    char path[4096];
    int exists;
    mode_t mode; /* the file's permission bits, or 0600 for a new one */
    char *text;  /* its contents (malloc'ed, NUL-terminated), NULL when it does not exist */
    size_t len;
};

/* Reads path; a missing file is not an error. -1 with msg naming the file otherwise. */
int splash_agent_file_read(const char *path, struct splash_agent_file *f, char *msg,
                           size_t msg_size);
/* Replaces the file with text, making its directory (0700) if needed. -1 with msg. */
int splash_agent_file_write(const struct splash_agent_file *f, const char *text, char *msg,
                            size_t msg_size);
void splash_agent_file_free(struct splash_agent_file *f);

#endif
