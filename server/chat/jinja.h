/* Jinja2 chat templates, rendered as Hugging Face transformers renders them.
 *
 * The environment is transformers' apply_chat_template one: a sandbox with trim_blocks and
 * lstrip_blocks on, loop controls, Jinja2's default Undefined, the tojson filter of
 * json.dumps(ensure_ascii=False) and the globals raise_exception and strftime_now. A template
 * is parsed once and rendered any number of times, from any number of threads at once: the
 * parsed template is read-only during rendering. */
#ifndef SPLASH_SERVER_CHAT_JINJA_H
#define SPLASH_SERVER_CHAT_JINJA_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "splash/status.h"

struct splash_jinja_template;

/* Sandbox bounds; a zero member takes its default. */
struct splash_jinja_limits {
    size_t max_output;    /* bytes of rendered text (default 64 MiB) */
    size_t max_memory;    /* bytes of values made while rendering (default 512 MiB) */
    uint64_t max_steps;   /* loop iterations and macro calls, all told (default 10,000,000) */
    unsigned max_depth;   /* nested macro calls (default 200) */
};

struct splash_jinja_render_opts {
    const struct splash_jinja_limits *limits; /* NULL: defaults */
    int64_t now; /* strftime_now's clock, Unix seconds, local time; 0 = the current time */
    /* (optional) a failure's whole text besides err, NUL-terminated, cut at message_size:
     * raise_exception's message is the template's own and may quote a request past what
     * splash_err holds ("" after a success) */
    char *message;
    size_t message_size;
};

/* Parses template text. On failure err names the line ("line 12: unexpected 'endfor'"). */
enum splash_status splash_jinja_parse(const char *src, size_t len,
                                      struct splash_jinja_template **out, struct splash_err *err);
void splash_jinja_free(struct splash_jinja_template *t);

/* Renders with the variables of vars (a JSON object: messages, tools, add_generation_prompt,
 * special tokens, extra kwargs). On success *out is a malloc'ed NUL-terminated string of
 * *out_len bytes (the text may itself hold NUL bytes). On failure *out is NULL, err (may be
 * NULL) says why and the status is SPLASH_ERR_INVALID (the template raised, err holding
 * raise_exception's text as given, cut at splash_err's size: opts->message takes it
 * whole; or failed as Python would fail), SPLASH_ERR_NOMEM or SPLASH_ERR_UNSUPPORTED (a
 * sandbox bound). */
enum splash_status splash_jinja_render(const struct splash_jinja_template *t, const json_t *vars,
                                       const struct splash_jinja_render_opts *opts, char **out,
                                       size_t *out_len, struct splash_err *err);

#endif
