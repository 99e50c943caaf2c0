#include "server/http_scan.h"

#include <string.h>
#include <strings.h>

#define CHUNK_LINE_MAX 1024

static size_t refuse(struct splash_http_scan *s, int status, const char *why)
{
    s->status = status;
    s->why = why;
    return 0;
}

static int is_tchar(unsigned char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           (ch && strchr("!#$%&'*+-.^_`|~", ch));
}

/* A line's bytes before its LF: a NUL, or a CR anywhere but just before the LF (a
 * bare CR ends a line for libmicrohttpd 0.9.75 and not for most proxies). */
static const char *line_bytes_problem(const char *p, size_t n)
{
    /* the first problem by position, so bytes arriving in pieces name the same one */
    for (size_t i = 0; i < n; i++) {
        if (!p[i])
            return "a NUL byte in the request head";
        if (p[i] == '\r' && i + 1 < n)
            return "a CR not followed by LF in the request head";
    }
    return NULL;
}

static const char *request_line_problem(const char *p, size_t n)
{
    const char *sp1 = memchr(p, ' ', n);
    const char *sp2 = sp1 ? memchr(sp1 + 1, ' ', n - (size_t)(sp1 + 1 - p)) : NULL;
    if (!sp2 || sp1 == p || sp2 == sp1 + 1 || sp2 + 1 == p + n)
        return "the request line is not METHOD SP TARGET SP VERSION";
    for (const char *m = p; m < sp1; m++)
        if (!is_tchar((unsigned char)*m))
            return "the method is not a token";
    return NULL;
}

/* A header or trailer line: a token, a colon, a value of visible characters,
 * spaces and tabs. */
static const char *field_line_problem(const char *p, size_t n)
{
    if (p[0] == ' ' || p[0] == '\t')
        return "a header line folded onto the next (obs-fold)";
    size_t name = 0;
    while (name < n && is_tchar((unsigned char)p[name]))
        name++;
    if (!name || name == n || p[name] != ':')
        return name < n && (p[name] == ' ' || p[name] == '\t')
                   ? "a header name has whitespace before the colon"
                   : "a header line is not NAME: VALUE";
    for (size_t i = name + 1; i < n; i++) {
        unsigned char ch = (unsigned char)p[i];
        if ((ch < 0x20 && ch != '\t') || ch == 0x7f)
            return "a header value has a control character";
    }
    return NULL;
}

/* The value of a field line with the whitespace around it trimmed. */
static void field_value(const char *p, size_t n, const char **v, size_t *vn)
{
    const char *colon = memchr(p, ':', n);
    const char *a = colon + 1, *e = p + n;
    while (a < e && (*a == ' ' || *a == '\t'))
        a++;
    while (e > a && (e[-1] == ' ' || e[-1] == '\t'))
        e--;
    *v = a;
    *vn = (size_t)(e - a);
}

static int field_is(const char *p, size_t n, const char *name)
{
    size_t k = strlen(name);
    return n > k && p[k] == ':' && !strncasecmp(p, name, k);
}

/* After a sound head: where its body ends (RFC 9112 §6.3). */
static size_t head_framing(struct splash_http_scan *s, const char *buf, size_t head_len)
{
    int n_cl = 0, n_te = 0;
    unsigned long long length = 0;
    const char *p = memchr(buf, '\n', head_len) + 1;
    while (p < buf + head_len) {
        const char *lf = memchr(p, '\n', (size_t)(buf + head_len - p));
        size_t n = (size_t)(lf - p);
        if (n && p[n - 1] == '\r')
            n--;
        const char *v;
        size_t vn;
        if (n && field_is(p, n, "Content-Length")) {
            n_cl++;
            field_value(p, n, &v, &vn);
            if (!vn || vn > 18 || strspn(v, "0123456789") < vn)
                return refuse(s, 400, "a malformed Content-Length");
            length = 0;
            for (size_t i = 0; i < vn; i++)
                length = length * 10 + (unsigned)(v[i] - '0');
        } else if (n && field_is(p, n, "Transfer-Encoding")) {
            n_te++;
            field_value(p, n, &v, &vn);
            if (vn != 7 || strncasecmp(v, "chunked", 7))
                return refuse(s, 400, "Transfer-Encoding other than chunked");
        }
        p = lf + 1;
    }
    if (n_cl > 1)
        return refuse(s, 400, "more than one Content-Length header");
    if (n_te > 1)
        return refuse(s, 400, "more than one Transfer-Encoding header");
    if (n_cl && n_te)
        return refuse(s, 400, "both Content-Length and Transfer-Encoding");
    s->heads++;
    if (n_te)
        s->state = SPLASH_SCAN_CHUNK_SIZE;
    else if (length) {
        s->state = SPLASH_SCAN_BODY;
        s->left = length;
    }
    return head_len;
}

static size_t scan_head(struct splash_http_scan *s, const char *buf, size_t len)
{
    size_t pos = 0;
    for (int line = 0; pos < len; line++) {
        const char *lf = memchr(buf + pos, '\n', len - pos);
        size_t n = lf ? (size_t)(lf - (buf + pos)) : len - pos;
        const char *p = buf + pos, *why = line_bytes_problem(p, n);
        if (why)
            return refuse(s, 400, why);
        if (!lf)
            break;
        if (n && p[n - 1] == '\r')
            n--;
        if (line == 0)
            why = request_line_problem(p, n);
        else if (!n)
            return head_framing(s, buf, (size_t)(lf - buf) + 1);
        else
            why = field_line_problem(p, n);
        if (why)
            return refuse(s, 400, why);
        pos = (size_t)(lf - buf) + 1;
    }
    if (len >= SPLASH_HTTP_HEAD_MAX)
        return refuse(s, 431, "the request head is larger than 16384 bytes");
    return 0;
}

static size_t scan_chunk_size(struct splash_http_scan *s, const char *buf, size_t len)
{
    const char *lf = memchr(buf, '\n', len < CHUNK_LINE_MAX ? len : CHUNK_LINE_MAX);
    if (!lf)
        return len >= CHUNK_LINE_MAX ? refuse(s, 400, "a chunk size line is too long") : 0;
    size_t n = (size_t)(lf - buf);
    if (line_bytes_problem(buf, n))
        return refuse(s, 400, "a chunk size line has a NUL or a bare CR");
    if (n && buf[n - 1] == '\r')
        n--;
    size_t digits = strspn(buf, "0123456789abcdefABCDEF");
    if (digits > n)
        digits = n;
    if (!digits || digits > 15 || (digits < n && buf[digits] != ';'))
        return refuse(s, 400, "a malformed chunk size line");
    for (size_t i = digits; i < n; i++) {
        unsigned char ch = (unsigned char)buf[i];
        if ((ch < 0x20 && ch != '\t') || ch == 0x7f)
            return refuse(s, 400, "a chunk extension has a control character");
    }
    unsigned long long size = 0;
    for (size_t i = 0; i < digits; i++) {
        char ch = buf[i];
        size = size * 16 + (unsigned)(ch <= '9' ? ch - '0' : (ch | 0x20) - 'a' + 10);
    }
    if (size) {
        s->state = SPLASH_SCAN_CHUNK_DATA;
        s->left = size;
    } else {
        s->state = SPLASH_SCAN_TRAILER;
        s->trailer_bytes = 0;
    }
    return (size_t)(lf - buf) + 1;
}

static size_t scan_trailer(struct splash_http_scan *s, const char *buf, size_t len)
{
    const char *lf = memchr(buf, '\n', len);
    size_t n = lf ? (size_t)(lf - buf) : len;
    const char *why = line_bytes_problem(buf, n);
    if (why)
        return refuse(s, 400, why);
    if (s->trailer_bytes + n >= SPLASH_HTTP_HEAD_MAX)
        return refuse(s, 431, "the trailer section is larger than 16384 bytes");
    if (!lf)
        return 0;
    if (n && buf[n - 1] == '\r')
        n--;
    if (!n) {
        s->state = SPLASH_SCAN_HEAD;
        return (size_t)(lf - buf) + 1;
    }
    if ((why = field_line_problem(buf, n)))
        return refuse(s, 400, why);
    s->trailer_bytes += (size_t)(lf - buf) + 1;
    return (size_t)(lf - buf) + 1;
}

size_t splash_http_scan(struct splash_http_scan *s, const char *buf, size_t len)
{
    if (s->why || !len)
        return 0;
    switch (s->state) {
    case SPLASH_SCAN_HEAD:
        return scan_head(s, buf, len);
    case SPLASH_SCAN_BODY:
    case SPLASH_SCAN_CHUNK_DATA: {
        size_t n = len < s->left ? len : (size_t)s->left;
        s->left -= n;
        if (!s->left)
            s->state = s->state == SPLASH_SCAN_BODY ? SPLASH_SCAN_HEAD : SPLASH_SCAN_CHUNK_END;
        return n;
    }
    case SPLASH_SCAN_CHUNK_SIZE:
        return scan_chunk_size(s, buf, len);
    case SPLASH_SCAN_CHUNK_END:
        if (buf[0] == '\n' || (buf[0] == '\r' && len >= 2 && buf[1] == '\n')) {
            s->state = SPLASH_SCAN_CHUNK_SIZE;
            return buf[0] == '\n' ? 1 : 2;
        }
        return buf[0] == '\r' && len < 2 ? 0 : refuse(s, 400, "a chunk's data does not end with CRLF");
    case SPLASH_SCAN_TRAILER:
        return scan_trailer(s, buf, len);
    }
    return 0;
}
