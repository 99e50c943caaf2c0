/* Runtime locks of running servers: write, remove, read, list. */
#include "cli/runtime_lock.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/paths.h"

enum splash_status splash_runtime_lock_path(int port, int create, char *out, size_t size,
                                            struct splash_err *err)
{
    enum splash_status st = splash_dir_path(SPLASH_DIR_DATA, "runtime", create, out, size, err);
    if (st != SPLASH_OK)
        return st;
    size_t n = strlen(out);
    int k = snprintf(out + n, size - n, "/serve-%d.json", port);
    if (k < 0 || (size_t)k >= size - n)
        return splash_err_set(err, SPLASH_ERR_INVALID, "%s: path too long", out);
    return SPLASH_OK;
}

static void sha256_hex(const char *text, char out[65])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    out[0] = 0;
    if (!EVP_Digest(text, strlen(text), md, &n, EVP_sha256(), NULL))
        return;
    for (unsigned int i = 0; i < n && i < 32; i++)
        snprintf(out + 2 * i, 3, "%02x", md[i]);
}

int splash_runtime_lock_key_matches(const struct splash_runtime_lock *lock, const char *key)
{
    char hex[65];
    sha256_hex(key ? key : "", hex);
    return lock->key_sha256[0] && !strcmp(hex, lock->key_sha256);
}

enum splash_status splash_runtime_lock_write(const struct splash_runtime_lock *lock,
                                             const char *key, char *path, size_t path_size,
                                             struct splash_err *err)
{
    enum splash_status st = splash_runtime_lock_path(lock->port, 1, path, path_size, err);
    if (st != SPLASH_OK)
        return st;
    json_t *o = json_pack("{s:I, s:i, s:s, s:s, s:I, s:s, s:b}", "pid", (json_int_t)getpid(),
                          "port", lock->port, "host", lock->host, "model", lock->model, "context",
                          (json_int_t)lock->context, "later_system", lock->later_system,
                          "reasoning", lock->reasoning);
    if (key && *key) {
        char hex[65];
        sha256_hex(key, hex);
        json_object_set_new(o, "api_key",
                            json_pack("{s:s, s:s}", "variable", "SPLASH_API_KEY", "sha256", hex));
    } else {
        json_object_set_new(o, "api_key", json_null());
    }
    char *text = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(o);
    if (!text)
        return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory");
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    size_t len = strlen(text);
    int ok = fd >= 0 && write(fd, text, len) == (ssize_t)len && write(fd, "\n", 1) == 1;
    int saved = errno;
    free(text);
    if (fd >= 0 && close(fd) != 0 && ok) {
        ok = 0;
        saved = errno;
    }
    if (!ok || rename(tmp, path) != 0) {
        if (ok)
            saved = errno;
        unlink(tmp);
        return splash_err_set(err, SPLASH_ERR_IO, "%s: %s", path, strerror(saved));
    }
    return SPLASH_OK;
}

static void copy_str(char *dst, size_t size, const json_t *v)
{
    snprintf(dst, size, "%s", json_is_string(v) ? json_string_value(v) : "");
}

static enum splash_status parse(const char *path, struct splash_runtime_lock *out,
                                struct splash_err *err)
{
    if (access(path, F_OK) != 0)
        return splash_err_set(err, SPLASH_ERR_NOT_FOUND, "%s: %s", path, strerror(errno));
    json_error_t jerr;
    json_t *o = json_load_file(path, 0, &jerr);
    if (!o)
        return splash_err_set(err, SPLASH_ERR_INVALID, "%s: %s", path, jerr.text);
    memset(out, 0, sizeof *out);
    json_t *pid = json_object_get(o, "pid"), *port = json_object_get(o, "port");
    json_t *key = json_object_get(o, "api_key");
    if (!json_is_integer(pid) || !json_is_integer(port) ||
        !json_is_string(json_object_get(o, "model"))) {
        json_decref(o);
        return splash_err_set(err, SPLASH_ERR_INVALID, "%s: pid, port and model are required",
                              path);
    }
    out->pid = (long)json_integer_value(pid);
    out->port = (int)json_integer_value(port);
    copy_str(out->host, sizeof out->host, json_object_get(o, "host"));
    copy_str(out->model, sizeof out->model, json_object_get(o, "model"));
    copy_str(out->later_system, sizeof out->later_system, json_object_get(o, "later_system"));
    out->context = json_integer_value(json_object_get(o, "context"));
    out->reasoning = json_is_true(json_object_get(o, "reasoning"));
    if (json_is_object(key)) {
        out->key_required = 1;
        copy_str(out->key_variable, sizeof out->key_variable, json_object_get(key, "variable"));
        copy_str(out->key_sha256, sizeof out->key_sha256, json_object_get(key, "sha256"));
    }
    json_decref(o);
    return SPLASH_OK;
}

/* Is pid a running splash? A pid the kernel reused for another program is not. */
static int alive(long pid)
{
    if (pid <= 0 || (kill((pid_t)pid, 0) != 0 && errno != EPERM))
        return 0;
    char path[64], comm[64] = "";
    snprintf(path, sizeof path, "/proc/%ld/comm", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 1; /* no /proc to ask: trust the signal */
    int named = fgets(comm, sizeof comm, f) != NULL;
    fclose(f);
    return !named || !strncmp(comm, "splash", 6);
}

void splash_runtime_lock_remove(const char *path)
{
    struct splash_runtime_lock l;
    struct splash_err err;
    if (parse(path, &l, &err) == SPLASH_OK && l.pid == (long)getpid())
        unlink(path);
}

enum splash_status splash_runtime_lock_read(int port, struct splash_runtime_lock *out,
                                            struct splash_err *err)
{
    char path[4096];
    enum splash_status st = splash_runtime_lock_path(port, 0, path, sizeof path, err);
    if (st != SPLASH_OK)
        return st;
    if ((st = parse(path, out, err)) != SPLASH_OK)
        return st;
    if (!alive(out->pid))
        return splash_err_set(err, SPLASH_ERR_NOT_FOUND,
                              "%s is stale: its server (pid %ld) is no longer running", path,
                              out->pid);
    return SPLASH_OK;
}

static int ascending(const void *a, const void *b)
{
    return *(const int *)a - *(const int *)b;
}

int splash_runtime_lock_ports(int *ports, int max)
{
    char dir[4096];
    struct splash_err err;
    if (splash_dir_path(SPLASH_DIR_DATA, "runtime", 0, dir, sizeof dir, &err) != SPLASH_OK)
        return 0;
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    int n = 0;
    struct dirent *e;
    while (n < max && (e = readdir(d))) {
        int port;
        char tail[8];
        if (sscanf(e->d_name, "serve-%d.%7s", &port, tail) != 2 || strcmp(tail, "json"))
            continue;
        struct splash_runtime_lock l;
        if (splash_runtime_lock_read(port, &l, &err) == SPLASH_OK)
            ports[n++] = port;
    }
    closedir(d);
    qsort(ports, (size_t)n, sizeof *ports, ascending);
    return n;
}
