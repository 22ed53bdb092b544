/* Requests served by several nodes at once, in cluster mode: multi-key
 * commands split by slot (MGET, MSET, DEL, UNLINK, EXISTS, TOUCH), keyless
 * commands fanned out to every master (DBSIZE, KEYS, FLUSHALL, FLUSHDB,
 * SCRIPT LOAD/EXISTS/FLUSH, FUNCTION LOAD), SCAN walking the masters in
 * turn, and INFO (also in single mode: the proxy's own section first). The
 * parts' replies are merged into the one reply Redis would give. */
#ifndef PX_PROXY_MERGE_H
#define PX_PROXY_MERGE_H

struct merge;
struct req;

/* Splits `req` (keys at argument indexes keys[0..nkeys), of slots
 * slots[0..nkeys)) into one part per slot, sent in parallel. Returns 1 when
 * it took `req`, 0 when the command is not one that splits (the caller
 * answers -CROSSSLOT). */
int merge_split(struct req *req, const int *keys, const unsigned *slots,
                int nkeys);

/* Serves a keyless command that needs every master. Returns 1 when it took
 * `req`, 0 when the command is not one of those. */
int merge_fanout(struct req *req);

/* Frees a merge state (a root request's). Accepts NULL. */
void merge_free(struct merge *mg);

#endif /* PX_PROXY_MERGE_H */
