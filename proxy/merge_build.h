/* Merging the replies of a request's parts into the one reply Redis would
 * give: the kinds of merge, the state a split or fanned-out request keeps,
 * and merge_build, which needs nothing but the parts' bytes (no loop, no
 * connection, no global), so every kind is unit-tested
 * (tests/unit/test_merge_build.c). Sending the parts is merge.c's job. */
#ifndef PX_PROXY_MERGE_BUILD_H
#define PX_PROXY_MERGE_BUILD_H

#include "parser/buf.h"

/* SCAN cursors carry the index of the master being walked in their low
 * part: cursor = node_cursor * MERGE_SCAN_NODES + index. */
#define MERGE_SCAN_NODES 1024

enum merge_kind {
    MERGE_BY_KEY, /* MGET: array elements back in key order */
    MERGE_SUM,    /* DEL, UNLINK, EXISTS, TOUCH, DBSIZE: sum of integers */
    MERGE_ALL_OK, /* MSET, FLUSHALL, FLUSHDB, SCRIPT FLUSH: +OK from all */
    MERGE_CONCAT, /* KEYS: the arrays one after another */
    MERGE_SAME,   /* SCRIPT LOAD, FUNCTION LOAD: every node says the same */
    MERGE_AND,    /* SCRIPT EXISTS: 1 only where every node says 1 */
    MERGE_SCAN,   /* SCAN: one node's page, cursor rewritten */
    MERGE_INFO,   /* INFO: the proxy's section, then each node's text */
    MERGE_ANY_OK, /* SCRIPT KILL, FUNCTION KILL: +OK when one node killed
                     something, else the first error */
    MERGE_NUMSUB, /* PUBSUB NUMSUB: [channel, count ...], counts summed */
};

/* How many kinds there are (the last one plus one). */
#define MERGE_KINDS (MERGE_NUMSUB + 1)

struct merge {
    enum merge_kind kind;    /* how the parts combine */
    unsigned nparts;         /* parts sent */
    struct buf *parts;       /* owned: each part's reply */
    unsigned *key_part;      /* owned, MERGE_BY_KEY: part of each key */
    unsigned nkeys;          /* length of key_part */
    unsigned scan_node;      /* MERGE_SCAN: index of the master asked */
    unsigned nmasters;       /* MERGE_SCAN: masters when asked */
    char (*names)[300];      /* owned, MERGE_INFO: node of each part */
    struct buf proxy_info;   /* owned, MERGE_INFO: the proxy's own section,
                                written before merge_build */
    unsigned info_proxy : 1; /* MERGE_INFO: one of the proxy's sections was
                                asked for (proxy_info holds them) */
    unsigned info_sections;  /* MERGE_INFO: which (info.h's bits) */
    unsigned oneshot : 1;    /* parts travel on connections lent for the call
                                (the shared ones may be stuck behind a busy
                                script) */
    const char *hide_prefix; /* borrowed, MERGE_CONCAT and MERGE_SCAN (KEYS,
                                SCAN of an ordinary client): names under it
                                are left out (hidden_filter.h); NULL: none */
};

/* A merge of `kind` waiting for `nparts` parts (their replies go to
 * parts[i]). */
struct merge *merge_new(enum merge_kind kind, unsigned nparts);

/* Frees a merge state. Accepts NULL. */
void merge_free(struct merge *mg);

/* Builds the reply of the whole request from its parts' replies, in
 * protocol `proto` (RESP_PROTO2 or RESP_PROTO3), appended to `out`. The
 * first error among the parts is the reply, as a single node's would be;
 * a part of an unexpected shape gives an -ERR. */
void merge_build(struct merge *mg, struct buf *out, int proto);

#endif /* PX_PROXY_MERGE_BUILD_H */
