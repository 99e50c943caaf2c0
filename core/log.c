/* Console logging for the core and plugins: one line per call, serialized. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/host_impl.h"

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static int log_level = -1;

static int level_from_env(void)
{
    const char *env = getenv("SPLASH_LOG");
    if (!env)
        return SPLASH_LOG_INFO;
    if (!strcasecmp(env, "debug"))
        return SPLASH_LOG_DEBUG;
    if (!strcasecmp(env, "warn"))
        return SPLASH_LOG_WARN;
    if (!strcasecmp(env, "error"))
        return SPLASH_LOG_ERROR;
    return SPLASH_LOG_INFO;
}

void splash_log_set_level(enum splash_log_level level)
{
    log_level = (int)level;
}

void splash_log(enum splash_log_level level, const char *who, const char *fmt, ...)
{
    if (log_level < 0)
        log_level = level_from_env();
    if ((int)level > log_level)
        return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    /* errors and warnings go to stderr, status lines to stdout (server.md "Console") */
    FILE *out = level <= SPLASH_LOG_WARN ? stderr : stdout;
    const char *tag = level == SPLASH_LOG_ERROR ? "Error: " : level == SPLASH_LOG_WARN ? "Warning: " : "";
    pthread_mutex_lock(&log_lock);
    if (who && *who)
        fprintf(out, "%s%s: %s\n", tag, who, line);
    else
        fprintf(out, "%s%s\n", tag, line);
    fflush(out);
    pthread_mutex_unlock(&log_lock);
}
