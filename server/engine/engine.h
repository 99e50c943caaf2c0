/* The engine process: loads the model and runs the continuous-batching loop,
 * answering the front's frames on one file descriptor. */
#ifndef SPLASH_ENGINE_ENGINE_H
#define SPLASH_ENGINE_ENGINE_H

#include <stdint.h>

struct splash_engine_opts {
    int fd;                  /* the socketpair end to the front */
    const char *model_path;  /* GGUF file, split part or directory */
    int n_threads;           /* 0: physical cores */
    int kv_format;           /* enum splash_kv_format */
    int state_format;        /* enum splash_state_format */
    int64_t max_context;     /* 0: the model's native window */
    int fit_context;         /* a restart: serve what the budget holds of max_context */
    uint64_t max_memory;     /* --max-memory, 0 = auto */
    uint64_t expert_memory;  /* --expert-memory: 0 auto, UINT64_MAX off, else bytes */
    int max_lanes;           /* requests decoding at once (0: 16) */
    int prefill_chunk;       /* prompt tokens per step while others decode (0: 256) */
    double decode_share;     /* decode time owed per unit of prefill time (server.md) */
    int prefix_cache_off;    /* every prompt prefilled whole (benches' cold runs) */
    int speculative;         /* enum splash_spec_mode (server/engine/speculate.h); 0: off */
    int verify_rows_all;     /* --verify-rows all: every cycle verifies every row it may */
    const char *draft_model; /* --draft-model: a DFlash2 draft directory, NULL or "none": none */
    int64_t cache_disk;      /* the prefix cache's SSD tier: 0 off, -1 auto, else a quota */
    uint64_t cache_disk_writes; /* its write budget, bytes a day (0: none) */
    const char *cache_disk_dir; /* where its temporary file goes (NULL: $TMPDIR or /tmp) */
    int persistent_cache;    /* keep the SSD tier across restarts (server.md) */
    const char *cache_dir;   /* its root (NULL: $XDG_CACHE_HOME/splash/prefix-cache) */
    double cache_lock_wait;  /* seconds to wait for another engine's namespace (0: 20) */
};

/* Runs until SHUTDOWN, end of stream or a fatal error; returns the exit status
 * (0 clean, 1 failed start, 3 runtime failure). */
int splash_engine_main(const struct splash_engine_opts *opts);

#endif
