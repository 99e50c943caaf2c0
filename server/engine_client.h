/* The front's side of the engine process: spawning, supervision with restarts
 * and backoff, and per-request event queues fed by one reader thread. */
#ifndef SPLASH_SERVER_ENGINE_CLIENT_H
#define SPLASH_SERVER_ENGINE_CLIENT_H

#include <jansson.h>
#include <stdint.h>

#include "server/engine/protocol.h"

enum splash_engine_state {
    SPLASH_ENGINE_STARTING = 0,
    SPLASH_ENGINE_READY = 1,
    SPLASH_ENGINE_RECOVERING = 2, /* restarting after a failure */
    SPLASH_ENGINE_FAILED = 3,     /* stopped for good: requests get 500 engine_failed */
    SPLASH_ENGINE_STOPPED = 4,
};

struct splash_engine_spawn {
    const char *exe;          /* this binary */
    const char *model_path;
    int threads, kv_format, state_format;
    int64_t max_context;
    uint64_t max_memory;
    uint64_t expert_memory;   /* --expert-memory: 0 auto, UINT64_MAX off, else bytes */
    double decode_share;
    const char *speculative;  /* --speculative, NULL: auto */
    int verify_rows_all;      /* --verify-rows all */
    const char *draft_model;  /* --draft-model, NULL: none */
    int64_t cache_disk;          /* --max-cache-disk: 0 off, -1 auto, else bytes */
    uint64_t cache_disk_writes;  /* --max-cache-disk-writes */
    int persistent_cache;        /* --persistent-cache */
    const char *cache_dir;       /* --cache-dir (NULL: the default root) */
};

enum splash_event_kind { SPLASH_EV_TOKENS = 1, SPLASH_EV_DONE = 2, SPLASH_EV_ERROR = 3 };

struct splash_event {
    enum splash_event_kind kind;
    json_t *body; /* owned by the receiver */
};

struct splash_engine_client;
struct splash_pending;

struct splash_engine_client *splash_engine_client_start(const struct splash_engine_spawn *spawn);
/* Graceful stop: SHUTDOWN, SIGTERM, then SIGKILL after 15 s (or at once if `now`).
 * interrupted (optional) is polled every 100 ms while waiting; when it returns
 * nonzero (a second Ctrl+C) the engine is killed at once. */
void splash_engine_client_stop(struct splash_engine_client *c, int now, int (*interrupted)(void));
/* Blocks until the first start succeeds or fails; returns the state. */
enum splash_engine_state splash_engine_client_wait_ready(struct splash_engine_client *c);

/* State, the last failure's text, seconds until the restart should be ready, the
 * READY frame's body (borrowed), restarts so far. */
enum splash_engine_state splash_engine_client_state(struct splash_engine_client *c, char *why,
                                                    size_t why_size, int *retry_after);
json_t *splash_engine_client_info(struct splash_engine_client *c);
/* The streamed experts' store as the engine last reported it (a request's end, or a chunk
 * given back or taken back): a copy, or NULL before any report of this engine (its READY
 * frame's then stands). */
void splash_engine_client_note_experts(struct splash_engine_client *c, json_t *experts);
json_t *splash_engine_client_experts(struct splash_engine_client *c);
int splash_engine_client_restarts(struct splash_engine_client *c);
/* The exit status serve should end with once the engine stopped for good (69). */
int splash_engine_client_exit_status(struct splash_engine_client *c);

/* Asks the engine to release its weights' memory (restored on the next request). */
void splash_engine_client_release(struct splash_engine_client *c);

/* Submits a request; NULL with code/message filled (engine_recovering, engine_failed,
 * request_quarantined) when it cannot be taken. */
struct splash_pending *splash_engine_submit(struct splash_engine_client *c,
                                            const struct splash_submit *submit, const char **code,
                                            char *message, size_t msg_size, int *retry_after);
/* Waits for the next event; 0 on timeout (timeout_ms >= 0), 1 with ev filled. */
int splash_pending_next(struct splash_pending *p, struct splash_event *ev, int timeout_ms);
void splash_pending_cancel(struct splash_pending *p);
/* The request number the console's Started/Done lines use. */
uint64_t splash_pending_id(const struct splash_pending *p);
/* Frees the pending request (cancelling it if still running). */
void splash_pending_release(struct splash_pending *p);

#endif
