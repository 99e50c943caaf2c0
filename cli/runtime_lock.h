/* A running server's runtime lock (server.md "Files Splash writes": runtime/, the locks of
 * running servers): one small JSON file per port under the data directory, written once the
 * server listens and removed when it stops, from which the agent launchers learn where the
 * server is and what it serves. The API key itself is never written: only the variable that
 * holds it for clients and its SHA-256, so a launcher can tell a wrong key before the client
 * meets 401s. */
#ifndef SPLASH_CLI_RUNTIME_LOCK_H
#define SPLASH_CLI_RUNTIME_LOCK_H

#include <stddef.h>
#include <stdint.h>

#include "splash/status.h"

struct splash_runtime_lock {
    long pid;
    int port;
    char host[256];          /* the --host the server listens on */
    int key_required;        /* the server wants an API key */
    char key_variable[64];   /* where clients find it: SPLASH_API_KEY */
    char key_sha256[65];     /* hex SHA-256 of the key, to check the variable's value */
    char model[512];         /* the model ID the API reports */
    int64_t context;         /* the context limit, tokens */
    char later_system[16];   /* native, patched or unsupported (/status chat_template) */
    int reasoning;           /* the model reasons (its template thinks or takes efforts) */
};

/* runtime/serve-<port>.json under the data directory; create makes the directory (0700). */
enum splash_status splash_runtime_lock_path(int port, int create, char *out, size_t size,
                                            struct splash_err *err);

/* Writes the lock (mode 0600, by rename so a reader never sees half of it). key may be NULL. */
enum splash_status splash_runtime_lock_write(const struct splash_runtime_lock *lock,
                                             const char *key, char *path, size_t path_size,
                                             struct splash_err *err);

/* Removes the lock at path if it is still this process's (a newer server may own it). */
void splash_runtime_lock_remove(const char *path);

/* The live server on port: SPLASH_ERR_NOT_FOUND when there is no lock or its process is gone
 * (a stale lock from a server that was killed), SPLASH_ERR_INVALID naming the file when it is
 * unreadable. */
enum splash_status splash_runtime_lock_read(int port, struct splash_runtime_lock *out,
                                            struct splash_err *err);

/* The ports of every live server's lock, in ascending order; returns how many (at most max). */
int splash_runtime_lock_ports(int *ports, int max);

/* Does key hash to the lock's key_sha256? */
int splash_runtime_lock_key_matches(const struct splash_runtime_lock *lock, const char *key);

#endif
