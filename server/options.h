/* `splash serve` options (server.md "Server options"), their units and
 * environment variables. Refused values and combinations name the flag. */
#ifndef SPLASH_SERVER_OPTIONS_H
#define SPLASH_SERVER_OPTIONS_H

#include <stddef.h>
#include <stdint.h>

#define SPLASH_MAX_LIST 16

struct splash_serve_opts {
    const char *model;          /* OWNER/REPO[:VARIANT], the API's model name */
    const char *model_dir;
    const char *mmproj;
    const char *revision;
    const char *draft_model;
    int language_only, offline;
    int port;                   /* SPLASH_PORT or 8000 */
    const char *host;           /* 127.0.0.1 */
    const char *allowed_hosts[SPLASH_MAX_LIST];
    int n_allowed_hosts;
    const char *allowed_origins[SPLASH_MAX_LIST];
    int n_allowed_origins;
    const char *api_key;        /* SPLASH_API_KEY */
    int no_webui;
    uint64_t max_memory;        /* 0 = auto */
    uint64_t max_context;       /* 0 = auto */
    int kv_format;              /* enum splash_kv_format */
    int state_format;           /* enum splash_state_format */
    uint64_t ple_memory;        /* 0 = auto, UINT64_MAX = off */
    uint64_t expert_memory;     /* likewise */
    uint64_t sparse_kv_memory;  /* 0 = auto */
    double idle_release;        /* seconds; < 0 = off */
    int64_t max_cache_disk;     /* -1 = auto */
    uint64_t max_cache_disk_writes;
    int persistent_cache;
    const char *cache_dir;
    const char *served_names[SPLASH_MAX_LIST];
    int n_served_names;
    int announce_served_name;
    const char *default_reasoning_effort;
    int64_t thinking_token_budget; /* -1 = none */
    const char *thinking_end_text;
    uint64_t max_request_size;  /* 128M */
    uint64_t max_image_pixels;  /* 4194304 */
    double request_timeout;     /* seconds; 0 = none */
    int queue_size;             /* 32 */
    double decode_share;        /* 0.5 */
    int disable_ane;
    const char *activations;    /* auto | bf16 */
    const char *verify_rows;    /* auto | all */
    const char *speculative;    /* auto | dflash | mtp | ngram | off */
    int allow_idle_sleep;
    int threads;                /* 0 = physical cores */
    int demo;                   /* serve the shipped demonstration story model */
};

/* Parses argv (argv[0] is "serve"). On error returns -1 and writes a message
 * naming the flag into msg. `--help` returns 1 after printing the help. */
int splash_serve_opts_parse(struct splash_serve_opts *o, int argc, char **argv, char *msg,
                            size_t msg_size);
void splash_serve_help(void);

#endif
