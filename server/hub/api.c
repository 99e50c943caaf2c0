/* The Hub's revision endpoint and file URLs. */
#include "server/hub/api.h"

#include <ctype.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/hub/request.h"

int splash_hub_is_commit(const char *s)
{
    size_t i = 0;
    for (; s[i]; i++)
        if (!isxdigit((unsigned char)s[i]) || isupper((unsigned char)s[i]))
            return 0;
    return i == 40;
}

static int is_hex(const char *s, size_t want)
{
    size_t i = 0;
    for (; s[i]; i++)
        if (!isxdigit((unsigned char)s[i]))
            return 0;
    return i == want;
}

/* A repository path a snapshot can hold: no empty, "." or ".." segment, no backslash,
 * no control character, at most 1024 bytes. */
static int path_ok(const char *p)
{
    size_t len = strlen(p);
    if (!len || len > 1024 || p[0] == '/' || p[len - 1] == '/')
        return 0;
    for (const char *s = p; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == '\\' || *s == 0x7f)
            return 0;
    for (const char *seg = p; seg;) {
        const char *end = strchr(seg, '/');
        size_t n = end ? (size_t)(end - seg) : strlen(seg);
        if (n == 0 || (n == 1 && seg[0] == '.') || (n == 2 && seg[0] == '.' && seg[1] == '.'))
            return 0;
        seg = end ? end + 1 : NULL;
    }
    return 1;
}

void splash_hub_revision_free(struct splash_hub_revision *rev)
{
    for (size_t i = 0; i < rev->n_files; i++)
        free(rev->files[i].path);
    free(rev->files);
    memset(rev, 0, sizeof *rev);
}

const struct splash_hub_file *splash_hub_revision_find(const struct splash_hub_revision *rev,
                                                       const char *path)
{
    for (size_t i = 0; i < rev->n_files; i++)
        if (!strcmp(rev->files[i].path, path))
            return &rev->files[i];
    return NULL;
}

static enum splash_status parse_file(json_t *s, size_t i, struct splash_hub_file *f,
                                     struct splash_err *err)
{
    const char *name = json_string_value(json_object_get(s, "rfilename"));
    if (!json_is_object(s) || !name)
        return splash_err_set(err, SPLASH_ERR_INVALID, "siblings[%zu]: no rfilename", i);
    if (!path_ok(name))
        return splash_err_set(err, SPLASH_ERR_INVALID, "siblings[%zu]: unsafe file name %.120s",
                              i, name);
    json_t *size = json_object_get(s, "size");
    json_t *lfs = json_object_get(s, "lfs");
    const char *blob = json_string_value(json_object_get(s, "blobId"));
    if (!json_is_integer(size) || json_integer_value(size) < 0)
        return splash_err_set(err, SPLASH_ERR_INVALID, "%.120s: the listing gives no size", name);
    f->size = (uint64_t)json_integer_value(size);
    if (lfs && !json_is_null(lfs)) {
        const char *sha = json_string_value(json_object_get(lfs, "sha256"));
        json_t *lsize = json_object_get(lfs, "size");
        if (!sha || !is_hex(sha, 64))
            return splash_err_set(err, SPLASH_ERR_INVALID, "%.120s: lfs.sha256 is not 64 hex digits",
                                  name);
        if (json_is_integer(lsize) && (uint64_t)json_integer_value(lsize) != f->size)
            return splash_err_set(err, SPLASH_ERR_INVALID,
                                  "%.120s: lfs.size and size disagree", name);
        snprintf(f->blob, sizeof f->blob, "%s", sha);
        f->lfs = 1;
    } else {
        if (!blob || !is_hex(blob, 40))
            return splash_err_set(err, SPLASH_ERR_INVALID, "%.120s: blobId is not 40 hex digits",
                                  name);
        snprintf(f->blob, sizeof f->blob, "%s", blob);
    }
    for (char *c = f->blob; *c; c++)
        *c = (char)tolower((unsigned char)*c);
    if (!(f->path = strdup(name)))
        return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory");
    return SPLASH_OK;
}

enum splash_status splash_hub_revision_parse(const char *text, size_t len,
                                             struct splash_hub_revision *out,
                                             struct splash_err *err)
{
    memset(out, 0, sizeof *out);
    json_error_t jerr;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return splash_err_set(err, SPLASH_ERR_INVALID, "the Hub's answer is not JSON (%.100s)",
                              jerr.text);
    enum splash_status st = SPLASH_OK;
    const char *sha = json_string_value(json_object_get(root, "sha"));
    json_t *siblings = json_object_get(root, "siblings");
    if (!json_is_object(root) || !sha || !splash_hub_is_commit(sha))
        st = splash_err_set(err, SPLASH_ERR_INVALID, "the Hub's answer has no commit (sha)");
    else if (!json_is_array(siblings))
        st = splash_err_set(err, SPLASH_ERR_INVALID, "the Hub's answer has no file list (siblings)");
    else if (json_array_size(siblings) > 100000)
        st = splash_err_set(err, SPLASH_ERR_INVALID, "the Hub lists over 100000 files");
    if (!st) {
        snprintf(out->commit, sizeof out->commit, "%s", sha);
        size_t n = json_array_size(siblings);
        out->files = calloc(n ? n : 1, sizeof *out->files);
        if (!out->files)
            st = splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory");
        for (size_t i = 0; i < n && !st; i++) {
            st = parse_file(json_array_get(siblings, i), i, &out->files[out->n_files], err);
            if (!st)
                out->n_files++;
            for (size_t j = 0; !st && j + 1 < out->n_files; j++)
                if (!strcmp(out->files[j].path, out->files[out->n_files - 1].path))
                    st = splash_err_set(err, SPLASH_ERR_INVALID, "%.120s: listed twice",
                                        out->files[j].path);
        }
    }
    json_decref(root);
    if (st)
        splash_hub_revision_free(out);
    return st;
}

/* Percent-encodes every byte but unreserved ones (and '/' when keep_slash). */
static int encode(const char *in, int keep_slash, char *out, size_t size)
{
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)in; *p; p++) {
        if (o + 4 > size)
            return 0;
        if (isalnum(*p) || *p == '-' || *p == '_' || *p == '.' || *p == '~' ||
            (keep_slash && *p == '/'))
            out[o++] = (char)*p;
        else
            o += (size_t)snprintf(out + o, size - o, "%%%02X", *p);
    }
    out[o] = 0;
    return 1;
}

int splash_hub_file_url(const struct splash_hub_env *env, const char *repo_id, const char *commit,
                        const char *path, char *buf, size_t size)
{
    char enc[3200];
    if (!encode(path, 1, enc, sizeof enc))
        return 0;
    int n = snprintf(buf, size, "%s/%s/resolve/%s/%s", env->endpoint, repo_id, commit, enc);
    return n >= 0 && (size_t)n < size;
}

/* The Hub's refusal in one line, as huggingface_hub tells them apart. */
static enum splash_status refusal(const struct splash_hub_env *env, const char *repo_id,
                                  const char *revision, const struct splash_hub_response *r,
                                  struct splash_err *err)
{
    const char *code = r->error_code;
    int token = env->token[0] != 0;
    if (!strcmp(code, "GatedRepo"))
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                              token ? "%s is gated and this token has no access: accept its terms "
                                      "at %s/%s"
                                    : "%s is gated: accept its terms at %s/%s, then set HF_TOKEN "
                                      "or run hf auth login",
                              repo_id, env->endpoint, repo_id);
    if (!strcmp(code, "RevisionNotFound"))
        return splash_err_set(err, SPLASH_ERR_NOT_FOUND, "%s has no revision %.80s", repo_id,
                              revision);
    if (!strcmp(code, "RepoNotFound") || r->status == 401 || r->status == 404)
        return splash_err_set(err, SPLASH_ERR_NOT_FOUND,
                              token ? "%s: no such model repository, or this token cannot read it"
                                    : "%s: no such model repository, or it is private (set HF_TOKEN "
                                      "or run hf auth login)",
                              repo_id);
    if (r->status == 403)
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED, "%s: the Hub refused access (HTTP 403%s%.120s)",
                              repo_id, r->error_message[0] ? ": " : "", r->error_message);
    return splash_err_set(err, SPLASH_ERR_INVALID, "%s: the Hub answered HTTP %ld%s%.120s", repo_id,
                          r->status, r->error_message[0] ? ": " : "", r->error_message);
}

enum splash_status splash_hub_revision_fetch(const struct splash_hub_env *env,
                                             const char *repo_id, const char *revision,
                                             double timeout_s, struct splash_hub_revision *out,
                                             struct splash_err *err)
{
    memset(out, 0, sizeof *out);
    char rev[600], url[1400];
    if (!encode(revision, 0, rev, sizeof rev))
        return splash_err_set(err, SPLASH_ERR_INVALID, "--revision: too long");
    snprintf(url, sizeof url, "%s/api/models/%s/revision/%s?blobs=true", env->endpoint, repo_id,
             rev);
    struct splash_hub_response r;
    enum splash_status st = splash_hub_get(env, url, timeout_s, &r, err);
    if (st)
        return st;
    if (r.status != 200)
        st = refusal(env, repo_id, revision, &r, err);
    else if ((st = splash_hub_revision_parse(r.body, r.len, out, err))) {
        struct splash_err inner = *err;
        splash_err_set(err, st, "%s@%.40s: %s", repo_id, revision, inner.msg);
    }
    splash_hub_response_free(&r);
    return st;
}
