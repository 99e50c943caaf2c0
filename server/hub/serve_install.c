/* The serve side of installation: options in, a model path out (a GGUF or a checkpoint directory), lines on the console. */
#include "server/hub/serve_install.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/model_check.h"
#include "core/registry.h"
#include "core/target.h"
#include "server/console.h"
#include "server/hub/draft.h"
#include "server/hub/env.h"
#include "server/hub/install.h"
#include "server/hub/prepare.h"
#include "server/hub/retire.h"
#include "server/options.h"

static void console_line(const char *line)
{
    splash_console_line(SPLASH_CONSOLE_OUT, "%s", line);
}

/* The draft the engine loads: the one installed beside the target (the family's, or
 * --draft-model's repository or directory), unless --speculative leaves drafts out. */
static int choose_draft(const struct splash_serve_opts *o, const struct splash_installed *inst,
                        char *draft, size_t draft_size, char *msg, size_t msg_size)
{
    draft[0] = 0;
    int unused = !strcmp(o->speculative, "ngram") || !strcmp(o->speculative, "off");
    if (!inst->draft_repo[0] && !inst->draft_dir[0]) {
        if (!strcmp(o->speculative, "dflash")) {
            snprintf(msg, msg_size, "--speculative dflash: %s has no draft installed beside it "
                                    "(its family names none for this model); pass --draft-model "
                                    "OWNER/REPO or a directory",
                     o->model);
            return -1;
        }
        return 0;
    }
    if (!unused && snprintf(draft, draft_size, "%s/draft", inst->dir) >= (int)draft_size) {
        snprintf(msg, msg_size, "--model: the draft's path under %s is too long", inst->dir);
        return -1;
    }
    splash_console_line(SPLASH_CONSOLE_OUT, "Draft · %s%s%.12s installed beside it; %s",
                        inst->draft_repo[0] ? inst->draft_repo : inst->draft_dir,
                        inst->draft_repo[0] ? " at " : "", inst->draft_commit,
                        unused ? (!strcmp(o->speculative, "off")
                                      ? "--speculative off leaves it unused"
                                      : "--speculative ngram leaves it unused")
                               : "decode cycles draft with it (--draft-model none turns it off)");
    return 0;
}

int splash_hub_serve_install(const struct splash_serve_opts *o, char *path, size_t path_size,
                             char *draft, size_t draft_size, char *msg, size_t msg_size)
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
    if (choose_draft(o, &inst, draft, draft_size, msg, msg_size))
        return -1;
    /* held until the server exits: a later installation keeps this assembly and its files */
    if (splash_hub_hold(inst.dir) < 0)
        splash_console_line(SPLASH_CONSOLE_ERR, "Warning · %s: cannot hold it; a newer "
                                                "installation may remove it", inst.dir);
    snprintf(path, path_size, "%s", inst.target);
    return 0;
}

/* A local model's family draft, as --model installs it beside a Hub target: the snapshot
 * the Hugging Face cache already holds (a local model starts without asking the Hub); dir ""
 * when the family names none for the model's size or the cache lacks it (said in a line). */
static void family_draft_cached(const char *target, char *dir, size_t size)
{
    dir[0] = 0;
    struct splash_check_result res;
    struct splash_err err;
    struct splash_hub_env env;
    memset(&res, 0, sizeof res);
    if (splash_model_check(splash_registry_global(), target, &res, &err) != SPLASH_OK ||
        !res.ok || !res.verdict.draft_repo[0]) {
        splash_check_result_free(&res);
        return;
    }
    if (splash_hub_env_read(&env, &err) != SPLASH_OK ||
        splash_hub_draft_cached(env.cache, res.verdict.draft_repo, dir, size, &err) != SPLASH_OK)
        dir[0] = 0;
    if (!dir[0])
        splash_console_line(SPLASH_CONSOLE_OUT,
                            "Draft · the family names %s for %s, which the Hugging Face cache "
                            "does not hold; decoding without it (--draft-model %s fetches it)",
                            res.verdict.draft_repo, res.verdict.size_name[0] ? res.verdict.size_name
                                                                             : "this model",
                            res.verdict.draft_repo);
    splash_check_result_free(&res);
}

int splash_hub_serve_prepare(const struct splash_serve_opts *o, char *path, size_t path_size,
                             char *draft_path, size_t draft_size, char *msg, size_t msg_size)
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
    /* without --draft-model: the family's draft where the Hub cache holds it, prepared
     * beside the target as --draft-model DIR would be */
    char cached[PATH_MAX] = "";
    if (!o->draft_model && !strcmp(o->speculative, "auto"))
        family_draft_cached(prep.target, cached, sizeof cached);
    if (cached[0]) {
        struct splash_prepared with;
        if (splash_prepare_local_model(splash_registry_global(), o->model_dir,
                                       colon ? colon + 1 : NULL, cached, o->mmproj, NULL, &with,
                                       &err) == SPLASH_OK) {
            if (splash_hub_hold(with.dir) < 0)
                splash_console_line(SPLASH_CONSOLE_ERR, "Warning · %s: cannot hold it; a newer "
                                                        "preparation may remove it", with.dir);
            prep = with;
            draft = cached;
            splash_console_line(SPLASH_CONSOLE_OUT,
                                "Draft · %s from the Hugging Face cache, the family's for this "
                                "model; decode cycles draft with it (--draft-model none turns it "
                                "off)",
                                cached);
        } else {
            splash_console_line(SPLASH_CONSOLE_OUT,
                                "Draft · %s from the Hugging Face cache is not used: %s", cached,
                                err.msg);
        }
    }
    snprintf(path, path_size, "%s", prep.target);
    /* the draft's files as the assembly links them, checked with the target's */
    draft_path[0] = 0;
    if (draft && snprintf(draft_path, draft_size, "%s/draft", prep.dir) >= (int)draft_size) {
        snprintf(msg, msg_size, "--draft-model: the draft's path under %s is too long", prep.dir);
        return -1;
    }
    return 0;
}
