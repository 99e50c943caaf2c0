/* The SSD tier's I/O thread and its queue: writes, reads (ahead of writes) and the
 * persistent index leave the engine's step thread; finished jobs wait on the done list for
 * the engine to reap them, and the engine may give up copies ahead of need or wait. */
#include "server/engine/disk_cache_internal.h"

#include <errno.h>
#include <stdlib.h>

void *disk_cache_io_main(void *arg)
{
    struct splash_disk_cache *d = arg;
    pthread_mutex_lock(&d->mu);
    for (;;) {
        while (!d->stop && !d->queue && !d->index_dirty)
            pthread_cond_wait(&d->work, &d->mu);
        if (d->index_dirty) {
            pthread_mutex_unlock(&d->mu);
            disk_cache_write_index(d);
            pthread_mutex_lock(&d->mu);
            continue;
        }
        if (!d->queue) {
            if (d->stop)
                break;
            continue;
        }
        struct job *j = d->queue;
        d->queue = j->next;
        if (!d->queue)
            d->queue_tail = NULL;
        if (!j->read) { /* a point doomed while queued is not written */
            struct entry *x = disk_cache_by_id(d, j->id);
            if (!x || x->doomed)
                atomic_store(&j->cancel, 1);
        }
        d->busy = 1;
        d->busy_expendable = j->expendable && !j->read;
        pthread_mutex_unlock(&d->mu);
        if (j->read) {
            disk_cache_run_read(d, j);
            pthread_mutex_lock(&d->mu);
            d->busy = 0;
            disk_cache_finish_read(d, j);
            j->next = d->done;
            d->done = j;
            pthread_cond_broadcast(&d->idle);
            continue;
        }
        int fault = disk_cache_run_job(d, j), err = errno;
        if (!fault && d->persist[0]) { /* before an index lists it */
            fdatasync(d->pages_fd);
            fdatasync(d->fd);
        }
        pthread_mutex_lock(&d->mu);
        d->busy = 0;
        disk_cache_finish(d, j, fault, err);
        pthread_cond_broadcast(&d->idle);
    }
    pthread_mutex_unlock(&d->mu);
    return NULL;
}

void disk_cache_free_job(struct job *j)
{
    if (!j)
        return;
    free(j->buf);
    free(j->tokens);
    free(j->pages);
    free(j);
}

int splash_disk_cache_reap(struct splash_disk_cache *d)
{
    if (!d)
        return 0;
    pthread_mutex_lock(&d->mu);
    struct job *j = d->done;
    d->done = NULL;
    pthread_mutex_unlock(&d->mu);
    int n = 0;
    while (j) {
        struct job *next = j->next;
        if (j->read && j->got) {
            j->got(j->done_ctx, j->tokens, j->n, j->buf, j->n_pages, j->size, j->cls);
            j->buf = NULL; /* the callback's */
        } else if (j->done) {
            j->done(j->done_ctx, j->ok);
        }
        disk_cache_free_job(j);
        j = next;
        n++;
    }
    return n;
}
int splash_disk_cache_pending(struct splash_disk_cache *d)
{
    if (!d)
        return 0;
    pthread_mutex_lock(&d->mu);
    int n = d->busy;
    for (struct job *j = d->queue; j; j = j->next)
        n++;
    for (struct job *j = d->done; j; j = j->next)
        n++;
    pthread_mutex_unlock(&d->mu);
    return n;
}

int splash_disk_cache_give_up_expendable(struct splash_disk_cache *d)
{
    if (!d)
        return 0;
    int n = 0;
    pthread_mutex_lock(&d->mu);
    for (struct job **at = &d->queue; *at;) {
        struct job *j = *at;
        if (!j->expendable || j->read) {
            at = &j->next;
            continue;
        }
        *at = j->next;
        disk_cache_finish(d, j, 3, 0);
        n++;
    }
    d->queue_tail = NULL;
    for (struct job *j = d->queue; j; j = j->next)
        d->queue_tail = j;
    pthread_mutex_unlock(&d->mu);
    /* the one under way stops at its next piece: it is the only wait */
    atomic_store(&d->stop_expendable, 1);
    pthread_mutex_lock(&d->mu);
    while (d->busy && d->busy_expendable) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 5 * 1000 * 1000;
        if (ts.tv_nsec >= 1000000000L)
            ts.tv_sec++, ts.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&d->idle, &d->mu, &ts);
    }
    pthread_mutex_unlock(&d->mu);
    atomic_store(&d->stop_expendable, 0);
    return n + splash_disk_cache_reap(d);
}

int splash_disk_cache_wait(struct splash_disk_cache *d, double seconds, int cancel)
{
    if (!d)
        return 1;
    if (cancel)
        atomic_store(&d->cancel, 1);
    double until = mono_now() + seconds;
    pthread_mutex_lock(&d->mu);
    while ((d->queue || d->busy) && mono_now() < until) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 20 * 1000 * 1000;
        if (ts.tv_nsec >= 1000000000L)
            ts.tv_sec++, ts.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&d->idle, &d->mu, &ts);
    }
    int drained = !d->queue && !d->busy;
    pthread_mutex_unlock(&d->mu);
    if (cancel)
        atomic_store(&d->cancel, 0);
    splash_disk_cache_reap(d);
    return drained;
}
