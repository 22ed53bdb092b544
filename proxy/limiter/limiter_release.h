/* Concurrency limits in LIMITER's tree commands: the ID <token> of CHECK
 * and PEEK, the rules a path with a concurrency level sets (an ID to
 * CHECK it, no WAIT), and LIMITER RELEASE <path> <token>'s reply. The
 * parsing and decisions stay in limiter_tree.c, which calls these. */
#ifndef PX_PROXY_LIMITER_LIMITER_RELEASE_H
#define PX_PROXY_LIMITER_LIMITER_RELEASE_H

#include <stddef.h>

#include "proxy/limiter/store.h"

struct limits_tree;
struct req;

/* Takes argument i of `req` as a token (ID <token>, RELEASE's <token>)
 * into *id (a copy; the caller frees it) unless *id is set already. 0, or
 * -1 after replying the error: given twice, empty, longer than 512
 * bytes. */
int limiter_release_token(struct req *req, int i, char **id, size_t *len);

/* The error text (static, or in `buf` of `cap` bytes) of a call `c`
 * built from the levels of `path` (plen bytes) that its concurrency
 * limits refuse: a CHECK without ID names the first such level by its
 * rule in `t`. NULL when there is none. */
const char *limiter_release_check(const struct store_check *c,
                                  const struct limits_tree *t, const char *path,
                                  size_t plen, char *buf, size_t cap);

/* RELEASE's reply: the levels where the token held a slot (each
 * concurrency limit whose undo the store set to "1"), as an integer. */
void limiter_release_reply(struct store_check *c);

#endif /* PX_PROXY_LIMITER_LIMITER_RELEASE_H */
