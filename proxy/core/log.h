/* Leveled logging to stderr. Each macro tests the level before evaluating its
 * arguments, so disabled debug lines cost one call and a compare. Line format:
 * "2026-11-22T08:10:00.123Z W upstream 127.0.0.1:6379: connect failed: ...". */
#ifndef PX_PROXY_LOG_H
#define PX_PROXY_LOG_H

#include <stddef.h>

enum log_level {
    LOG_DEBUG = 0,
    LOG_INFO = 1,
    LOG_WARN = 2,
    LOG_ERROR = 3,
};

/* Sets the lowest level that is printed. */
void log_set_level(enum log_level level);

/* True when `level` would be printed. */
int log_enabled(enum log_level level);

/* Formats and prints one line. Use the macros below instead. */
void log_write(enum log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#define log_at(lvl, ...)                                                       \
    do {                                                                       \
        if (log_enabled(lvl)) {                                                \
            log_write(lvl, __VA_ARGS__);                                       \
        }                                                                      \
    } while (0)
#define log_debug(...) log_at(LOG_DEBUG, __VA_ARGS__)
#define log_info(...)  log_at(LOG_INFO, __VA_ARGS__)
#define log_warn(...)  log_at(LOG_WARN, __VA_ARGS__)
#define log_error(...) log_at(LOG_ERROR, __VA_ARGS__)

/* The ways the proxy dies on purpose, each with one error line first.
 * px_assert_fail: "assertion failed: <expr> (<file>:<line>)", for
 * PX_ASSERT (util.h). px_oom: the failed allocation's size, for the
 * allocators (util.h) and PX_CHECK_OOM. */
__attribute__((noreturn)) void px_assert_fail(const char *expr,
                                              const char *file, int line);
__attribute__((noreturn)) void px_oom(size_t size);

/* For libuv's handle init and start calls, which on a live loop fail only
 * on a programming error (a bad signal number, a NULL callback): when rc
 * is not 0, logs "fatal: <what>: <libuv's text>" and aborts, rather than
 * run on without a signal handler, a timer or a deadline. */
void px_uv_must(int rc, const char *what);

#endif /* PX_PROXY_LOG_H */
