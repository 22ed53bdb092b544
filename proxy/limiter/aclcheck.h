/* aclcheck: asks a node whether its Redis users keep limiter state safe.
 *
 * Limiter state is safe from clients only when Redis itself refuses the
 * client traffic's user the limiter's keys (see conf/acl.h). At start and
 * whenever a master appears, the limiter asks the node with ACL DRYRUN,
 * over a limiter connection, whether that user could write or read a
 * limiter key, flush the keyspace, swap databases or replace the limiter's
 * functions, and whether the limiter's own user can do its work. It only
 * logs: a warning per problem, or one line saying the users are right. A
 * node that cannot answer (Redis 6, or a user not allowed ACL DRYRUN) is
 * logged once and not checked. */
#ifndef PX_PROXY_LIMITER_ACLCHECK_H
#define PX_PROXY_LIMITER_ACLCHECK_H

struct cluster;
struct conf;
struct node;

/* Sends the checks of `node`; their replies are logged. */
void aclcheck_node(struct cluster *cl, const struct conf *conf,
                   struct node *node);

#endif /* PX_PROXY_LIMITER_ACLCHECK_H */
