/* Hub requests on libcurl. */
#include "server/hub/request.h"

#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#ifndef SPLASH_VERSION
#define SPLASH_VERSION "dev"
#endif

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;

static void curl_init_once(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
}

void splash_hub_curl_init(void)
{
    pthread_once(&curl_once, curl_init_once);
}

void splash_hub_curl_setup(CURL *c, const struct splash_hub_env *env, struct curl_slist **headers)
{
    *headers = NULL;
    if (env->token[0]) {
        char auth[600];
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", env->token);
        *headers = curl_slist_append(*headers, auth);
    }
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, *headers);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "splash/" SPLASH_VERSION);
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(c, CURLOPT_MAXREDIRS, 10L);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 10L);
}

static size_t on_body(char *data, size_t size, size_t n, void *user)
{
    struct splash_hub_response *r = user;
    size_t add = size * n;
    if (r->len + add > r->limit)
        return 0; /* too large: aborts the transfer */
    char *grown = realloc(r->body, r->len + add + 1);
    if (!grown)
        return 0;
    r->body = grown;
    memcpy(r->body + r->len, data, add);
    r->len += add;
    r->body[r->len] = 0;
    return add;
}

/* Keeps X-Error-Code and X-Error-Message of the last response (after redirects). */
static size_t on_header(char *data, size_t size, size_t n, void *user)
{
    struct splash_hub_response *r = user;
    size_t len = size * n;
    if (len > 5 && !strncmp(data, "HTTP/", 5)) {
        r->error_code[0] = r->error_message[0] = 0;
        return len;
    }
    const char *colon = memchr(data, ':', len);
    if (!colon)
        return len;
    size_t key = (size_t)(colon - data);
    const char *v = colon + 1;
    size_t vlen = len - key - 1;
    while (vlen && (*v == ' ' || *v == '\t'))
        v++, vlen--;
    while (vlen && isspace((unsigned char)v[vlen - 1]))
        vlen--;
    char *dst = NULL;
    size_t cap = 0;
    if (key == 12 && !strncasecmp(data, "X-Error-Code", 12))
        dst = r->error_code, cap = sizeof r->error_code;
    else if (key == 15 && !strncasecmp(data, "X-Error-Message", 15))
        dst = r->error_message, cap = sizeof r->error_message;
    if (dst)
        snprintf(dst, cap, "%.*s", (int)vlen, v);
    return len;
}

void splash_hub_curl_reason(CURLcode rc, double timeout_s, char *buf, size_t size)
{
    if (rc == CURLE_OPERATION_TIMEDOUT)
        snprintf(buf, size, "did not answer within %g s", timeout_s);
    else if (rc == CURLE_TOO_MANY_REDIRECTS)
        snprintf(buf, size, "redirected more than 10 times (a redirect loop)");
    else
        snprintf(buf, size, "%s", curl_easy_strerror(rc));
}

enum splash_status splash_hub_get(const struct splash_hub_env *env, const char *url,
                                  double timeout_s, struct splash_hub_response *r,
                                  struct splash_err *err)
{
    splash_hub_curl_init();
    memset(r, 0, sizeof *r);
    r->limit = 16u << 20;
    CURL *c = curl_easy_init();
    if (!c)
        return splash_err_set(err, SPLASH_ERR_NOMEM, "cannot start an HTTP request");
    struct curl_slist *headers;
    splash_hub_curl_setup(c, env, &headers);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, r);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)(timeout_s * 1000));
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)(timeout_s * 1000));
    CURLcode rc = curl_easy_perform(c);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
    curl_slist_free_all(headers);
    curl_easy_cleanup(c);
    if (rc != CURLE_OK) {
        char why[160];
        if (rc == CURLE_WRITE_ERROR)
            snprintf(why, sizeof why, "answered with more than %zu MiB", r->limit >> 20);
        else
            splash_hub_curl_reason(rc, timeout_s, why, sizeof why);
        splash_hub_response_free(r);
        return splash_err_set(err, SPLASH_ERR_IO, "the Hub at %.200s %s", env->endpoint, why);
    }
    if (r->status >= 500) {
        long status = r->status;
        splash_hub_response_free(r);
        return splash_err_set(err, SPLASH_ERR_IO, "the Hub at %.200s answered HTTP %ld",
                              env->endpoint, status);
    }
    if (!r->body && !(r->body = calloc(1, 1)))
        return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory");
    return SPLASH_OK;
}

void splash_hub_response_free(struct splash_hub_response *r)
{
    free(r->body);
    r->body = NULL;
    r->len = 0;
}
