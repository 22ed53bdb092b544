/* Logging to stderr (container friendly).
 *
 * The level is the one piece of file-scope state outside the server
 * struct: it is set once at start, before the loop runs, and only read
 * afterwards, so every layer can log without reaching for the server
 * global (docs/ARCHITECTURE.md, "Global state"). */
#include "proxy/core/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/time.h>
#include <time.h>

#include <uv.h>

static const char log_letters[] = { 'D', 'I', 'W', 'E' };

/* Lowest level printed (see above). */
static int log_min_level = LOG_INFO;

void log_set_level(enum log_level level)
{
    log_min_level = (int)level;
}

int log_enabled(enum log_level level)
{
    return (int)level >= log_min_level;
}

void log_write(enum log_level level, const char *fmt, ...)
{
    char line[1024];
    struct timeval tv;
    struct tm tm;
    size_t n;
    va_list ap;

    gettimeofday(&tv, NULL);
    gmtime_r(&tv.tv_sec, &tm);
    n = strftime(line, sizeof(line), "%Y-%m-%dT%H:%M:%S", &tm);
    n += (size_t)snprintf(line + n, sizeof(line) - n, ".%03dZ %c ",
                          (int)(tv.tv_usec / 1000), log_letters[level & 3]);
    va_start(ap, fmt);
    vsnprintf(line + n, sizeof(line) - n, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s\n", line);
}

void px_assert_fail(const char *expr, const char *file, int line)
{
    log_write(LOG_ERROR, "assertion failed: %s (%s:%d)", expr, file, line);
    abort();
}

void px_oom(size_t size)
{
    log_write(LOG_ERROR, "out of memory allocating %zu bytes", size);
    abort();
}

void px_uv_must(int rc, const char *what)
{
    if (rc != 0) {
        log_write(LOG_ERROR, "fatal: %s: %s", what, uv_strerror(rc));
        abort();
    }
}
