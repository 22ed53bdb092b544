/* The routing decision: where a command must go, from its keys alone.
 *
 * Like Redis Cluster's getNodeByQuery, one pure function looks at the
 * command and says "the node of slot S", "any node", or why there is none;
 * the caller maps the slot to a node and writes any error reply. It needs
 * no loop and no connection, so every rule is unit-tested
 * (tests/unit/test_route.c). */
#ifndef PX_PROXY_CORE_ROUTE_H
#define PX_PROXY_CORE_ROUTE_H

struct keyspec;
struct resp_cmd;

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
    int cluster;                /* cluster mode (else single) */
    int has_upstream;           /* a Redis is configured */
    const struct keyspec *keys; /* key positions (COMMAND), NULL until
                                   known */
    const char *key_prefix;     /* the limiter's keys start with it */
    int admin;                  /* the caller may touch limiter keys */
};

struct route {
    enum route_kind kind; /* see above */
    unsigned slot;        /* ROUTE_SLOT */
    int key;              /* ROUTE_NOPERM: argument index of the key */
    int nkeys;            /* keys found (ROUTE_CROSSSLOT: how many) */
};

/* Decides where `cmd` goes. `keys` has room for cmd->argc entries and
 * receives the argument indexes of its keys. Fills `out` and returns its
 * kind. In cluster mode PUBLISH and SUBSCRIBE go to the channel's slot and
 * PSUBSCRIBE and PUBSUB NUMPAT to slot 0 (patterns have no slot), so one
 * node sees one publisher's messages in order. */
enum route_kind route_decide(const struct route_in *in,
                             const struct resp_cmd *cmd, int *keys,
                             struct route *out);

#endif /* PX_PROXY_CORE_ROUTE_H */
