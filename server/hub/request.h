/* One HTTP request to the Hub on libcurl: the token, the user agent, redirects, the
 * Hub's X-Error-Code, and transport failures told apart from the Hub's refusals. */
#ifndef SPLASH_HUB_REQUEST_H
#define SPLASH_HUB_REQUEST_H

#include <curl/curl.h>
#include <stddef.h>

#include "server/hub/env.h"

struct splash_hub_response {
    long status;
    char error_code[64];     /* X-Error-Code: RepoNotFound, RevisionNotFound, GatedRepo ... */
    char error_message[256]; /* X-Error-Message */
    char *body;              /* NUL-terminated */
    size_t len, limit;
};

/* libcurl's global initialization, once, before any thread starts a transfer. */
void splash_hub_curl_init(void);

/* Options every Hub request takes: redirects (at most 10), the Authorization header for
 * the endpoint (libcurl drops it when a redirect changes host), the user agent. headers
 * receives the list to free after the transfer. */
void splash_hub_curl_setup(CURL *c, const struct splash_hub_env *env, struct curl_slist **headers);

/* GET url into r->body (at most 16 MiB) within timeout_s. SPLASH_ERR_IO when the Hub did not
 * answer (no connection, timeout, or a 5xx), else SPLASH_OK with r->status set. */
enum splash_status splash_hub_get(const struct splash_hub_env *env, const char *url,
                                  double timeout_s, struct splash_hub_response *r,
                                  struct splash_err *err);
void splash_hub_response_free(struct splash_hub_response *r);

/* A transport error in words: "did not answer within 5 s", "too many redirects" ... */
void splash_hub_curl_reason(CURLcode rc, double timeout_s, char *buf, size_t size);

#endif
