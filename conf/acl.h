/* acl: the two Redis ACL users that keep limiter state out of clients'
 * reach, as `ACL SETUSER` lines for the configured key prefix.
 *
 * Client traffic is forwarded as the client user (upstream_user), whose key
 * patterns match every key except those under the prefix, and whose
 * commands are the proxy's command policy. The limiter runs as the limiter
 * user (limiter_user), which may touch every key: CL.THROTTLE's keys are
 * the client's own, unprefixed, as with redis-cell. Redis runs a script
 * or function with its caller's permissions, so EVAL, EVALSHA and FCALL sent
 * by a client cannot reach limiter keys either.
 *
 * A Redis glob cannot say "not starting with P", so the client user lists
 * every way a key can differ from P = p0 p1 ... p(n-1): a first difference
 * at byte i ("p0..p(i-1)[^pi]*"), or being a strict prefix of P
 * ("p0..p(i-1)" exactly, the empty key included).
 *
 * Leaf layer: libc only, no logging, no globals. */
#ifndef PX_CONF_ACL_H
#define PX_CONF_ACL_H

#include <stddef.h>

struct conf;

/* 1 when Redis can take the key patterns of `prefix`: it refuses a
 * pattern with a blank (space, tab, newline...), so no ACL user can keep
 * such a prefix out. */
int acl_prefix_ok(const char *prefix, size_t plen);

/* What the two users' ACL lines need of `c`, checked whenever either user
 * is named (upstream_user or limiter_user): a key_prefix Redis can take
 * as a key pattern (acl_prefix_ok), and two different users, since the
 * limiter user's "~*" would otherwise reset the client user to every key.
 * 0, or -1 with the reason, one line without a newline, in `err`. The one
 * check --print-acl, --check-config and start-up share. */
int acl_conf_check(const struct conf *c, char *err, size_t errlen);

/* The client user's key patterns for `prefix` (`plen` bytes, any bytes),
 * blank-separated, each quoted for redis-cli when it must be. Written to
 * `out` when it has room (NUL-terminated); returns the length needed
 * without the NUL, like snprintf. */
size_t acl_client_keys(const char *prefix, size_t plen, char *out,
                       size_t outlen);

/* The lines `cellgate --print-acl` prints: an ACL SETUSER line for the
 * client user and one for the limiter user, each ending in "\n", ready for
 * redis-cli. Needs upstream_user, upstream_password, limiter_user and
 * limiter_password set. Written to `out` when it has room; returns the
 * length needed without the NUL. */
size_t acl_setuser_lines(const struct conf *c, char *out, size_t outlen);

/* The limiter user's command rules: what the limiter's calls, the
 * scripts' own calls and its invalidation tracking need, nothing that acts
 * on the server. */
#define ACL_LIMITER_COMMANDS                                                   \
    "-@all +@read +@write +@scripting +@connection -@dangerous +time "         \
    "+acl|dryrun"

#endif /* PX_CONF_ACL_H */
