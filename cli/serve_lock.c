/* The runtime lock as splash serve fills it. */
#include "cli/serve_lock.h"

#include <stdio.h>
#include <string.h>

#include "cli/runtime_lock.h"
#include "server/app.h"
#include "server/chat/template_probe.h"
#include "server/console.h"

void splash_serve_lock_publish(struct splash_app *app, char *path, size_t size)
{
    struct splash_runtime_lock l;
    memset(&l, 0, sizeof l);
    l.port = app->opts->port;
    snprintf(l.host, sizeof l.host, "%s", app->opts->host);
    snprintf(l.model, sizeof l.model, "%s", splash_app_model_reported(app));
    l.context = splash_app_context(app);
    snprintf(l.later_system, sizeof l.later_system, "%s",
             splash_later_system_name((enum splash_later_system)app->later_system));
    /* it reasons where its template thinks by default or renders efforts (/v1/models) */
    json_t *thinks = json_object_get(app->reasoning, "thinks");
    l.reasoning = json_is_true(thinks) || json_array_size(json_object_get(app->reasoning, "efforts"));
    struct splash_err err;
    if (splash_runtime_lock_write(&l, app->opts->api_key, path, size, &err) != SPLASH_OK) {
        splash_console_line(SPLASH_CONSOLE_ERR,
                            "Warning · runtime lock not written, so splash claude, codex, "
                            "opencode, pi and hermes cannot find this server: %s",
                            err.msg);
        path[0] = 0;
    }
}

void splash_serve_lock_withdraw(const char *path)
{
    if (path && path[0])
        splash_runtime_lock_remove(path);
}
