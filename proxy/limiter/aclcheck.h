/* aclcheck: asks a node whether its Redis users keep limiter state safe.
 *
 * Limiter state is safe from clients only when Redis itself refuses the
 * client traffic's user the limiter's keys (see conf/acl.h). At start and
 * whenever a master appears, the limiter asks the node with ACL DRYRUN,
 * over a limiter connection, whether that user could write or read a
 * limiter key, flush the keyspace, swap databases or replace the limiter's
 * functions, and whether the limiter's own user can do its work. It only
 * logs, one line per node: a warning that names every problem, or a line
 * saying the users are right. A
 * node that cannot answer (Redis 6, or a user not allowed ACL DRYRUN) is
 * logged once and not checked. */
#ifndef PX_PROXY_LIMITER_ACLCHECK_H
#define PX_PROXY_LIMITER_ACLCHECK_H

#include <stddef.h>

struct cluster;
struct conf;
struct node;

/* Sends the checks of `node`; their replies are logged. */
void aclcheck_node(struct cluster *cl, const struct conf *conf,
                   struct node *node);

/* The one warning of a node whose users are wrong: what the client user
 * `user[0]` may do that it should not (`bad[0]`, a ", "-separated list,
 * "" for none), and what the limiter's user `user[1]` may not do that it
 * must (`bad[1]`). Writes it to out (cap bytes, cut if longer). Pure. */
void aclcheck_verdict(char *out, size_t cap, const char *node,
                      const char *const user[2], const char *const bad[2]);

#endif /* PX_PROXY_LIMITER_ACLCHECK_H */
