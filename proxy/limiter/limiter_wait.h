/* LIMITER CHECK ... WAIT: replies held until their reservation is due, on
 * timers of the core's loop, and the caps on how many are held.
 *
 *   limiter_wait_reserve (a slot, or a cap is reached: refused)
 *        | the store decides the check, the slot held meanwhile
 *        +--> limiter_wait_start: the reply held on a timer
 *        +--> limiter_wait_cancel: no wait after all (or the call ended)
 *
 * A slot counts against its identity and the total from its reservation
 * to its end, so a check still deciding counts too: no number of checks
 * in flight gets past a cap. It knows nothing of the limiter: the caller
 * gives the core and a struct limiter_waits. */
#ifndef PX_PROXY_LIMITER_LIMITER_WAIT_H
#define PX_PROXY_LIMITER_LIMITER_WAIT_H

#include <stddef.h>
#include <stdint.h>

#include "proxy/core/hmap.h"
#include "proxy/core/queue.h"

struct core;
struct req;
struct limiter_wait;

/* Every wait of a limiter, and its caps. */
struct limiter_waits {
    struct queue started;      /* waits on a timer (for shutdown) */
    struct hmap idents;        /* identity -> owned slot count */
    size_t held;               /* slots held: reserved or started */
    size_t max_per_identity;   /* most slots of one identity */
    size_t max_total;          /* most slots in all */
    uint64_t refused_identity; /* reservations refused: identity full */
    uint64_t refused_total;    /* reservations refused: total full */
};

/* What limiter_wait_reserve came to. */
enum limiter_wait_rc {
    LIMITER_WAIT_OK = 0,
    LIMITER_WAIT_FULL_IDENTITY, /* max_per_identity slots of it held */
    LIMITER_WAIT_FULL_TOTAL,    /* max_total slots held */
};

void limiter_waits_init(struct limiter_waits *ws, size_t max_per_identity,
                        size_t max_total);

/* Frees the identity counts (every wait has ended: limiter_wait_stop_all,
 * and every reservation cancelled). */
void limiter_waits_free(struct limiter_waits *ws);

/* A slot for one WAIT of identity `ident` (any bytes): into *out, or a cap
 * is reached (counted) and *out is NULL. */
enum limiter_wait_rc limiter_wait_reserve(struct limiter_waits *ws,
                                          const char *ident, size_t len,
                                          struct limiter_wait **out);

/* Ends a slot that never started (accepts NULL). */
void limiter_wait_cancel(struct limiter_wait *w);

/* Starts slot `w`: replies `frame` (a RESP reply of `len` bytes, copied)
 * to `root` after `delay_ns`
 * (rounded up to whole milliseconds), on a timer of `core`'s loop. The
 * wait counts in root->owed; a client that leaves meanwhile ends it at
 * once (req_orphan calls root->cancel), without its reply. */
void limiter_wait_start(struct limiter_wait *w, struct core *core,
                        struct req *root, const char *frame, size_t len,
                        int64_t delay_ns);

/* Ends every started wait with the error `err` instead of its reply
 * (the reservation it waits for was made where the keys no longer are). */
void limiter_wait_fail_all(struct limiter_waits *ws, const char *err);

/* Shutdown: ends every started wait without its reply. */
void limiter_wait_stop_all(struct limiter_waits *ws);

#endif /* PX_PROXY_LIMITER_LIMITER_WAIT_H */
