/* The routing decision (see route.h). The order of the rules matters and
 * is the one a client can observe:
 *
 *   no Redis?            -> NO_UPSTREAM
 *   key positions unknown (single mode, before COMMAND) -> SINGLE
 *   cluster pub/sub by channel -> SLOT of the channel (0 for patterns)
 *   a limiter key, not admin -> NOPERM       (both modes)
 *   single mode          -> SINGLE
 *   movable keys cellgate cannot find -> UNLOCATABLE
 *   no keys              -> ANY
 *   keys of two slots    -> CROSSSLOT
 *   else                 -> SLOT */
#include "proxy/core/route.h"

#include <string.h>

#include "parser/keyspec.h"
#include "parser/resp.h"
#include "parser/slot.h"
#include "proxy/core/util.h"

/* The slot a cluster pub/sub command lives on, or -1 when it is not one:
 * a channel's own slot, slot 0 for patterns. */
static int route_pubsub_slot(const struct resp_cmd *cmd)
{
    const char *p;
    size_t len;

    if (cmd->argc < 2) {
        return -1;
    }
    if (resp_cmd_arg_is(cmd, 0, "publish") ||
        resp_cmd_arg_is(cmd, 0, "subscribe")) {
        p = resp_cmd_arg(cmd, 1, &len);
        return (int)slot_for_key(p, len);
    }
    if (resp_cmd_arg_is(cmd, 0, "psubscribe") ||
        (resp_cmd_arg_is(cmd, 0, "pubsub") &&
         resp_cmd_arg_is(cmd, 1, "numpat"))) {
        return 0;
    }
    return -1;
}

/* Index in keys[] of the first key under `prefix`, or -1. */
static int route_limiter_key(const struct resp_cmd *cmd, const int *keys,
                             int nkeys, const char *prefix)
{
    size_t plen = strlen(prefix), len;
    const char *p;
    int k;

    for (k = 0; k < nkeys; k++) {
        p = resp_cmd_arg(cmd, keys[k], &len);
        if (len >= plen && memcmp(p, prefix, plen) == 0) {
            return k;
        }
    }
    return -1;
}

void route_facts_free(struct route_facts *f)
{
    px_free(f->heap);
    f->heap = NULL;
}

void route_classify_unslotted(const struct keyspec *ks,
                              const struct resp_cmd *cmd, struct route_facts *f)
{
    unsigned fl;
    int *keys;

    route_facts_free(f);
    memset(f, 0, sizeof(*f));
    if (ks == NULL) {
        return; /* known = 0: classified again once the table is known */
    }
    f->known = 1;
    if (keyspec_flags(ks, cmd, &fl) == KEYSPEC_OK) {
        f->listed = 1;
        f->readonly = (fl & KEYSPEC_F_READONLY) != 0;
        f->blocking = (fl & KEYSPEC_F_BLOCKING) != 0;
        f->connection = (fl & KEYSPEC_F_CONNECTION) != 0;
        f->pubsub = (fl & KEYSPEC_F_PUBSUB) != 0;
    }
    /* At most one key per argument after the name. */
    if (cmd->argc > ROUTE_INLINE_KEYS) {
        f->heap = px_malloc((size_t)cmd->argc * sizeof(*f->heap));
    }
    keys = f->heap != NULL ? f->heap : f->inline_keys;
    f->status = keyspec_find(ks, cmd, keys, &f->nkeys);
    if (f->status != KEYSPEC_OK) {
        f->nkeys = 0;
    }
}

void route_classify(const struct keyspec *ks, const struct resp_cmd *cmd,
                    struct route_facts *f)
{
    const int *keys;
    const char *p;
    size_t len;
    unsigned s;
    int k;

    route_classify_unslotted(ks, cmd, f);
    keys = route_facts_keys(f);
    for (k = 0; k < f->nkeys; k++) {
        p = resp_cmd_arg(cmd, keys[k], &len);
        s = slot_for_key(p, len);
        if (k == 0) {
            f->slot = s;
        } else if (s != f->slot) {
            f->cross = 1;
            break;
        }
    }
}

enum route_kind route_decide(const struct route_in *in,
                             const struct resp_cmd *cmd,
                             const struct route_facts *f, struct route *out)
{
    int k, ps;

    memset(out, 0, sizeof(*out));
    if (!in->cluster && !in->has_upstream) {
        return out->kind = ROUTE_NO_UPSTREAM;
    }
    if (!f->known) {
        /* Single mode before COMMAND answered: every key is on the one
         * node anyway (cluster mode holds requests until it is known). */
        return out->kind = in->cluster ? ROUTE_ANY : ROUTE_SINGLE;
    }
    if (in->cluster && (ps = route_pubsub_slot(cmd)) >= 0) {
        out->slot = (unsigned)ps;
        return out->kind = ROUTE_SLOT;
    }
    out->nkeys = f->nkeys;
    if (f->status == KEYSPEC_OK && !in->admin &&
        (k = route_limiter_key(cmd, route_facts_keys(f), f->nkeys,
                               in->key_prefix)) >= 0) {
        out->key = route_facts_keys(f)[k];
        return out->kind = ROUTE_NOPERM;
    }
    if (!in->cluster) {
        return out->kind = ROUTE_SINGLE;
    }
    if (f->status == KEYSPEC_EMOVABLE) {
        return out->kind = ROUTE_UNLOCATABLE;
    }
    if (f->status != KEYSPEC_OK || f->nkeys == 0) {
        /* Keyless, unknown to the node, or malformed: any master answers
         * it (or words the error) as well as another. */
        out->nkeys = 0;
        return out->kind = ROUTE_ANY;
    }
    if (f->cross) {
        return out->kind = ROUTE_CROSSSLOT;
    }
    out->slot = f->slot;
    return out->kind = ROUTE_SLOT;
}
