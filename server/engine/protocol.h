/* Frames between the server front and its engine process (over a socketpair).
 * Each frame: a 16-byte header (magic, type, request id, payload length) and a
 * JSON payload. Reads and writes are whole frames; a short or oversized frame is
 * a protocol error that fails the engine. */
#ifndef SPLASH_ENGINE_PROTOCOL_H
#define SPLASH_ENGINE_PROTOCOL_H

#include <jansson.h>
#include <stdint.h>

#include "server/engine/gen_params.h"
#include "splash/status.h"

#define SPLASH_FRAME_MAGIC 0x5350u /* "SP" */
#define SPLASH_FRAME_MAX (64u << 20)

enum splash_frame_type {
    /* front -> engine */
    SPLASH_FRAME_SUBMIT = 1,   /* struct splash_submit, every field present
                                  (splash_submit_to_json) */
    SPLASH_FRAME_CANCEL = 2,   /* {} */
    SPLASH_FRAME_STATUS_REQ = 3,
    SPLASH_FRAME_SHUTDOWN = 4,
    SPLASH_FRAME_RELEASE = 5,  /* free the weights' memory (idle release) */
    /* engine -> front */
    SPLASH_FRAME_READY = 16,   /* {family, architecture, size, n_vocab, n_ctx, ...} */
    SPLASH_FRAME_TOKENS = 17,  /* {t:[ids], lp:[logprobs], top:[[[id,lp],...],...]} */
    SPLASH_FRAME_DONE = 18,    /* {finish_reason, prompt_tokens, cached_tokens, completion_tokens} */
    SPLASH_FRAME_ERROR = 19,   /* {code, message} for one request (id) or the engine (id 0) */
    SPLASH_FRAME_STATUS = 20,  /* {active, waiting, ...} */
    SPLASH_FRAME_LOG = 21,     /* {level, line} */
    SPLASH_FRAME_STARTED = 22, /* {cached}: the request took a lane (quarantine counts only
                                  these), resumed from `cached` prompt tokens of the prefix cache */
};

struct splash_frame {
    uint32_t type;
    uint64_t id;
    json_t *body; /* owned; never NULL after a successful read */
};

/* Writes one frame (the body is serialised compactly). Thread-safe per fd only
 * when the caller serialises writers. */
enum splash_status splash_frame_write(int fd, uint32_t type, uint64_t id, const json_t *body,
                                      struct splash_err *err);
/* The same, giving up after timeout_ms (< 0: never) when the reader leaves it unread:
 * SPLASH_ERR_IO with "unread" in err. Works on non-blocking descriptors. */
enum splash_status splash_frame_write_timeout(int fd, uint32_t type, uint64_t id,
                                              const json_t *body, int timeout_ms,
                                              struct splash_err *err);
/* Blocks for one whole frame. SPLASH_ERR_IO with "closed" on end of stream. */
enum splash_status splash_frame_read(int fd, struct splash_frame *out, struct splash_err *err);
void splash_frame_free(struct splash_frame *f);

/* The SUBMIT frame's body (server/engine/submit_frame.c): every field written, so the
 * reader, which takes no default, refuses a body leaving one out, naming it. */
json_t *splash_submit_to_json(const struct splash_submit *s);
/* Fills s (owning its prompt and parameters: splash_submit_free). */
enum splash_status splash_submit_from_json(const json_t *body, struct splash_submit *s,
                                           struct splash_err *err);
void splash_submit_free(struct splash_submit *s);
/* Writes a SUBMIT frame for request id. */
enum splash_status splash_frame_write_submit(int fd, uint64_t id, const struct splash_submit *s,
                                             struct splash_err *err);

#endif
