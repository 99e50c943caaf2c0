/* The conversation's affinity key: the routing hint a router in front of several
 * replicas hashes on so that a conversation keeps landing on the replica that holds
 * its prefix cache. Read from a request once, echoed as X-Splash-Affinity
 * (docs/scale-out.md "Affinity key"). */
#ifndef SPLASH_SERVER_AFFINITY_H
#define SPLASH_SERVER_AFFINITY_H

#include <jansson.h>
#include <stddef.h>

struct splash_http_request;
struct splash_http_reply;

/* The longest key echoed as given; longer or unprintable keys are echoed hashed. */
#define SPLASH_AFFINITY_MAX 128

enum splash_affinity_api {
    SPLASH_AFFINITY_OPENAI,    /* prompt_cache_key, user */
    SPLASH_AFFINITY_ANTHROPIC, /* metadata.user_id */
};

/* What a request carries besides its body. */
struct splash_affinity_hints {
    const char *header;        /* X-Session-Affinity */
    const char *agent_session; /* an agent's own session header (Claude Code, Codex) */
    const char *client_addr;   /* the peer's address as text, or NULL */
};

/* Picks the key: X-Session-Affinity, then the body's prompt_cache_key (OpenAI) or
 * metadata.user_id (Anthropic), then an agent's session header, then OpenAI's user,
 * then "addr:<client address>". Writes it to out (at most 7 + 2 * 16 + 1 bytes past
 * SPLASH_AFFINITY_MAX). Returns 0, or -1 with msg naming the field of the wrong type. */
int splash_affinity_pick(const json_t *body, enum splash_affinity_api api,
                         const struct splash_affinity_hints *hints, char *out, size_t out_size,
                         char *msg, size_t msg_size);

/* The agent session header a request carries (docs/scale-out.md lists them). */
const char *splash_affinity_agent_header(const struct splash_http_request *req);

/* Picks the request's key and sets it on the reply for the X-Splash-Affinity header.
 * Returns 0, or -1 with a 400 in the API's shape already in reply. */
int splash_affinity_take(const struct splash_http_request *req, const json_t *body,
                         enum splash_affinity_api api, struct splash_http_reply *reply);

#endif
