/* The serve side of installation: options in, a model path out (a GGUF or a checkpoint directory), lines on the console. */
#include "server/hub/serve_install.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/registry.h"
#include "core/target.h"
#include "server/console.h"
#include "server/hub/install.h"
#include "server/hub/prepare.h"
#include "server/hub/retire.h"
#include "server/options.h"

static void console_line(const char *line)
{
    splash_console_line(SPLASH_CONSOLE_OUT, "%s", line);
}

int splash_hub_serve_install(const struct splash_serve_opts *o, char *path, size_t path_size,
                             char *msg, size_t msg_size)
{
    struct splash_install_request req = {.model = o->model, .revision = o->revision,
                                         .offline = o->offline,
                                         .language_only = o->language_only,
                                         .draft_model = o->draft_model,
                                         .registry = splash_registry_global(),
                                         .line = console_line, .tty = isatty(2)};
    struct splash_installed inst;
    struct splash_err err;
    if (splash_install(&req, &inst, &err)) {
        snprintf(msg, msg_size, "--model: %s", err.msg);
        return -1;
    }
    if (inst.draft_repo[0] || inst.draft_dir[0])
        splash_console_line(SPLASH_CONSOLE_OUT,
                            "Draft · %s%s%.12s installed beside it; this build decodes without "
                            "it (speculative decoding is not available yet)",
                            inst.draft_repo[0] ? inst.draft_repo : inst.draft_dir,
                            inst.draft_repo[0] ? " at " : "", inst.draft_commit);
    /* held until the server exits: a later installation keeps this assembly and its files */
    if (splash_hub_hold(inst.dir) < 0)
        splash_console_line(SPLASH_CONSOLE_ERR, "Warning · %s: cannot hold it; a newer "
                                                "installation may remove it", inst.dir);
    snprintf(path, path_size, "%s", inst.target);
    return 0;
}

int splash_hub_serve_prepare(const struct splash_serve_opts *o, char *path, size_t path_size,
                             char *msg, size_t msg_size)
{
    const char *colon = o->model ? strchr(o->model, ':') : NULL;
    /* --draft-model none: decode without a draft (server.md) */
    const char *draft = o->draft_model && strcmp(o->draft_model, "none") ? o->draft_model : NULL;
    struct splash_prepared prep;
    struct splash_err err;
    if (splash_prepare_local_model(splash_registry_global(), o->model_dir,
                                   colon ? colon + 1 : NULL, draft, o->mmproj, NULL,
                                   &prep, &err)) {
        snprintf(msg, msg_size, "--model-dir: %s", err.msg);
        return -1;
    }
    if (splash_hub_hold(prep.dir) < 0)
        splash_console_line(SPLASH_CONSOLE_ERR, "Warning · %s: cannot hold it; a newer "
                                                "preparation may remove it", prep.dir);
    snprintf(path, path_size, "%s", prep.target);
    return 0;
}
