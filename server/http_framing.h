/* Request framing the server refuses (RFC 9112 §6.3, §3.2, §5): headers a proxy
 * in front could read differently from us are answered 400 and the connection
 * closed, never guessed at. */
#ifndef SPLASH_SERVER_HTTP_FRAMING_H
#define SPLASH_SERVER_HTTP_FRAMING_H

#include <microhttpd.h>
#include <stddef.h>

/* NULL when the request's framing is sound, else why it is not. libmicrohttpd
 * 0.9.75 has already refused some shapes itself: a request line it cannot split
 * is closed without an answer, an unknown HTTP version gets 505. */
const char *splash_http_framing_problem(struct MHD_Connection *c, const char *method,
                                        const char *version);

/* Splits a Host header into its name (an IP literal keeps its brackets) and
 * checks its syntax: a reg-name, IPv4 or [IPv6] literal, then an optional
 * :port of digits. 0 when malformed. */
int splash_http_host_name(const char *host, char *name, size_t size);

#endif
