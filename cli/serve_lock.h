/* splash serve's side of the runtime lock: publish it once the server listens, withdraw it
 * when the server stops. */
#ifndef SPLASH_CLI_SERVE_LOCK_H
#define SPLASH_CLI_SERVE_LOCK_H

#include <stddef.h>

struct splash_app;

/* Writes the lock for app's port; on failure prints a warning (the launchers then cannot find
 * this server, which serves on) and leaves path empty. */
void splash_serve_lock_publish(struct splash_app *app, char *path, size_t size);
/* Removes a published lock (path empty: nothing). */
void splash_serve_lock_withdraw(const char *path);

#endif
