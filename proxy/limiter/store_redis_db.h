/* CL.THROTTLE in the caller's database (single mode): the calls of a
 * client that selected db n go on the limiter's connection between a
 * SELECT n and a SELECT 0 of the store's own, so the script reads and
 * writes db n's key, as redis-cell does, and everything after them on
 * that connection runs in db 0 again. See store_redis_db.c. */
#ifndef PX_PROXY_LIMITER_STORE_REDIS_DB_H
#define PX_PROXY_LIMITER_STORE_REDIS_DB_H

#include <stddef.h>
#include <stdint.h>

struct cluster;

/* Sends "SELECT <db>" as a limiter part of lane `cid` to the node that
 * owns `key` (the connection the call that follows takes); its reply is
 * consumed here. */
void store_redis_db_select(struct cluster *cl, unsigned db, uint64_t cid,
                           const char *key, size_t klen);

#endif /* PX_PROXY_LIMITER_STORE_REDIS_DB_H */
