#include "server/http_relay.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "server/http_scan.h"

#define OUT_CAP 16384
#define POLL_MS 200
#define STALL_MS 60000   /* libmicrohttpd has closed and the client reads nothing */
#define FINISH_MS 1000   /* stopping: what is left of an answer may still go out */

/* What the gate and libmicrohttpd's callbacks share about one connection. */
struct link {
    int refs;                /* the gate's, and libmicrohttpd's once it started */
    unsigned long long done;     /* requests libmicrohttpd has finished, answered or not */
    unsigned long long answered; /* of those, the ones whose answer went out whole */
    int mhd_fd;              /* libmicrohttpd's end, the key while pending */
    struct link *next;       /* on the pending list until libmicrohttpd starts it */
};

/* libmicrohttpd starts a handed-over connection on its own thread, later: the link
 * waits here, found by its socket, which stays open until then. Newest first, so a
 * socket number reused after a failed start finds its own link. */
static pthread_mutex_t links_lock = PTHREAD_MUTEX_INITIALIZER;
static struct link *pending;

static void link_unpend(struct link *l)
{
    for (struct link **p = &pending; *p; p = &(*p)->next)
        if (*p == l) {
            *p = l->next;
            return;
        }
}

static void link_release(struct link *l)
{
    pthread_mutex_lock(&links_lock);
    int last = --l->refs == 0;
    pthread_mutex_unlock(&links_lock);
    if (last)
        free(l);
}

void splash_relay_started(struct MHD_Connection *c, void **socket_context)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci)
        return;
    pthread_mutex_lock(&links_lock);
    for (struct link *l = pending; l; l = l->next)
        if (l->mhd_fd == ci->connect_fd) {
            link_unpend(l);
            l->refs++;
            *socket_context = l;
            break;
        }
    pthread_mutex_unlock(&links_lock);
}

void splash_relay_closed(void **socket_context)
{
    if (*socket_context)
        link_release(*socket_context);
    *socket_context = NULL;
}

void splash_relay_request_done(struct MHD_Connection *c, int answered)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    struct link *l = ci ? ci->socket_context : NULL;
    if (!l)
        return;
    if (answered)
        __atomic_add_fetch(&l->answered, 1, __ATOMIC_RELEASE);
    __atomic_add_fetch(&l->done, 1, __ATOMIC_RELEASE);
}

/* ---- one connection ------------------------------------------------------------ */

struct relay {
    const struct splash_relay_env *env;
    int cfd, mfd; /* the client's socket; the gate's end of the pair (-1 before) */
    struct link *link;
    struct splash_http_scan scan;
    char in[SPLASH_HTTP_HEAD_MAX]; /* client bytes not yet passed on */
    size_t in_len, cleared;        /* in[0..cleared) the scan cleared */
    char out[OUT_CAP];             /* libmicrohttpd's bytes for the client */
    size_t out_off, out_len;
    int client_eof, mhd_eof, mhd_shut;
    char client[INET6_ADDRSTRLEN];
};

/* The refusal of a head, in OpenAI's error shape (no route was read), then close. */
static void refuse(struct relay *r)
{
    char body[256], out[512];
    int n = snprintf(body, sizeof body,
                     "{\"error\":{\"message\":\"%s\",\"type\":\"invalid_request_error\","
                     "\"code\":\"%s\",\"param\":null}}",
                     r->scan.why, r->scan.status == 431 ? "header_too_large" : "bad_request");
    int m = snprintf(out, sizeof out,
                     "HTTP/1.1 %s\r\nConnection: close\r\nContent-Type: "
                     "application/json\r\nContent-Length: %d\r\n\r\n%s",
                     r->scan.status == 431 ? "431 Request Header Fields Too Large" : "400 Bad Request",
                     n, body);
    ssize_t w = send(r->cfd, out, (size_t)m, MSG_NOSIGNAL);
    (void)w;
    shutdown(r->cfd, SHUT_WR);
    splash_refused_line(r->env->refused, "-", "-", r->scan.status,
                        r->scan.status == 431 ? "header_too_large" : "bad_request", r->scan.why,
                        r->client);
}

/* libmicrohttpd takes the connection over one end of a socket pair. */
static int hand_over(struct relay *r, const struct sockaddr_storage *addr, socklen_t addr_len)
{
    int sv[2];
    struct link *l = calloc(1, sizeof *l);
    if (!l || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) != 0) {
        free(l);
        return -1;
    }
    l->refs = 1;
    l->mhd_fd = sv[1];
    pthread_mutex_lock(&links_lock);
    l->next = pending;
    pending = l;
    pthread_mutex_unlock(&links_lock);
    r->link = l;
    r->mfd = sv[0];
    /* it closes sv[1] when it fails */
    if (MHD_add_connection(r->env->daemon, sv[1], (const struct sockaddr *)addr, addr_len) != MHD_YES) {
        close(sv[0]);
        r->mfd = -1;
        return -1;
    }
    return 0;
}

/* Moves what it can without blocking; 0 when the connection is over. */
static int pass_client_bytes(struct relay *r)
{
    if (r->mfd < 0 || !r->cleared)
        return 1;
    ssize_t n = send(r->mfd, r->in, r->cleared, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0)
        return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    memmove(r->in, r->in + n, r->in_len - (size_t)n);
    r->in_len -= (size_t)n;
    r->cleared -= (size_t)n;
    return 1;
}

/* Reads libmicrohttpd's side into out; 1 when a read would block now. */
static int take_answer_bytes(struct relay *r)
{
    if (r->mfd < 0 || r->mhd_eof)
        return 0;
    if (!r->out_len)
        r->out_off = 0;
    size_t room = OUT_CAP - r->out_off - r->out_len;
    if (!room)
        return 0;
    ssize_t n = recv(r->mfd, r->out + r->out_off + r->out_len, room, MSG_DONTWAIT);
    if (n > 0)
        r->out_len += (size_t)n;
    else if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
        r->mhd_eof = 1;
    else
        return 1;
    return 0;
}

static int give_answer_bytes(struct relay *r)
{
    if (!r->out_len)
        return 1;
    ssize_t n = send(r->cfd, r->out + r->out_off, r->out_len, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0)
        return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    r->out_off += (size_t)n;
    r->out_len -= (size_t)n;
    if (!r->out_len)
        r->out_off = 0; /* all of it went out: the whole buffer takes the next read */
    return 1;
}

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void relay_loop(struct relay *r, const struct sockaddr_storage *addr, socklen_t addr_len)
{
    int quiet_ms = 0, stall_ms = 0;
    long long finish_at = 0; /* stopping: the answers' tails go out until then */
    for (;;) {
        if (!finish_at && __atomic_load_n(r->env->stopping, __ATOMIC_ACQUIRE))
            finish_at = now_ms() + FINISH_MS;
        while (!r->scan.why && r->cleared < r->in_len) {
            size_t n = splash_http_scan(&r->scan, r->in + r->cleared, r->in_len - r->cleared);
            if (!n)
                break;
            r->cleared += n;
        }
        if (r->cleared && r->mfd < 0 && hand_over(r, addr, addr_len) != 0)
            return;
        if (r->scan.why && r->mfd < 0) {
            refuse(r);
            return;
        }
        if (!pass_client_bytes(r))
            return;
        if (r->client_eof && !r->cleared && !r->mhd_shut) {
            if (r->mfd < 0)
                return; /* it left mid-head: closed without an answer */
            shutdown(r->mfd, SHUT_WR); /* libmicrohttpd sees the client's end of stream */
            r->mhd_shut = 1;
        }
        unsigned long long done =
            r->link ? __atomic_load_n(&r->link->done, __ATOMIC_ACQUIRE) : 0;
        int idle = done >= r->scan.heads; /* every request passed on is answered */
        if (r->scan.why && !r->cleared && !r->mhd_shut) {
            if (r->scan.state != SPLASH_SCAN_HEAD) {
                /* refused inside a body: that request cannot be finished */
                shutdown(r->mfd, SHUT_WR);
                r->mhd_shut = 1;
            } else if (idle && !r->out_len && take_answer_bytes(r) && !r->out_len) {
                refuse(r); /* after the answers to the requests before it */
                return;
            }
        }
        if (r->mhd_eof && !r->out_len) {
            /* refused inside a body libmicrohttpd had not answered: the 400 is ours */
            if (r->scan.why && r->scan.state != SPLASH_SCAN_HEAD && r->link &&
                __atomic_load_n(&r->link->answered, __ATOMIC_ACQUIRE) < r->scan.heads)
                refuse(r);
            return;
        }
        if (r->mhd_eof && stall_ms >= STALL_MS)
            return;
        if (finish_at && (now_ms() >= finish_at || r->mfd < 0 ||
                          (!r->out_len && take_answer_bytes(r) && !r->out_len)))
            return; /* stopping, and nothing more is ready to go out */

        int read_client = !r->client_eof && !r->scan.why && !finish_at &&
                          r->in_len < sizeof r->in;
        struct pollfd p[2] = {
            {.fd = r->cfd, .events = (short)((read_client ? POLLIN | POLLRDHUP : 0) |
                                             (r->out_len ? POLLOUT : 0))},
            {.fd = -1},
        };
        short mev = (short)((!r->mhd_eof && r->out_off + r->out_len < OUT_CAP ? POLLIN : 0) |
                            (r->cleared ? POLLOUT : 0));
        if (r->mfd >= 0 && mev) {
            p[1].fd = r->mfd;
            p[1].events = mev;
        }
        int wait_ms = r->scan.why || finish_at ? 10 : POLL_MS;
        int rc = poll(p, 2, wait_ms);
        if (rc < 0 && errno != EINTR)
            return;
        if (rc <= 0) {
            quiet_ms += wait_ms;
            stall_ms += wait_ms;
            /* a head must keep coming: before the hand-over any silence counts, after
             * it only a head begun while nothing is in flight */
            if (r->scan.state == SPLASH_SCAN_HEAD && !r->client_eof &&
                (r->mfd < 0 || (r->in_len > r->cleared && idle)) &&
                quiet_ms >= (int)r->env->head_timeout_s * 1000)
                return;
            continue;
        }
        if (p[0].revents & (POLLERR | POLLHUP | POLLNVAL))
            return; /* the client is gone both ways */
        if (p[0].revents & POLLIN) {
            ssize_t n = recv(r->cfd, r->in + r->in_len, sizeof r->in - r->in_len, MSG_DONTWAIT);
            if (n > 0) {
                r->in_len += (size_t)n;
                quiet_ms = stall_ms = 0;
            } else if (n == 0) {
                r->client_eof = 1;
            } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                return; /* reset */
            }
        } else if ((p[0].revents & POLLRDHUP) && read_client) {
            r->client_eof = 1;
        }
        if (p[1].revents & (POLLIN | POLLHUP | POLLERR)) {
            size_t before = r->out_len;
            take_answer_bytes(r);
            if (r->out_len != before)
                stall_ms = 0;
        }
        size_t before = r->out_len;
        if (!give_answer_bytes(r))
            return;
        if (r->out_len != before)
            stall_ms = 0;
    }
}

void splash_relay_run(const struct splash_relay_env *env, int client_fd,
                      const struct sockaddr_storage *addr, socklen_t addr_len)
{
    struct relay *r = calloc(1, sizeof *r);
    if (r) {
        r->env = env;
        r->cfd = client_fd;
        r->mfd = -1;
        snprintf(r->client, sizeof r->client, "?");
        if (addr->ss_family == AF_INET)
            inet_ntop(AF_INET, &((const struct sockaddr_in *)addr)->sin_addr, r->client,
                      sizeof r->client);
        int one = 1; /* a stream's events go out as they are written */
        setsockopt(client_fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        relay_loop(r, addr, addr_len);
        if (r->mfd >= 0)
            close(r->mfd);
        if (r->link) {
            pthread_mutex_lock(&links_lock);
            link_unpend(r->link);
            pthread_mutex_unlock(&links_lock);
            link_release(r->link);
        }
        free(r);
    }
    close(client_fd);
    splash_ip_limit_give(env->ip_limit, (const struct sockaddr *)addr);
}
