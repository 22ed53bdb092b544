/* LIMITER's states as the tests see them: a gcra limit key
 * "<prefix>{<tag>}<rest>#<i>:gcra", kept in the identity's state string
 * (docs/limiter.md; the other algorithms keep keys of their own), names
 * the record of field "<rest>#<i>:gcra" in the string
 * "<prefix>{<tag>}", whose value is its records one after another, each
 * "<L>:<field>=<value>;" (L the field's bytes), the value
 * "<expire_at_ms>|<payload>" or a gcra TAT alone (expiring at its ms: the
 * scripts write it so on the node's clock; lstate writes the first form,
 * keeping the expiry a test gives).
 * lstate_cmd runs a command on such a key as it ran on the per-level key
 * of the previous release (GET, SET [PX ms] [KEEPTTL], DEL, EXISTS, TYPE,
 * PTTL, PEXPIRETIME, PERSIST, PEXPIRE, PEXPIREAT, HGET, HMGET, HGETALL,
 * HKEYS, HLEN, HSET, HDEL, HINCRBY), through a script on the node that
 * rewrites the string (SET ... PXAT its records' latest expiry, DEL when
 * none is left), so the tests that read or plant states stay as they
 * were; any other key, and any key when the command names none, goes to
 * Redis as it is. */
#ifndef PX_TESTS_INTEGRATION_LSTATE_H
#define PX_TESTS_INTEGRATION_LSTATE_H

#include <hiredis/hiredis.h>

/* px_cmd's form ("%s" and "%d" etc., words separated by single spaces,
 * no word holding a space; the word '' an empty argument): the reply,
 * asserted non-NULL. */
redisReply *lstate_cmd(redisContext *c, const char *fmt, ...);

/* lstate_cmd's command appended to c's pipeline (redisAppendCommand). */
void lstate_append(redisContext *c, const char *fmt, ...);

/* Whether key names a record of an identity's state string; then the
 * string's name in str (len bytes at most, NUL-terminated) and the
 * record's field at *field. */
int lstate_split(const char *key, char *str, size_t len, const char **field);

/* Every key of c's database as the previous release kept them: an
 * identity's state string stands for its live records' limit keys. Fills
 * names (at most max) and returns the count. */
int lstate_keys(redisContext *c, char (*names)[128], int max);

#endif
