/* The expert store's reads: the model files it reads from, each opened for O_DIRECT
 * (aligned reads around the page cache, where the file system takes them) and plainly,
 * with what it was at the start (device, inode, size, mtime, a digest of its first 4 KiB)
 * to check it unchanged; and a pool of reader threads that read a round's experts
 * (pread, each part tried twice) and pack them into their slots (kernels' expert_pack).
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
#define ER_ALIGN 4096

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

/* One expert to read: its parts' places in their files, and where each goes. */
struct er_job {
    int32_t n_parts;
    int32_t key, layer, expert;
    int32_t file[ER_MAX_PARTS];
    uint64_t off[ER_MAX_PARTS];
    size_t bytes[ER_MAX_PARTS];
    const struct splash_weight *w[ER_MAX_PARTS];
    void *dst[ER_MAX_PARTS];
    int error;      /* errno of the failed read, 0 when it was read */
    int32_t failed_part;
};

struct er_pool {
    const struct splash_kernels *k;
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

/* Starts n_threads readers, each with a staging buffer for parts of up to max_part_bytes. */
enum splash_status er_pool_start(struct er_pool *p, const struct splash_kernels *k,
                                 struct er_file *files, int32_t n_files, int n_threads,
                                 size_t max_part_bytes, struct splash_err *err);
void er_pool_stop(struct er_pool *p);
/* Bytes of one thread's staging buffer for parts of up to max_part_bytes. */
size_t er_staging_bytes(size_t max_part_bytes);
/* The readers take jobs[0..n) (the caller keeps them until er_pool_wait). */
void er_pool_submit(struct er_pool *p, struct er_job *jobs, int32_t n);
void er_pool_wait(struct er_pool *p);
/* Reader threads for this machine: its CPUs, 2 to 8. */
int er_threads_for_machine(void);

#endif
