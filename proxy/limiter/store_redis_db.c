/* CL.THROTTLE in the caller's database (see store_redis_db.h).
 *
 * A client in db n (SELECT n, single mode: cluster mode refuses SELECT and
 * the embedded store has no databases) expects CL.THROTTLE k to act on db
 * n's k, as redis-cell does. Its calls are batched apart from db 0's
 * (store_redis_flush keys a batch by db too) and each of its script calls
 * goes out as three parts on one limiter connection, pipelined in one go
 * so no other request falls between them:
 *
 *   SELECT n          reply consumed here
 *   FCALL ... keys    the batch's part, decided in db n
 *   SELECT 0          reply consumed here: the connection is db 0's again
 *
 * A retried batch (NOSCRIPT and the like) is wrapped again. A new
 * connection starts in db 0, so a connection lost between the parts
 * leaves no db behind. The refusal cache holds db 0's keys only: its
 * tracker reads in db 0, so a call of another db neither asks it nor
 * teaches it. LIMITER's keys are the limiter's own and stay in db 0. */
#include "proxy/limiter/store_redis_db.h"

#include <stdio.h>

#include "proxy/core/cluster.h"
#include "proxy/core/log.h"
#include "proxy/core/req.h"
#include "proxy/core/util.h"

/* SELECT's reply. An error (a db Redis does not have: the client's own
 * SELECT n was refused too) is logged; the call after it answers for
 * itself. */
static void store_redis_db_on_select(struct req *part, const char *frame,
                                     size_t len)
{
    PX_UNUSED(part);
    if (len > 2 && frame[0] == '-') {
        log_warn("limiter: SELECT for CL.THROTTLE failed: %.*s",
                 (int)(len > 202 ? 200 : len - 2), frame);
    }
}

/* Sends "SELECT <db>" as a limiter part of lane `lane` to the node of
 * `key`. */
static void store_redis_db_select(struct cluster *cl, unsigned db,
                                  uint64_t lane, const char *key, size_t klen)
{
    char num[16];
    const char *argv[2] = { "SELECT", num };
    struct req *part;

    snprintf(num, sizeof(num), "%u", db);
    part = req_own_argv(2, argv, store_redis_db_on_select, NULL);
    part->lane = lane;
    part->limiter = 1;
    cluster_send_key(cl, key, klen, part);
}

void store_redis_db_enter(struct cluster *cl, unsigned db, uint64_t lane,
                          const char *key, size_t klen)
{
    if (db != 0) {
        store_redis_db_select(cl, db, lane, key, klen);
    }
}

void store_redis_db_leave(struct cluster *cl, unsigned db, uint64_t lane,
                          const char *key, size_t klen)
{
    if (db != 0) {
        store_redis_db_select(cl, 0, lane, key, klen);
    }
}
