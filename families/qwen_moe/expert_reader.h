/* The expert store's reads: the model files it reads from, each opened for O_DIRECT
 * (aligned reads around the page cache, where the file system takes them) and plainly,
 * with what it was at the start (device, inode, size, mtime, a digest of its first 4 KiB)
 * to check it unchanged; and a pool of reader threads that read a round's experts
 * (pread, each extent tried twice) and pack them into their slots (kernels' expert_pack).
 * A part is one extent of a file as stored (GGUF), or the planes an import makes it
 * from (an MLX checkpoint's codes, scales and biases, up to three extents, maybe in
 * different shards), imported by the host (expert_import) before the pack.
 * SPLASH_TEST_EXPERT_READ_FAIL=N[:A] (tests): the N-th expert read of each pool (from 1)
 * fails its first A attempts (2 when A is left out: the read fails). */
#ifndef SPLASH_FAMILIES_QWEN_MOE_EXPERT_READER_H
#define SPLASH_FAMILIES_QWEN_MOE_EXPERT_READER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "splash/host.h"
#include "splash/kernels.h"

#define ER_MAX_PARTS 3
#define ER_MAX_EXTENTS SPLASH_EXPERT_MAX_PLANES
#define ER_ALIGN 4096
#define ER_MAX_READERS 64

struct er_file {
    char path[1024];
    int fd_plain, fd_direct; /* fd_direct -1: plain reads only */
    _Atomic int direct_ok;   /* cleared when the file system refuses an O_DIRECT read */
    dev_t dev;
    ino_t ino;
    off_t size;
    int64_t mtime_ns;
    uint64_t digest;
};

/* One part of an expert: its extents in their files, and the import that makes its rows
 * of them (NULL: the one extent holds them as stored). */
struct er_part {
    int32_t n_ext;
    int32_t file[ER_MAX_EXTENTS];
    uint64_t off[ER_MAX_EXTENTS];
    size_t bytes[ER_MAX_EXTENTS];
    const struct splash_expert_planes *import;
    size_t rows_bytes; /* the expert's rows (the import's output) */
};

/* One expert to read: its parts, and where each goes. */
struct er_job {
    int32_t n_parts;
    int32_t key, layer, expert;
    struct er_part part[ER_MAX_PARTS];
    const struct splash_weight *w[ER_MAX_PARTS];
    void *dst[ER_MAX_PARTS];
    int error; /* errno of the failed read (EINVAL: the import failed), 0 when read */
    int32_t failed_part, failed_ext;
    char why[sizeof ((struct splash_err *)0)->msg]; /* the import's message when it failed */
};

struct er_pool {
    const struct splash_kernels *k;
    const struct splash_host *host; /* expert_import */
    struct er_file *files;
    int32_t n_files;
    int n_threads;
    pthread_t *threads;
    size_t staging_bytes; /* per thread */
    pthread_mutex_t lock;
    pthread_cond_t work, done;
    struct er_job *jobs;
    int32_t n_jobs, next, n_done;
    int stop;
    atomic_long reads; /* expert reads started, for the test hook */
};

/* Opens path (once: the index of an already open one is returned) and records what
 * it is now. -1 with err naming the file. */
int32_t er_file_open(struct er_file **files, int32_t *n_files, const char *path,
                     struct splash_err *err);
/* 0 when the file is what er_file_open found; else err names it and what changed. */
int er_file_check(const struct er_file *f, struct splash_err *err);
void er_files_close(struct er_file *files, int32_t n_files);

/* Starts n_threads readers, each with a staging buffer of staging_bytes (er_staging_bytes
 * of the largest part). */
enum splash_status er_pool_start(struct er_pool *p, const struct splash_host *host,
                                 struct er_file *files, int32_t n_files, int n_threads,
                                 size_t staging_bytes, struct splash_err *err);
void er_pool_stop(struct er_pool *p);
/* Bytes of staging one part takes: each extent read aligned, and an import's output. */
size_t er_staging_bytes(const struct er_part *part);
/* The readers take jobs[0..n) (the caller keeps them until er_pool_wait). */
void er_pool_submit(struct er_pool *p, struct er_job *jobs, int32_t n);
void er_pool_wait(struct er_pool *p);
/* Reader threads for this machine, sized for reads in flight rather than CPUs: 8 (4 on
 * one CPU). bench-experts -r on the 2-core test machine, load 6-9, decode tok/s at the 50%
 * store, interleaved (noisy: the same run spans 4.4-14.4): over four rounds 2 readers
 * against 8, Q4_K_M 8.53 / 8.98, Q4_K_S 9.33 / 10.87 (read GB/s while waiting 1.77 / 1.95,
 * 1.48 / 1.89); over two, 4 and 16 readers no better than 8 (16 the slowest); the tiny MLX
 * MoE (9 small reads an expert) at the smallest store, 1000 tokens, two rounds: 1 reader 90,
 * 2 100, 4 116, 8 125, 16 89. */
int er_threads_for_machine(void);
/* The readers a store starts: SPLASH_EXPERT_READERS=N (1 to ER_MAX_READERS; a test and
 * bench hook to compare read depths) when set, else er_threads_for_machine(); -1 with err
 * naming the variable when it is not such a count. */
int er_readers(struct splash_err *err);

#endif
