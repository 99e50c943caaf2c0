#include "server/http_framing.h"

#include <string.h>
#include <strings.h>

struct header_counts {
    int host, content_length, transfer_encoding;
    const char *problem;
};

static int is_tchar(unsigned char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           (ch && strchr("!#$%&'*+-.^_`|~", ch));
}

static enum MHD_Result count_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                    size_t key_size, const char *value, size_t value_size)
{
    struct header_counts *n = cls;
    if (!key_size)
        n->problem = "a header line has no name";
    /* libmicrohttpd keeps "Host :" as the name "Host ": whitespace before the colon */
    for (size_t i = 0; i < key_size && !n->problem; i++)
        if (!is_tchar((unsigned char)key[i]))
            n->problem = "a header name has whitespace or a character names may not have";
    for (size_t i = 0; i < value_size && !n->problem; i++) {
        unsigned char ch = (unsigned char)value[i];
        if ((ch < 0x20 && ch != '\t') || ch == 0x7f)
            n->problem = "a header value has a control character";
    }
    if (!strcasecmp(key, "Host"))
        n->host++;
    else if (!strcasecmp(key, "Content-Length"))
        n->content_length++;
    else if (!strcasecmp(key, "Transfer-Encoding")) {
        n->transfer_encoding++;
        if (strcasecmp(value, "chunked"))
            n->problem = "Transfer-Encoding other than chunked";
    }
    return n->problem ? MHD_NO : MHD_YES;
}

const char *splash_http_framing_problem(struct MHD_Connection *c, const char *method,
                                        const char *version)
{
    for (const char *m = method; *m; m++)
        if (!is_tchar((unsigned char)*m))
            return "the method is not a token";
    struct header_counts n = {0};
    MHD_get_connection_values_n(c, MHD_HEADER_KIND, count_header, &n);
    if (n.problem)
        return n.problem;
    if (n.host > 1)
        return "more than one Host header";
    if (!n.host && version && !strcmp(version, "HTTP/1.1"))
        return "an HTTP/1.1 request without a Host header";
    if (n.content_length > 1)
        return "more than one Content-Length header";
    if (n.transfer_encoding > 1)
        return "more than one Transfer-Encoding header";
    if (n.content_length && n.transfer_encoding)
        return "both Content-Length and Transfer-Encoding";
    const char *host = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Host");
    char name[256];
    if (host && !splash_http_host_name(host, name, sizeof name))
        return "a malformed Host header";
    return NULL;
}

static int port_ok(const char *p)
{
    if (!*p)
        return 1;
    if (*p++ != ':')
        return 0;
    size_t n = strspn(p, "0123456789");
    return n <= 5 && !p[n];
}

int splash_http_host_name(const char *host, char *name, size_t size)
{
    size_t len;
    if (host[0] == '[') {
        const char *end = strchr(host, ']');
        if (!end)
            return 0;
        len = (size_t)(end - host) + 1;
        if (strspn(host + 1, "0123456789abcdefABCDEF:.") != len - 2 || !port_ok(end + 1))
            return 0;
    } else {
        len = strspn(host, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~"
                           "!$&'()*+,;=%");
        if (!len || !port_ok(host + len))
            return 0;
    }
    if (len >= size)
        return 0;
    memcpy(name, host, len);
    name[len] = 0;
    return 1;
}
