/* Read and replace a client's settings file, keeping its mode. */
#include "cli/agent_file.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/paths.h"

int splash_agent_file_read(const char *path, struct splash_agent_file *f, char *msg,
                           size_t msg_size)
{
    memset(f, 0, sizeof *f);
    snprintf(f->path, sizeof f->path, "%s", path);
    f->mode = 0600;
    FILE *in = fopen(path, "rb");
    if (!in) {
        if (errno == ENOENT)
            return 0;
        snprintf(msg, msg_size, "%s: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fileno(in), &st) == 0)
        f->mode = st.st_mode & 07777;
    /* a settings file kept as a link (dotfiles) is rewritten where it points */
    char real[PATH_MAX];
    if (realpath(path, real))
        snprintf(f->path, sizeof f->path, "%s", real);
    size_t cap = 4096;
    f->text = malloc(cap);
    int failed = !f->text;
    for (size_t n; !failed && (n = fread(f->text + f->len, 1, cap - f->len - 1, in)) > 0;) {
        f->len += n;
        if (f->len + 1 < cap)
            continue;
        char *grown = realloc(f->text, cap *= 2);
        if (grown)
            f->text = grown;
        failed = !grown;
    }
    failed |= ferror(in);
    fclose(in);
    if (failed) {
        snprintf(msg, msg_size, "%s: cannot read it", path);
        splash_agent_file_free(f);
        return -1;
    }
    f->text[f->len] = 0;
    f->exists = 1;
    return 0;
}

int splash_agent_file_write(const struct splash_agent_file *f, const char *text, char *msg,
                            size_t msg_size)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", f->path);
    char *slash = strrchr(dir, '/');
    struct splash_err err;
    if (slash && slash != dir) {
        *slash = 0;
        if (splash_make_dirs(dir, 0700, &err) != SPLASH_OK) {
            snprintf(msg, msg_size, "%s", err.msg);
            return -1;
        }
    }
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.splash-%ld.tmp", f->path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    size_t len = strlen(text);
    int ok = fd >= 0 && write(fd, text, len) == (ssize_t)len && fchmod(fd, f->mode) == 0;
    int saved = errno;
    if (fd >= 0 && close(fd) != 0 && ok) {
        ok = 0;
        saved = errno;
    }
    if (ok && rename(tmp, f->path) != 0) {
        ok = 0;
        saved = errno;
    }
    if (!ok) {
        unlink(tmp);
        snprintf(msg, msg_size, "%s: %s", f->path, strerror(saved));
        return -1;
    }
    return 0;
}

void splash_agent_file_free(struct splash_agent_file *f)
{
    free(f->text);
    f->text = NULL;
}
