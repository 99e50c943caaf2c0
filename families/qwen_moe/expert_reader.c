/* The expert store's files and reader threads (see expert_reader.h). */
#include "families/qwen_moe/expert_reader.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* FNV-1a over the file's first 4 KiB: a rewrite that keeps size and mtime still shows. */
static int header_digest(int fd, uint64_t *out)
{
    unsigned char buf[4096];
    ssize_t n = pread(fd, buf, sizeof buf, 0);
    if (n < 0)
        return -1;
    uint64_t h = 1469598103934665603ull;
    for (ssize_t i = 0; i < n; i++)
        h = (h ^ buf[i]) * 1099511628211ull;
    *out = h;
    return 0;
}

static int64_t mtime_ns(const struct stat *sb)
{
    return (int64_t)sb->st_mtim.tv_sec * 1000000000 + sb->st_mtim.tv_nsec;
}

int32_t er_file_open(struct er_file **files, int32_t *n_files, const char *path,
                     struct splash_err *err)
{
    for (int32_t i = 0; i < *n_files; i++)
        if (!strcmp((*files)[i].path, path))
            return i;
    struct er_file *grown = realloc(*files, (size_t)(*n_files + 1) * sizeof *grown);
    if (!grown) {
        splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory");
        return -1;
    }
    *files = grown;
    struct er_file *f = &grown[*n_files];
    memset(f, 0, sizeof *f);
    snprintf(f->path, sizeof f->path, "%s", path);
    f->fd_plain = open(path, O_RDONLY | O_CLOEXEC);
    struct stat sb;
    if (f->fd_plain < 0 || fstat(f->fd_plain, &sb) != 0 || header_digest(f->fd_plain, &f->digest)) {
        splash_err_set(err, SPLASH_ERR_IO, "%s: %s (streamed experts read from it)", path,
                       strerror(errno));
        if (f->fd_plain >= 0)
            close(f->fd_plain);
        return -1;
    }
    f->dev = sb.st_dev;
    f->ino = sb.st_ino;
    f->size = sb.st_size;
    f->mtime_ns = mtime_ns(&sb);
    /* a file system without O_DIRECT (tmpfs) refuses the open or the first read */
    f->fd_direct = open(path, O_RDONLY | O_CLOEXEC | O_DIRECT);
    atomic_init(&f->direct_ok, f->fd_direct >= 0);
    return (*n_files)++;
}

int er_file_check(const struct er_file *f, struct splash_err *err)
{
    struct stat open_sb, path_sb;
    uint64_t digest;
    if (fstat(f->fd_plain, &open_sb) != 0 || stat(f->path, &path_sb) != 0 ||
        header_digest(f->fd_plain, &digest) != 0) {
        splash_err_set(err, SPLASH_ERR_IO, "%s: %s (a streamed expert's file)", f->path,
                       strerror(errno));
        return -1;
    }
    const char *what = NULL;
    if (path_sb.st_dev != f->dev || path_sb.st_ino != f->ino)
        what = "replaced";
    else if (open_sb.st_size != f->size)
        what = "resized";
    else if (mtime_ns(&open_sb) != f->mtime_ns)
        what = "modified";
    else if (digest != f->digest)
        what = "rewritten (its header differs)";
    if (!what)
        return 0;
    splash_err_set(err, SPLASH_ERR_IO,
                   "%s: the model file was %s while it served; its streamed experts cannot be "
                   "read (restart the server to load it again)",
                   f->path, what);
    return -1;
}

void er_files_close(struct er_file *files, int32_t n_files)
{
    for (int32_t i = 0; i < n_files; i++) {
        if (files[i].fd_plain >= 0)
            close(files[i].fd_plain);
        if (files[i].fd_direct >= 0)
            close(files[i].fd_direct);
    }
    free(files);
}

/* ---- the failure hook (tests) -------------------------------------------------------- */

/* 1 when this attempt of the current read is to fail (SPLASH_TEST_EXPERT_READ_FAIL). */
static int hook_fails(long read_no, int attempt)
{
    const char *v = getenv("SPLASH_TEST_EXPERT_READ_FAIL");
    if (!v || !*v)
        return 0;
    char *end;
    long n = strtol(v, &end, 10);
    long attempts = *end == ':' ? strtol(end + 1, NULL, 10) : 2;
    return read_no == n && attempt < attempts;
}

/* ---- reading -------------------------------------------------------------------------- */

/* Staging for one extent of `bytes`: the aligned span an O_DIRECT read covers. */
static size_t extent_staging(size_t bytes)
{
    return (bytes + 2 * ER_ALIGN + ER_ALIGN - 1) / ER_ALIGN * ER_ALIGN;
}

size_t er_staging_bytes(const struct er_part *part)
{
    size_t b = 0;
    for (int32_t x = 0; x < part->n_ext; x++)
        b += extent_staging(part->bytes[x]);
    if (part->import)
        b += (part->rows_bytes + ER_ALIGN - 1) / ER_ALIGN * ER_ALIGN;
    return b;
}

static int read_all(int fd, char *buf, size_t len, uint64_t off, size_t need)
{
    size_t got = 0;
    while (got < len) {
        ssize_t r = pread(fd, buf + got, len - got, (off_t)(off + got));
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return errno ? errno : EIO;
        }
        if (r == 0)
            break;
        got += (size_t)r;
    }
    return got >= need ? 0 : EIO;
}

/* One part into staging; returns where its bytes start, or NULL with *error set. */
static const char *read_part(struct er_file *f, uint64_t off, size_t bytes, char *staging,
                             int *error)
{
    if (atomic_load_explicit(&f->direct_ok, memory_order_relaxed)) {
        uint64_t a0 = off / ER_ALIGN * ER_ALIGN;
        size_t len = (size_t)((off + bytes + ER_ALIGN - 1) / ER_ALIGN * ER_ALIGN - a0);
        int e = read_all(f->fd_direct, staging, len, a0, (size_t)(off - a0) + bytes);
        if (!e)
            return staging + (off - a0);
        if (e != EINVAL) {
            *error = e;
            return NULL;
        }
        /* the file system does not read this file around its cache */
        atomic_store_explicit(&f->direct_ok, 0, memory_order_relaxed);
    }
    int e = read_all(f->fd_plain, staging, bytes, off, bytes);
    if (e) {
        *error = e;
        return NULL;
    }
    return staging;
}

static void run_job(struct er_pool *p, struct er_job *j, char *staging)
{
    long read_no = atomic_fetch_add(&p->reads, 1) + 1;
    j->error = 0;
    j->why[0] = '\0';
    for (int32_t part = 0; part < j->n_parts; part++) {
        const struct er_part *pt = &j->part[part];
        const void *src[ER_MAX_EXTENTS] = {NULL};
        char *at = staging;
        for (int32_t x = 0; x < pt->n_ext; x++) {
            for (int attempt = 0; attempt < 2 && !src[x]; attempt++) {
                int error = 0;
                if (hook_fails(read_no, attempt))
                    error = EIO;
                else
                    src[x] =
                        read_part(&p->files[pt->file[x]], pt->off[x], pt->bytes[x], at, &error);
                if (!src[x])
                    j->error = error;
            }
            if (!src[x]) {
                j->failed_part = part;
                j->failed_ext = x;
                return;
            }
            j->error = 0;
            at += extent_staging(pt->bytes[x]);
        }
        const void *rows = src[0];
        if (pt->import) {
            /* the planes into the expert's rows, as the whole import makes them */
            struct splash_err why = {{0}};
            if (p->host->expert_import(pt->import, src, at, &why)) {
                j->error = EINVAL;
                j->failed_part = part;
                j->failed_ext = 0;
                snprintf(j->why, sizeof j->why, "%s", why.msg);
                return;
            }
            rows = at;
        }
        p->k->expert_pack(j->w[part], rows, j->dst[part]);
    }
}

static void *reader_main(void *arg)
{
    struct er_pool *p = arg;
    char *staging = aligned_alloc(ER_ALIGN, p->staging_bytes);
    pthread_mutex_lock(&p->lock);
    for (;;) {
        while (!p->stop && p->next >= p->n_jobs)
            pthread_cond_wait(&p->work, &p->lock);
        if (p->stop)
            break;
        struct er_job *j = &p->jobs[p->next++];
        pthread_mutex_unlock(&p->lock);
        if (staging)
            run_job(p, j, staging);
        else
            j->error = ENOMEM, j->failed_part = 0;
        pthread_mutex_lock(&p->lock);
        if (++p->n_done == p->n_jobs)
            pthread_cond_broadcast(&p->done);
    }
    pthread_mutex_unlock(&p->lock);
    free(staging);
    return NULL;
}

int er_threads_for_machine(void)
{
    /* a reader mostly waits on its pread: sized for reads in flight, not for CPUs. A
     * decode step's round is at most its 8 routed experts (or 8 read ahead), so more sit
     * idle there; on 2 CPUs 8 readers beat 2 and 16 (bench-experts -r, expert_reader.h). */
    return sysconf(_SC_NPROCESSORS_ONLN) >= 2 ? 8 : 4;
}

int er_readers(struct splash_err *err)
{
    const char *v = getenv("SPLASH_EXPERT_READERS");
    if (!v || !*v)
        return er_threads_for_machine();
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (errno || *end || n < 1 || n > ER_MAX_READERS) {
        splash_err_set(err, SPLASH_ERR_INVALID,
                       "SPLASH_EXPERT_READERS=%s: not a reader count from 1 to %d", v,
                       ER_MAX_READERS);
        return -1;
    }
    return (int)n;
}

enum splash_status er_pool_start(struct er_pool *p, const struct splash_host *host,
                                 struct er_file *files, int32_t n_files, int n_threads,
                                 size_t staging_bytes, struct splash_err *err)
{
    memset(p, 0, sizeof *p);
    p->k = host->kernels;
    p->host = host;
    p->files = files;
    p->n_files = n_files;
    p->staging_bytes = staging_bytes;
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->work, NULL);
    pthread_cond_init(&p->done, NULL);
    p->threads = calloc((size_t)n_threads, sizeof *p->threads);
    if (!p->threads)
        return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory for the expert readers");
    for (int i = 0; i < n_threads; i++) {
        if (pthread_create(&p->threads[i], NULL, reader_main, p) != 0) {
            er_pool_stop(p);
            return splash_err_set(err, SPLASH_ERR_NOMEM, "cannot start expert reader %d", i);
        }
        p->n_threads++;
    }
    return SPLASH_OK;
}

void er_pool_stop(struct er_pool *p)
{
    pthread_mutex_lock(&p->lock);
    p->stop = 1;
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->lock);
    for (int i = 0; i < p->n_threads; i++)
        pthread_join(p->threads[i], NULL);
    free(p->threads);
    p->threads = NULL;
    p->n_threads = 0;
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->work);
    pthread_cond_destroy(&p->done);
}

void er_pool_submit(struct er_pool *p, struct er_job *jobs, int32_t n)
{
    pthread_mutex_lock(&p->lock);
    p->jobs = jobs;
    p->n_jobs = n;
    p->next = 0;
    p->n_done = 0;
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->lock);
}

void er_pool_wait(struct er_pool *p)
{
    pthread_mutex_lock(&p->lock);
    while (p->n_done < p->n_jobs)
        pthread_cond_wait(&p->done, &p->lock);
    p->jobs = NULL;
    p->n_jobs = p->next = p->n_done = 0;
    pthread_mutex_unlock(&p->lock);
}
