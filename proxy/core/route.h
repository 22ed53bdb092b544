/* The routing decision: where a command must go, from its keys alone.
 *
 * Like Redis Cluster's getNodeByQuery, one pure function looks at the
 * command and says "the node of slot S", "any node", or why there is none;
 * the caller maps the slot to a node and writes any error reply. It needs
 * no loop and no connection, so every rule is unit-tested
 * (tests/unit/test_route.c). */
#ifndef PX_PROXY_CORE_ROUTE_H
#define PX_PROXY_CORE_ROUTE_H

#include <stddef.h>

struct keyspec;
struct resp_cmd;

/* Key indexes a request keeps inline; a longer command (a big MGET) puts
 * them on the heap. */
#define ROUTE_INLINE_KEYS 8

/* What the node's key table says about one request, computed once after
 * the command table lookup (route_classify) and kept with the request
 * (req->facts), so every later question (where it goes, whether it may
 * touch the limiter's keys, which cached refusals it makes stale, whether
 * it needs a connection of its own) reads it instead of asking the key
 * table again. */
struct route_facts {
    unsigned known : 1;      /* classified with a key table; 0: before the
                                node's COMMAND reply was known */
    unsigned listed : 1;     /* the node knows the command (its flags
                                below are meaningful) */
    unsigned readonly : 1;   /* flag "readonly": writes no key */
    unsigned blocking : 1;   /* flag "blocking" */
    unsigned connection : 1; /* ACL category "@connection" */
    unsigned pubsub : 1;     /* flag "pubsub" */
    unsigned cross : 1;      /* keys of more than one slot */
    int status;              /* keyspec_find's: KEYSPEC_OK, KEYSPEC_UNKNOWN,
                                KEYSPEC_EMOVABLE or KEYSPEC_ESYNTAX */
    int nkeys;               /* keys found (0 unless status is KEYSPEC_OK) */
    unsigned slot;           /* the slot of the first key */
    int *heap;               /* owned: the key indexes when more than
                                ROUTE_INLINE_KEYS could be found, else NULL */
    int inline_keys[ROUTE_INLINE_KEYS]; /* the key indexes otherwise */
};

/* The argument indexes of the request's keys, facts->nkeys of them. */
static inline const int *route_facts_keys(const struct route_facts *f)
{
    return f->heap != NULL ? f->heap : f->inline_keys;
}

/* Classifies `cmd` against the node's key table `ks` (NULL while unknown:
 * then only `known` is 0). Frees what an earlier classification of the
 * same facts held, so a request may be classified again. */
void route_classify(const struct keyspec *ks, const struct resp_cmd *cmd,
                    struct route_facts *f);

/* route_classify without the keys' slots (slot and cross stay 0), for a
 * proxy in front of one node, where route_decide never reads them: a
 * forwarded command spares a CRC16 per key. */
void route_classify_unslotted(const struct keyspec *ks,
                              const struct resp_cmd *cmd,
                              struct route_facts *f);

/* Frees what `f` owns (a request's req_free does it). */
void route_facts_free(struct route_facts *f);

enum route_kind {
    ROUTE_SLOT,        /* the master of `slot` */
    ROUTE_ANY,         /* keyless (or unknown to the node): any master */
    ROUTE_SINGLE,      /* single mode: the one node */
    ROUTE_NO_UPSTREAM, /* embedded mode: no Redis at all */
    ROUTE_NOPERM,      /* a key under the limiter's prefix, and the caller
                          is not admin: `key` is its argument index */
    ROUTE_UNLOCATABLE, /* cluster mode: keys cellgate cannot locate */
    ROUTE_CROSSSLOT,   /* keys of several slots: keys[0..nkeys) */
};

/* What the decision depends on besides the command. */
struct route_in {
    int cluster;            /* cluster mode (else single) */
    int has_upstream;       /* a Redis is configured */
    const char *key_prefix; /* the limiter's keys start with it */
    int admin;              /* the caller may touch limiter keys */
};

struct route {
    enum route_kind kind; /* see above */
    unsigned slot;        /* ROUTE_SLOT */
    int key;              /* ROUTE_NOPERM: argument index of the key */
    int nkeys;            /* keys found (ROUTE_CROSSSLOT: how many) */
};

/* Decides where `cmd`, classified as `f` (its keys: route_facts_keys),
 * goes. Fills `out` and returns its kind. In cluster mode PUBLISH and SUBSCRIBE
 * go to the channel's slot and PSUBSCRIBE and PUBSUB NUMPAT to slot 0 (patterns
 * have no slot), so one node sees one publisher's messages in order. */
enum route_kind route_decide(const struct route_in *in,
                             const struct resp_cmd *cmd,
                             const struct route_facts *f, struct route *out);

#endif /* PX_PROXY_CORE_ROUTE_H */
