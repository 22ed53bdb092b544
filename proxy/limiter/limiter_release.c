/* Concurrency limits in LIMITER's tree commands (see limiter_release.h).
 *
 * Design: a concurrency level is a set of slots, one per token, not a
 * cost; so a CHECK of a path with one must name its token (ID), WAIT is
 * refused (a slot frees when its holder releases it, at no time a timer
 * could know), and RELEASE is a call of the path's concurrency limits
 * alone (limiter_tree.c builds it with op STORE_RELEASE), whose stores
 * mark in each limit's undo whether the token held a slot there. */
#include "proxy/limiter/limiter_release.h"

#include <stdio.h>
#include <string.h>

#include "algorithms/concurrency.h"
#include "conf/limits.h"
#include "parser/resp.h"
#include "parser/resp_enc.h"
#include "proxy/core/req.h"
#include "proxy/core/util.h"

int limiter_release_token(struct req *req, int i, char **id, size_t *len)
{
    const char *p;
    size_t n;

    if (*id != NULL) {
        req_reply_error(req, "syntax error: ID given more than once");
        return -1;
    }
    p = resp_cmd_arg(req->cmd, i, &n);
    if (n < 1 || n > CONCURRENCY_MAX_TOKEN) {
        req_reply_error(req, "ERR ID must be between 1 and %d bytes",
                        CONCURRENCY_MAX_TOKEN);
        return -1;
    }
    *id = px_strndup(p, n);
    *len = n;
    return 0;
}

const char *limiter_release_check(const struct store_check *c,
                                  const struct limits_tree *t, const char *path,
                                  size_t plen, char *buf, size_t cap)
{
    unsigned i;

    if (c->op != STORE_CHECK || c->id != NULL) {
        return NULL;
    }
    for (i = 0; i < c->n; i++) {
        const struct limits_level *lev;
        const char *rule;
        if (c->lim[i].algo != LIMITS_CONCURRENCY) {
            continue;
        }
        lev = &c->lv->level[c->lim[i].level];
        rule = limits_rule_pattern(t, lev->rule);
        snprintf(buf, cap,
                 "ERR LIMITER CHECK of '%.*s' needs ID <token>: level '%s' "
                 "is a "
                 "concurrency limit",
                 (int)(plen > 128 ? 128 : plen), path,
                 rule != NULL ? rule : "?");
        return buf;
    }
    return NULL;
}

void limiter_release_reply(struct store_check *c)
{
    long long held = 0;
    unsigned i;

    for (i = 0; i < c->n; i++) {
        held += c->lim[i].algo == LIMITS_CONCURRENCY &&
                strcmp(c->lim[i].undo, "1") == 0;
    }
    PX_CHECK_OOM(resp_enc_int(&c->root->reply, held));
    req_reply_built(c->root);
}
