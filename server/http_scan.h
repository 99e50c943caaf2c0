/* Request boundaries in a connection's byte stream (RFC 9112 §2, §6, §7.1). The head
 * gate reads each request head whole and checks it before libmicrohttpd sees a byte
 * of it, then passes the body on by its declared length or its chunks, so the next
 * request's head is found and checked too: a kept-alive or pipelined request cannot
 * slip past the gate behind an earlier one. */
#ifndef SPLASH_SERVER_HTTP_SCAN_H
#define SPLASH_SERVER_HTTP_SCAN_H

#include <stddef.h>

/* A longer head is answered 431 (nginx's default limit is 32 KiB in 8 KiB lines;
 * libmicrohttpd's memory pool holds about this much). */
#define SPLASH_HTTP_HEAD_MAX 16384

enum splash_http_scan_state {
    SPLASH_SCAN_HEAD,       /* reading a request head */
    SPLASH_SCAN_BODY,       /* passing a Content-Length body */
    SPLASH_SCAN_CHUNK_SIZE, /* a chunk's size line */
    SPLASH_SCAN_CHUNK_DATA,
    SPLASH_SCAN_CHUNK_END,  /* the line end after a chunk's data */
    SPLASH_SCAN_TRAILER,    /* trailer lines after the last chunk */
};

struct splash_http_scan {
    enum splash_http_scan_state state;
    unsigned long long left;  /* body or chunk bytes still to pass */
    unsigned long long heads; /* sound request heads passed so far */
    size_t trailer_bytes;
    int status;       /* 400 or 431 once refused */
    const char *why;  /* set once the stream is refused; it stays refused */
};

/* How many of buf's len bytes (the stream from just after the last byte this
 * returned) may be passed on now: a whole sound request head, body or chunk bytes,
 * a chunk's framing line or a trailer line. 0 when more bytes are needed, or when
 * the stream is refused (s->why and s->status are then set). */
size_t splash_http_scan(struct splash_http_scan *s, const char *buf, size_t len);

#endif
