/* Requests served by several nodes at once, in cluster mode: multi-key
 * commands split by slot (MGET, MSET, DEL, UNLINK, EXISTS, TOUCH), keyless
 * commands fanned out to every master (DBSIZE, KEYS, FLUSHALL, FLUSHDB,
 * SCRIPT LOAD/EXISTS/FLUSH, FUNCTION LOAD), SCAN walking the masters in
 * turn, and INFO (also in single mode: the proxy's own section first). The
 * parts' replies are merged into the one reply Redis would give. */
#ifndef PX_PROXY_MERGE_H
#define PX_PROXY_MERGE_H

#include "proxy/merge_build.h"

struct merge;
struct req;

/* Splits `req` (keys at argument indexes keys[0..nkeys), of slots
 * slots[0..nkeys), each followed by key_step - 1 arguments of its own) into
 * one part per slot, sent in parallel, their replies merged as `kind`
 * says. Returns 1 when it took `req`, 0 when splitting is off
 * (split_multikey: no; the caller answers -CROSSSLOT). */
int merge_split(struct req *req, enum merge_kind kind, int key_step,
                const int *keys, const unsigned *slots, int nkeys);

/* Serves a keyless command that needs every master (CMD_FANOUT and
 * CMD_KILL rows), its replies merged as `merge` says. Returns 1 when it
 * took `req`, 0 when it goes to the one node as it is (single mode, all
 * but INFO). */
int merge_fanout(struct req *req, enum merge_kind merge);

/* Frees a merge state (a root request's). Accepts NULL. */
void merge_free(struct merge *mg);

#endif /* PX_PROXY_MERGE_H */
