/* The down/still down/back decision of a node's log lines (downlog.h). */
#include "proxy/core/downlog.h"

#include <stddef.h>

#include "proxy/core/log.h"

enum downlog_say downlog_fail(struct downlog *d, uint64_t now_ms)
{
    if (!d->down) {
        d->down = 1;
        d->down_ms = now_ms;
        d->told_ms = now_ms;
        d->attempts = 1;
        return DOWNLOG_DOWN;
    }
    d->attempts++;
    if (now_ms - d->told_ms >= DOWNLOG_EVERY_MS) {
        d->told_ms = now_ms;
        return DOWNLOG_STILL;
    }
    return DOWNLOG_QUIET;
}

enum downlog_say downlog_ok(struct downlog *d)
{
    if (d->down) {
        d->down = 0;
        d->seen = 1;
        return DOWNLOG_BACK;
    }
    if (!d->seen) {
        d->seen = 1;
        return DOWNLOG_UP;
    }
    return DOWNLOG_QUIET;
}

void downlog_tell(const struct downlog *d, enum downlog_say say,
                  uint64_t now_ms, const char *what, const char *name,
                  const char *why)
{
    unsigned long long secs = (unsigned long long)(now_ms - d->down_ms) / 1000;

    switch (say) {
    case DOWNLOG_DOWN:
        log_warn("%s %s: %s (retrying with backoff; told again once a minute "
                 "while it lasts)",
                 what, name, why);
        break;
    case DOWNLOG_STILL:
        log_warn("%s %s: still failing after %u attempts in %llu s: %s", what,
                 name, d->attempts, secs, why);
        break;
    case DOWNLOG_UP:
        log_info("%s %s: connected", what, name);
        break;
    case DOWNLOG_BACK:
        log_info("%s %s: back after %u failed attempts in %llu s", what, name,
                 d->attempts, secs);
        break;
    default:
        log_debug("%s %s: %s", what, name, why != NULL ? why : "serving");
    }
}
