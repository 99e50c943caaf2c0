/* Startup probes of a chat template: how it takes a later system message, and what reasoning
 * efforts do to it (models.md "Tokenizer and chat templates", server.md "Default reasoning
 * effort"). Each probe renders conversations with the template; none needs the model. */
#ifndef SPLASH_SERVER_CHAT_TEMPLATE_PROBE_H
#define SPLASH_SERVER_CHAT_TEMPLATE_PROBE_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "server/chat/jinja.h"
#include "splash/status.h"

enum splash_later_system {
    SPLASH_LATER_SYSTEM_NATIVE,      /* renders in place as shipped */
    SPLASH_LATER_SYSTEM_PATCHED,     /* raised or dropped; the patched template renders it */
    SPLASH_LATER_SYSTEM_UNSUPPORTED, /* a request with one gets a 400 */
};

struct splash_later_system_probe {
    enum splash_later_system outcome;
    char reason[256]; /* what the probe found, for the console line */
};

/* "native", "patched", "unsupported" (/status chat_template.later_system). */
const char *splash_later_system_name(enum splash_later_system outcome);

/* Probes template text. special holds the tokenizer's special tokens as template variables
 * (bos_token, eos_token ...; NULL for none). *use receives the template every request must
 * render with: the patched one when the outcome is PATCHED, else the template as shipped
 * (caller frees). Fails only when the template does not parse. */
enum splash_status splash_template_probe_later_system(const char *src, size_t len,
                                                      const json_t *special,
                                                      struct splash_jinja_template **use,
                                                      struct splash_later_system_probe *out,
                                                      struct splash_err *err);

/* The console line: "Chat template · NAME · later system messages: patched (...)". */
void splash_later_system_describe(const struct splash_later_system_probe *p, const char *name,
                                  char *buf, size_t size);

/* ---- reasoning efforts ---------------------------------------------------------------------- */

enum splash_effort {
    SPLASH_EFFORT_NONE,
    SPLASH_EFFORT_MINIMAL,
    SPLASH_EFFORT_LOW,
    SPLASH_EFFORT_MEDIUM,
    SPLASH_EFFORT_HIGH,
    SPLASH_EFFORT_XHIGH,
    SPLASH_EFFORT_MAX,
    SPLASH_EFFORT_COUNT,
};

const char *splash_effort_name(enum splash_effort e);
/* Parses "none" ... "max"; false for anything else. */
bool splash_effort_parse(const char *s, enum splash_effort *out);

/* What efforts do to a template, as /v1/models reports it. */
struct splash_effort_report {
    /* the effort each effort renders as: itself, or the alias standing in where the template
     * rejects it (xhigh for high and max, low for minimal) */
    enum splash_effort render_as[SPLASH_EFFORT_COUNT];
    bool none_by_switch_only; /* rejects none: renders enable_thinking=false alone */
    bool rejected[SPLASH_EFFORT_COUNT]; /* rejected even through its alias */
    int thinks;               /* a request without an effort reasons: 1, 0, or -1 unknown */
    /* the efforts besides none that render differently, each named once */
    enum splash_effort efforts[SPLASH_EFFORT_COUNT];
    size_t n_efforts;
    int default_effort;       /* index into enum splash_effort, or -1 */
};

/* Renders a probe conversation at every effort. A template whose model decides (Flint) reports
 * thinks -1 and no efforts: pass model_decides. */
enum splash_status splash_template_probe_efforts(const struct splash_jinja_template *t,
                                                 const json_t *special, bool model_decides,
                                                 struct splash_effort_report *out,
                                                 struct splash_err *err);

/* The /v1/models "reasoning" object: {"thinks": bool|null, "efforts": [...], "default": ...};
 * default_override (>= 0) is --default-reasoning-effort. */
json_t *splash_effort_report_json(const struct splash_effort_report *r, int default_override);

#endif
