/* Range reads and resumable downloads. */
#include "server/hub/fetch.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "server/hub/request.h"

/* Retries of a transfer that failed in transport: SPLASH_HUB_RETRIES, default 5. */
static int max_retries(void)
{
    const char *v = getenv("SPLASH_HUB_RETRIES");
    long n = v && *v ? strtol(v, NULL, 10) : 5;
    return n >= 0 && n <= 50 ? (int)n : 5;
}

static long stall_seconds(void)
{
    const char *v = getenv("SPLASH_HUB_STALL_SECONDS");
    long s = v ? strtol(v, NULL, 10) : 0;
    return s > 0 ? s : 30;
}

/* ---- range reads -------------------------------------------------------------- */

struct range_sink {
    unsigned char *buf;
    size_t len, got;
    uint64_t offset, skip; /* skip: a 200 answer's bytes before the offset */
    CURL *c;
    int checked;
};

static size_t range_write(char *data, size_t size, size_t n, void *user)
{
    struct range_sink *s = user;
    size_t len = size * n, used = 0;
    if (!s->checked) {
        long code = 0;
        curl_easy_getinfo(s->c, CURLINFO_RESPONSE_CODE, &code);
        if (code != 206 && code != 200)
            return len; /* an error page: the status tells */
        s->skip = code == 200 ? s->offset : 0; /* Range ignored: cut the head ourselves */
        s->checked = 1;
    }
    if (s->skip) {
        size_t drop = len < s->skip ? len : (size_t)s->skip;
        s->skip -= drop;
        used = drop;
    }
    size_t room = s->len - s->got, take = len - used < room ? len - used : room;
    memcpy(s->buf + s->got, data + used, take);
    s->got += take;
    return s->got == s->len ? 0 : len; /* enough: stop the transfer */
}

enum splash_status splash_hub_read_range(const struct splash_hub_env *env, const char *url,
                                         uint64_t offset, size_t len, void *buf, size_t *got,
                                         struct splash_err *err)
{
    *got = 0;
    splash_hub_curl_init();
    CURL *c = curl_easy_init();
    if (!c)
        return splash_err_set(err, SPLASH_ERR_NOMEM, "cannot start an HTTP request");
    struct curl_slist *headers;
    splash_hub_curl_setup(c, env, &headers);
    char range[64];
    snprintf(range, sizeof range, "%llu-%llu", (unsigned long long)offset,
             (unsigned long long)(offset + len - 1));
    struct range_sink s = {.buf = buf, .len = len, .c = c, .offset = offset};
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_RANGE, range);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, range_write);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &s);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, stall_seconds());
    CURLcode rc = curl_easy_perform(c);
    long code = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    curl_slist_free_all(headers);
    curl_easy_cleanup(c);
    if (rc != CURLE_OK && !(rc == CURLE_WRITE_ERROR && s.got == s.len)) {
        char why[160];
        splash_hub_curl_reason(rc, (double)stall_seconds(), why, sizeof why);
        return splash_err_set(err, SPLASH_ERR_IO, "%s", why);
    }
    if (code != 206 && code != 200)
        return splash_err_set(err, code >= 500 ? SPLASH_ERR_IO : SPLASH_ERR_INVALID,
                              "HTTP %ld", code);
    *got = s.got;
    return SPLASH_OK;
}

/* ---- digests -------------------------------------------------------------------- */

enum splash_status splash_hub_file_digest(const char *path, int git_blob, char out[65],
                                          struct splash_err *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb)) {
        if (fd >= 0)
            close(fd);
        return splash_err_set(err, SPLASH_ERR_IO, "%.200s: %s", path, strerror(errno));
    }
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (!ctx || !EVP_DigestInit_ex(ctx, git_blob ? EVP_sha1() : EVP_sha256(), NULL)) {
        EVP_MD_CTX_free(ctx);
        close(fd);
        return splash_err_set(err, SPLASH_ERR_NOMEM, "cannot start a digest");
    }
    if (git_blob) {
        char head[48];
        int n = snprintf(head, sizeof head, "blob %llu", (unsigned long long)sb.st_size);
        EVP_DigestUpdate(ctx, head, (size_t)n + 1); /* with its NUL */
    }
    size_t chunk = 1u << 20;
    unsigned char *buf = malloc(chunk);
    ssize_t got = -1;
    while (buf && (got = read(fd, buf, chunk)) > 0)
        EVP_DigestUpdate(ctx, buf, (size_t)got);
    free(buf);
    int bad = got < 0;
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int md_len = 0;
    EVP_DigestFinal_ex(ctx, md, &md_len);
    EVP_MD_CTX_free(ctx);
    close(fd);
    if (bad)
        return splash_err_set(err, SPLASH_ERR_IO, "%.200s: read failed", path);
    for (unsigned i = 0; i < md_len; i++)
        snprintf(out + 2 * i, 3, "%02x", md[i]);
    return SPLASH_OK;
}

/* ---- one download --------------------------------------------------------------- */

struct transfer {
    struct splash_hub_job *job;
    struct splash_hub_progress *progress;
    size_t index;
    int fd;
    CURL *c;
    uint64_t have;    /* bytes in the .incomplete file */
    int checked;      /* the response code was looked at */
    int restart;      /* a 200 to a Range request: start over */
    int overflow;     /* more bytes than the listing said */
};

static size_t transfer_write(char *data, size_t size, size_t n, void *user)
{
    struct transfer *t = user;
    size_t len = size * n;
    if (!t->checked) {
        long code = 0;
        curl_easy_getinfo(t->c, CURLINFO_RESPONSE_CODE, &code);
        if (code != 200 && code != 206)
            return len; /* an error body, judged by its status */
        t->checked = 1;
        if (code == 200 && t->have) { /* Range ignored: the body is the whole file */
            if (ftruncate(t->fd, 0) || lseek(t->fd, 0, SEEK_SET))
                return 0;
            t->have = 0;
        }
    }
    if (t->have + len > t->job->size) {
        t->overflow = 1;
        return 0;
    }
    for (size_t off = 0; off < len;) {
        ssize_t w = write(t->fd, data + off, len - off);
        if (w <= 0)
            return 0;
        off += (size_t)w;
    }
    t->have += len;
    splash_hub_progress_set(t->progress, t->index, t->have);
    return len;
}

static void sleep_seconds(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

/* One attempt: 0 done (the file holds job->size bytes), 1 retry, -1 failed for good. */
static int attempt(const struct splash_hub_env *env, struct transfer *t, char *why, size_t size)
{
    struct splash_hub_job *job = t->job;
    t->checked = t->overflow = 0;
    CURL *c = t->c = curl_easy_init();
    if (!c) {
        snprintf(why, size, "cannot start an HTTP request");
        return -1;
    }
    struct curl_slist *headers;
    splash_hub_curl_setup(c, env, &headers);
    char range[48];
    if (t->have) {
        snprintf(range, sizeof range, "%llu-", (unsigned long long)t->have);
        curl_easy_setopt(c, CURLOPT_RANGE, range);
    }
    curl_easy_setopt(c, CURLOPT_URL, job->url);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, transfer_write);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, t);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, stall_seconds());
    CURLcode rc = curl_easy_perform(c);
    long code = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    curl_slist_free_all(headers);
    curl_easy_cleanup(c);
    if (t->overflow) {
        snprintf(why, size, "the server sent more than the %llu bytes the listing gives",
                 (unsigned long long)job->size);
        return -1;
    }
    if (code == 416) { /* our partial file is not a prefix of theirs: start over */
        snprintf(why, size, "the server refused to resume");
        return ftruncate(t->fd, 0) || lseek(t->fd, 0, SEEK_SET) ? -1 : (t->have = 0, 1);
    }
    if (rc == CURLE_TOO_MANY_REDIRECTS) {
        snprintf(why, size, "redirected more than 10 times (a redirect loop)");
        return -1;
    }
    if (code >= 400 && code < 500) {
        snprintf(why, size, "HTTP %ld", code);
        return -1;
    }
    if (rc != CURLE_OK) {
        if (rc == CURLE_OPERATION_TIMEDOUT)
            snprintf(why, size, "no data for %ld s", stall_seconds());
        else
            snprintf(why, size, "%s", curl_easy_strerror(rc));
        return 1;
    }
    if (code >= 500) {
        snprintf(why, size, "HTTP %ld", code);
        return 1;
    }
    if (t->have < job->size) {
        snprintf(why, size, "the body ended after %llu of %llu bytes",
                 (unsigned long long)t->have, (unsigned long long)job->size);
        return 1;
    }
    return 0;
}

/* Downloads one job: resumes dest.incomplete, retries transport failures (0.25 s, 0.5 s,
 * 1 s ... apart), and fetches once more from scratch on a digest mismatch. */
static void run_job(const struct splash_hub_env *env, struct splash_hub_job *job,
                    struct splash_hub_progress *progress, size_t index)
{
    char part[4200];
    snprintf(part, sizeof part, "%s.incomplete", job->dest);
    struct transfer t = {.job = job, .progress = progress, .index = index};
    t.fd = open(part, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (t.fd < 0) {
        job->st = SPLASH_ERR_IO;
        snprintf(job->error, sizeof job->error, "%.150s: %s", part, strerror(errno));
        return;
    }
    int refetched = 0, failures = 0;
    char why[200] = "";
    for (;;) {
        struct stat sb;
        fstat(t.fd, &sb);
        t.have = (uint64_t)sb.st_size;
        if (t.have > job->size) { /* longer than the listing: not ours to keep */
            if (ftruncate(t.fd, 0)) {
                job->st = SPLASH_ERR_IO;
                snprintf(job->error, sizeof job->error, "%.150s: %s", part, strerror(errno));
                break;
            }
            t.have = 0;
        }
        lseek(t.fd, (off_t)t.have, SEEK_SET);
        splash_hub_progress_set(progress, index, t.have);
        int r = t.have == job->size && job->size ? 0 : attempt(env, &t, why, sizeof why);
        if (r < 0) {
            job->st = SPLASH_ERR_INVALID;
            snprintf(job->error, sizeof job->error, "%.100s: %s", job->name, why);
            break;
        }
        if (r > 0) {
            if (++failures > max_retries()) {
                job->st = SPLASH_ERR_IO;
                snprintf(job->error, sizeof job->error, "%.100s: %s (after %d retries)", job->name,
                         why, max_retries());
                break;
            }
            sleep_seconds(0.125 * (double)(1 << (failures < 8 ? failures : 8)));
            continue;
        }
        char got[65];
        struct splash_err err;
        if (fsync(t.fd) || splash_hub_file_digest(part, !job->lfs, got, &err)) {
            job->st = SPLASH_ERR_IO;
            snprintf(job->error, sizeof job->error, "%.100s: cannot read it back", job->name);
            break;
        }
        if (strcmp(got, job->digest)) {
            if (ftruncate(t.fd, 0) || refetched++) {
                job->st = SPLASH_ERR_INVALID;
                snprintf(job->error, sizeof job->error,
                         "%.100s: its %s is %.16s..., the listing's %.16s... (fetched twice)",
                         job->name, job->lfs ? "SHA-256" : "git blob id", got, job->digest);
                break;
            }
            continue; /* refused: fetched again from its first byte */
        }
        if (rename(part, job->dest)) {
            job->st = SPLASH_ERR_IO;
            snprintf(job->error, sizeof job->error, "%.150s: %s", job->dest, strerror(errno));
        }
        break;
    }
    close(t.fd);
    if (job->st && job->st != SPLASH_ERR_IO)
        unlink(part); /* a refused file is not resumed */
}

struct pool {
    const struct splash_hub_env *env;
    struct splash_hub_job *jobs;
    size_t n;
    _Atomic size_t next;
    struct splash_hub_progress *progress;
};

static void *worker(void *arg)
{
    struct pool *p = arg;
    for (;;) {
        size_t i = atomic_fetch_add(&p->next, 1);
        if (i >= p->n)
            return NULL;
        run_job(p->env, &p->jobs[i], p->progress, i);
    }
}

enum splash_status splash_hub_download(const struct splash_hub_env *env,
                                       struct splash_hub_job *jobs, size_t n, int parallel,
                                       struct splash_hub_progress *progress,
                                       struct splash_err *err)
{
    splash_hub_curl_init();
    struct pool p = {.env = env, .jobs = jobs, .n = n, .progress = progress};
    pthread_t threads[8];
    int started = 0;
    if (parallel > 8)
        parallel = 8;
    for (int i = 0; i < parallel && (size_t)i < n; i++)
        if (!pthread_create(&threads[i], NULL, worker, &p))
            started++;
    if (!started && n)
        worker(&p);
    for (int i = 0; i < started; i++)
        pthread_join(threads[i], NULL);
    for (size_t i = 0; i < n; i++)
        if (jobs[i].st)
            return splash_err_set(err, jobs[i].st, "%s", jobs[i].error);
    return SPLASH_OK;
}
