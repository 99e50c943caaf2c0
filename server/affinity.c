/* The affinity key of a request (affinity.h). */
#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "server/affinity.h"
#include "server/http.h"

/* Session headers agents send on every request of a conversation (found in their
 * published packages; docs/scale-out.md lists them with versions). */
static const char *const agent_headers[] = {
    "X-Claude-Code-Session-Id", /* Claude Code 2.1 */
    "Session-Id",               /* Codex 0.171 (its thread; also its prompt_cache_key) */
};

/* A header value may carry any byte a client chose; only printable ASCII without
 * spaces goes back as given, so the echo can never split or fold a header. */
static int echoable(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > SPLASH_AFFINITY_MAX)
        return 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x21 || (unsigned char)s[i] > 0x7e)
            return 0;
    return 1;
}

static void write_key(const char *key, char *out, size_t out_size)
{
    if (echoable(key)) {
        snprintf(out, out_size, "%s", key);
        return;
    }
    /* the same key hashes the same everywhere, so a router still sees one value */
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    if (!EVP_Digest(key, strlen(key), md, &n, EVP_sha256(), NULL) || n < 16) {
        snprintf(out, out_size, "unhashable");
        return;
    }
    char hex[33];
    for (int i = 0; i < 16; i++)
        snprintf(hex + 2 * i, 3, "%02x", md[i]);
    snprintf(out, out_size, "sha256:%s", hex);
}

/* A body field that, when present and not null, must be a string. -1 when not. */
static int string_field(const json_t *obj, const char *name, const char *shown, const char **value,
                        char *msg, size_t msg_size)
{
    json_t *v = json_object_get(obj, name);
    *value = NULL;
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_string(v)) {
        snprintf(msg, msg_size, "%s must be a string", shown);
        return -1;
    }
    if (json_string_length(v) > 0)
        *value = json_string_value(v);
    return 0;
}

int splash_affinity_pick(const json_t *body, enum splash_affinity_api api,
                         const struct splash_affinity_hints *hints, char *out, size_t out_size,
                         char *msg, size_t msg_size)
{
    const char *cache_key = NULL, *user = NULL;
    if (api == SPLASH_AFFINITY_ANTHROPIC) {
        json_t *meta = json_object_get(body, "metadata");
        if (json_is_object(meta) &&
            string_field(meta, "user_id", "metadata.user_id", &cache_key, msg, msg_size))
            return -1;
    } else if (string_field(body, "prompt_cache_key", "prompt_cache_key", &cache_key, msg,
                            msg_size) ||
               string_field(body, "user", "user", &user, msg, msg_size)) {
        return -1;
    }
    const char *order[] = {hints->header, cache_key, hints->agent_session, user};
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++)
        if (order[i] && *order[i]) {
            write_key(order[i], out, out_size);
            return 0;
        }
    snprintf(out, out_size, "addr:%s", hints->client_addr ? hints->client_addr : "unknown");
    return 0;
}

const char *splash_affinity_agent_header(const struct splash_http_request *req)
{
    for (size_t i = 0; i < sizeof agent_headers / sizeof agent_headers[0]; i++) {
        const char *v = splash_http_header(req, agent_headers[i]);
        if (v && *v)
            return v;
    }
    return NULL;
}

static void client_address(const struct splash_http_request *req, char *out, size_t size)
{
    out[0] = 0;
    const union MHD_ConnectionInfo *ci =
        req->connection ? MHD_get_connection_info(req->connection,
                                                  MHD_CONNECTION_INFO_CLIENT_ADDRESS)
                        : NULL;
    if (!ci || !ci->client_addr)
        return;
    if (ci->client_addr->sa_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)ci->client_addr)->sin_addr, out, size);
    else if (ci->client_addr->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)ci->client_addr)->sin6_addr, out, size);
}

int splash_affinity_take(const struct splash_http_request *req, const json_t *body,
                         enum splash_affinity_api api, struct splash_http_reply *reply)
{
    char addr[INET6_ADDRSTRLEN], msg[128];
    client_address(req, addr, sizeof addr);
    struct splash_affinity_hints hints = {
        .header = splash_http_header(req, "X-Session-Affinity"),
        .agent_session = splash_affinity_agent_header(req),
        .client_addr = addr[0] ? addr : NULL,
    };
    if (!splash_affinity_pick(body, api, &hints, reply->affinity, sizeof reply->affinity, msg,
                              sizeof msg))
        return 0;
    if (api == SPLASH_AFFINITY_ANTHROPIC)
        splash_reply_error_anthropic(reply, 400, "invalid_request_error", msg);
    else
        splash_reply_error(reply, 400, "invalid_request_error", "invalid_parameter", msg);
    return -1;
}
