/* The persistent cache's namespace directory (server/engine/cache_namespace.h). */
#include "server/engine/cache_namespace.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/host_impl.h"
#include "core/paths.h"

static void add_file(EVP_MD_CTX *md, const char *path, const struct stat *sb)
{
    char line[PATH_MAX + 96];
    int n = snprintf(line, sizeof line, "%s %lld %lld.%09ld\n", path, (long long)sb->st_size,
                     (long long)sb->st_mtim.tv_sec, sb->st_mtim.tv_nsec);
    EVP_DigestUpdate(md, line, (size_t)(n < (int)sizeof line ? n : (int)sizeof line - 1));
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
    return strcmp((*a)->d_name, (*b)->d_name);
}

/* The model's identity: a file's real path, size and time, or every file of a directory. */
static int digest_model(EVP_MD_CTX *md, const char *model_path)
{
    char real[PATH_MAX];
    struct stat sb;
    if (!realpath(model_path, real) || stat(real, &sb) != 0)
        return -1;
    if (!S_ISDIR(sb.st_mode)) {
        add_file(md, real, &sb);
        return 0;
    }
    struct dirent **list;
    int n = scandir(real, &list, NULL, by_name);
    if (n < 0)
        return -1;
    for (int i = 0; i < n; i++) {
        char path[PATH_MAX + 256];
        snprintf(path, sizeof path, "%s/%s", real, list[i]->d_name);
        struct stat fb;
        if (list[i]->d_name[0] != '.' && stat(path, &fb) == 0 && S_ISREG(fb.st_mode))
            add_file(md, path, &fb);
        free(list[i]);
    }
    free(list);
    return 0;
}

int splash_cache_namespace_open(const char *root, const char *model_path, const char *layout,
                                double wait_s, char *dir, size_t dir_size, int *lock_fd,
                                char *why, size_t why_size)
{
    char base[PATH_MAX];
    struct splash_err err;
    if (root) {
        snprintf(base, sizeof base, "%s", root);
        if (splash_make_dirs(base, 0700, &err) != SPLASH_OK) {
            snprintf(why, why_size, "--cache-dir %s: %s", root, err.msg);
            return -1;
        }
    } else if (splash_dir_path(SPLASH_DIR_CACHE, "prefix-cache", 1, base, sizeof base, &err) !=
               SPLASH_OK) {
        snprintf(why, why_size, "%s", err.msg);
        return -1;
    }
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    unsigned char sum[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    char head[64];
    snprintf(head, sizeof head, "splash prefix cache %d\n", SPLASH_CACHE_FORMAT);
    int ok = md && EVP_DigestInit_ex(md, EVP_sha256(), NULL) &&
             EVP_DigestUpdate(md, head, strlen(head)) && !digest_model(md, model_path) &&
             EVP_DigestUpdate(md, layout, strlen(layout)) && EVP_DigestFinal_ex(md, sum, &len);
    EVP_MD_CTX_free(md);
    if (!ok) {
        snprintf(why, why_size, "%s: %s", model_path, errno ? strerror(errno) : "no digest");
        return -1;
    }
    char hex[33];
    for (int i = 0; i < 16; i++)
        snprintf(hex + 2 * i, 3, "%02x", sum[i]);
    snprintf(dir, dir_size, "%s/%s", base, hex);
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        snprintf(why, why_size, "%s: %s", dir, strerror(errno));
        return -1;
    }
    char lock[PATH_MAX + 64];
    snprintf(lock, sizeof lock, "%s/lock", dir);
    int fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) {
        snprintf(why, why_size, "%s: %s", lock, strerror(errno));
        return -1;
    }
    struct timespec step = {0, 100 * 1000 * 1000};
    for (double waited = 0;; waited += 0.1) {
        if (flock(fd, LOCK_EX | LOCK_NB) == 0)
            break;
        if (waited >= wait_s) {
            snprintf(why, why_size, "%s is held by another engine (waited %.0f s)", dir, wait_s);
            close(fd);
            return -1;
        }
        nanosleep(&step, NULL);
    }
    futimens(fd, NULL); /* used now: the 14-day sweep goes by the newest file */
    *lock_fd = fd;
    return 0;
}

/* 1 for a namespace's name: 32 lowercase hex digits. */
static int namespace_name(const char *name)
{
    size_t i = 0;
    for (; name[i]; i++)
        if (!((name[i] >= '0' && name[i] <= '9') || (name[i] >= 'a' && name[i] <= 'f')))
            return 0;
    return i == 32;
}

/* The newest modification time among dir and its files, and their bytes. */
static time_t last_use(const char *dir, uint64_t *bytes)
{
    struct stat sb;
    time_t newest = stat(dir, &sb) == 0 ? sb.st_mtime : 0;
    *bytes = 0;
    DIR *d = opendir(dir);
    if (!d)
        return newest;
    for (struct dirent *de; (de = readdir(d));) {
        char path[2 * PATH_MAX];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        if (de->d_name[0] == '.' || lstat(path, &sb) != 0 || !S_ISREG(sb.st_mode))
            continue;
        if (sb.st_mtime > newest)
            newest = sb.st_mtime;
        *bytes += (uint64_t)sb.st_blocks * 512u;
    }
    closedir(d);
    return newest;
}

/* Removes a namespace's files and then the directory (a subdirectory, which no engine
 * makes, keeps it). */
static void remove_namespace(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    for (struct dirent *de; (de = readdir(d));) {
        char path[2 * PATH_MAX];
        struct stat sb;
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") && lstat(path, &sb) == 0 &&
            !S_ISDIR(sb.st_mode))
            unlink(path);
    }
    closedir(d);
    rmdir(dir);
}

int splash_cache_namespace_sweep(const char *root, double max_age_s, time_t now,
                                 uint64_t *bytes)
{
    char base[PATH_MAX];
    struct splash_err err;
    *bytes = 0;
    if (root)
        snprintf(base, sizeof base, "%s", root);
    else if (splash_dir_path(SPLASH_DIR_CACHE, "prefix-cache", 0, base, sizeof base, &err) !=
             SPLASH_OK)
        return 0;
    DIR *d = opendir(base);
    if (!d)
        return 0; /* no root yet: nothing was ever cached there */
    int removed = 0;
    for (struct dirent *de; (de = readdir(d));) {
        char dir[PATH_MAX + 300], lock[PATH_MAX + 400];
        struct stat sb;
        snprintf(dir, sizeof dir, "%s/%s", base, de->d_name);
        if (!namespace_name(de->d_name) || lstat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
            continue;
        uint64_t size;
        if (difftime(now, last_use(dir, &size)) < max_age_s)
            continue;
        /* held while it goes: an engine holding it keeps it, one opening it waits */
        snprintf(lock, sizeof lock, "%s/lock", dir);
        int fd = open(lock, O_RDWR | O_CLOEXEC);
        if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) != 0) {
            close(fd);
            continue;
        }
        remove_namespace(dir);
        if (fd >= 0)
            close(fd);
        if (lstat(dir, &sb) != 0) {
            removed++;
            *bytes += size;
        }
    }
    closedir(d);
    return removed;
}

/* A namespace beside this one, for trimming. */
struct other {
    char name[33];
    time_t used;
    uint64_t bytes;
};

static int least_recent_first(const void *a, const void *b)
{
    const struct other *x = a, *y = b;
    return x->used < y->used ? -1 : x->used > y->used;
}

/* Locks dir's lock file for its removal: the descriptor, or -1 when an engine holds it
 * (-2: no lock file, nobody ever held it). */
static int lock_for_removal(const char *dir)
{
    char lock[PATH_MAX + 400];
    snprintf(lock, sizeof lock, "%s/lock", dir);
    int fd = open(lock, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return -2;
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

uint64_t splash_cache_namespace_trim_others(const char *ns_dir, uint64_t within)
{
    char base[PATH_MAX], self[64] = "";
    snprintf(base, sizeof base, "%s", ns_dir);
    char *slash = strrchr(base, '/');
    if (!slash)
        return 0;
    snprintf(self, sizeof self, "%s", slash + 1);
    *slash = 0;
    DIR *d = opendir(base);
    if (!d)
        return 0;
    struct other *list = NULL;
    size_t n = 0, cap = 0;
    uint64_t total = 0;
    for (struct dirent *de; (de = readdir(d));) {
        char dir[PATH_MAX + 300];
        struct stat sb;
        snprintf(dir, sizeof dir, "%s/%s", base, de->d_name);
        if (!namespace_name(de->d_name) || !strcmp(de->d_name, self) || lstat(dir, &sb) != 0 ||
            !S_ISDIR(sb.st_mode))
            continue;
        /* one an engine holds is that engine's to bound, not this one's */
        int fd = lock_for_removal(dir);
        if (fd == -1)
            continue;
        if (fd >= 0)
            close(fd);
        if (n == cap) {
            struct other *grown = realloc(list, (cap = cap ? 2 * cap : 8) * sizeof *list);
            if (!grown)
                break;
            list = grown;
        }
        memcpy(list[n].name, de->d_name, 33); /* 32 hex digits and the NUL */
        list[n].used = last_use(dir, &list[n].bytes);
        total += list[n].bytes;
        n++;
    }
    closedir(d);
    if (n) /* (qsort takes no NULL list, even empty) */
        qsort(list, n, sizeof *list, least_recent_first);
    for (size_t i = 0; i < n && total > within; i++) {
        char dir[PATH_MAX + 300];
        struct stat sb;
        snprintf(dir, sizeof dir, "%s/%s", base, list[i].name);
        int fd = lock_for_removal(dir);
        if (fd == -1)
            continue; /* an engine took it meanwhile */
        remove_namespace(dir);
        if (fd >= 0)
            close(fd);
        if (lstat(dir, &sb) == 0)
            continue;
        total -= list[i].bytes;
        splash_log(SPLASH_LOG_INFO, NULL, "SSD cache · removed the cache %s (%.2f GiB, the least "
                   "recently used) to keep the root within the quota", dir,
                   (double)list[i].bytes / 1073741824.0);
    }
    free(list);
    return total;
}
