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

/* Before a script call of db `db` on lane `lane` to the node that owns
 * `key`: sends "SELECT <db>" as a limiter part on the connection the call
 * then takes (nothing for db 0); its reply is consumed here. */
void store_redis_db_enter(struct cluster *cl, unsigned db, uint64_t lane,
                          const char *key, size_t klen);

/* After that call: "SELECT 0" the same way, so what follows on the
 * connection runs in db 0 again (nothing for db 0). */
void store_redis_db_leave(struct cluster *cl, unsigned db, uint64_t lane,
                          const char *key, size_t klen);

#endif /* PX_PROXY_LIMITER_STORE_REDIS_DB_H */
