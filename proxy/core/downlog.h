/* When to say that a node is down, still down, or back: the decision
 * behind the log lines of a node's failing connections.
 *
 * A node that is down fails every connection of its pool at each attempt,
 * every backoff (up to 2 s): one line per failure was a wall. The node's
 * connections share one `struct downlog`: its first failure is told at
 * once, then nothing until a minute has passed (a line with the count of
 * attempts), and one line when it serves again. The decisions are pure
 * (no clock of their own, no I/O); downlog_tell writes what they decided. */
#ifndef PX_PROXY_CORE_DOWNLOG_H
#define PX_PROXY_CORE_DOWNLOG_H

#include <stdint.h>

/* While a node stays down, one "still down" line per this period. */
#define DOWNLOG_EVERY_MS 60000

/* A node's outage, as told so far. Zeroed: never up, not down. */
struct downlog {
    uint64_t down_ms;  /* loop time of the outage's first failure */
    uint64_t told_ms;  /* loop time the outage was last told */
    unsigned attempts; /* failures since down_ms (the first included) */
    unsigned down : 1; /* failing since down_ms, not served since */
    unsigned seen : 1; /* served once: its first "connected" was said */
};

/* What to log now. */
enum downlog_say {
    DOWNLOG_QUIET, /* nothing (debug level at most) */
    DOWNLOG_DOWN,  /* the first failure of an outage */
    DOWNLOG_STILL, /* still down: `attempts` since `down_ms` */
    DOWNLOG_UP,    /* serving for the first time */
    DOWNLOG_BACK,  /* serving again after `attempts` failures */
};

/* A connection attempt failed (or a connection was lost) at `now_ms`. */
enum downlog_say downlog_fail(struct downlog *d, uint64_t now_ms);

/* A connection served (a reply that was not an error). The outage's
 * `attempts` and `down_ms` stay readable for the BACK line. */
enum downlog_say downlog_ok(struct downlog *d);

/* Logs what `say` decided about `what` `name` ("upstream", "host:port"),
 * failing for `why` (NULL when it served), at `now_ms`. DOWNLOG_QUIET
 * logs at debug level only. */
void downlog_tell(const struct downlog *d, enum downlog_say say,
                  uint64_t now_ms, const char *what, const char *name,
                  const char *why);

#endif /* PX_PROXY_CORE_DOWNLOG_H */
