/* One client request, from parse to reply.
 *
 * A req is created when its command is parsed and linked into its client's
 * FIFO (`cnode`) before it is dispatched, so a request that completes at once
 * can never overtake an earlier one. While an upstream owes its reply it is
 * also linked in that upstream's `inflight` FIFO (`unode`). If the client goes
 * away first, the req becomes an orphan (client == NULL) and is freed when
 * the upstream answers or fails. */
#ifndef PX_PROXY_REQ_H
#define PX_PROXY_REQ_H

#include <stddef.h>
#include <stdint.h>

#include "parser/buf.h"
#include "proxy/core/queue.h"

struct client;
struct resp_cmd;
struct cmd_def;
struct merge;
struct req;

/* Receives the reply of a proxy-made request instead of a client (CLUSTER
 * SLOTS, COMMAND). `frame` is one complete reply, borrowed for the call; the
 * req is freed after the callback returns. */
typedef void req_reply_fn(struct req *req, const char *frame, size_t len);

/* Rewrites the reply of a client's request before it is kept (CLIENT
 * GETREDIR names a Redis connection that the client knows by cellgate's
 * id): appends what the client must see to req->reply. */
typedef void req_filter_fn(struct req *req, const char *frame, size_t len);

struct req {
    struct queue cnode;        /* link in client->reqs (arrival order) */
    struct queue unode;        /* link in upstream->inflight while owed */
    struct client *client;     /* borrowed; NULL once orphaned */
    struct resp_cmd *cmd;      /* owned; NULL for proxy-made requests */
    const struct cmd_def *def; /* borrowed from the command table, or NULL */
    struct buf reply;          /* owned: reply bytes (and relayed pushes) */
    uint64_t sent_ms;          /* loop time when queued upstream */
    req_reply_fn *on_reply;    /* proxy-made request's handler, or NULL */
    req_filter_fn *filter;     /* a client request's reply rewriter, or
                                  NULL */
    void (*resume)(struct req *req); /* a request waiting for something
                                        (upstream_wait_rid) goes on */
    void *ctx;                       /* borrowed: on_reply's context */
    unsigned redirects;              /* MOVED/ASK followed so far */
    uint64_t cid;                    /* id of the client it serves: picks the
                                        connection, so a client's commands keep
                                        their order on each node */
    struct merge *mg;                /* owned: parts of a split or fanned-out
                                        request, NULL for a plain one */
    unsigned part;                   /* a part's index in its root's merge */
    unsigned children;               /* proxy-made requests still working for
                                        this one (limiter script calls) */
    int proto;                       /* protocol of its reply: the client's when
                                        the command was parsed (RESP_PROTO2 for
                                        the proxy's own requests); picks the
                                        connection pool */
    long long add_int;        /* PUBLISH, cluster mode: subscribers cellgate
                                 holds on other nodes, added to the count
                                 of the node that answered */
    size_t npush;             /* bytes of relayed pushes at the start of
                                 reply, that came before the reply */
    unsigned done : 1;        /* the reply is complete */
    unsigned silent : 1;      /* CLIENT REPLY OFF/SKIP: the reply is
                                 dropped, pushes are kept */
    unsigned swallow : 1;     /* proxy's own request: reply is dropped */
    unsigned close_after : 1; /* close the client once this reply is out */
    unsigned blocking : 1;    /* a blocking call (BLPOP...): CLIENT LIST
                                 shows its client blocked until done */
    unsigned tunnel : 1;      /* SYNC/PSYNC: the stream after it is relayed
                                 raw (upstream_send_tunnel) */
    unsigned until_reset : 1; /* proxy's own RESET: frames before its
                                 +RESET belong to the state it ends */
};

/* A new request of `c` owning `cmd`, appended to c's FIFO. `c` may be NULL
 * for the proxy's own requests (swallowed replies). */
struct req *req_new(struct client *c, struct resp_cmd *cmd);

/* Unlinks and frees a request, its command and its reply. */
void req_free(struct req *req);

/* Completes `req` with the reply bytes `p`/`n` (copied). May free `req`:
 * do not touch it after this call. */
void req_reply(struct req *req, const char *p, size_t n);

/* Completes `req` with an error built from fmt: prefixed with "ERR " unless
 * the text starts with an upper-case code, CR/LF replaced by spaces (the only
 * path for error replies, docs/ARCHITECTURE.md). May free `req`. */
void req_reply_error(struct req *req, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Completes `req` with the reply accumulated in req->reply (local handlers
 * encode into it first). May free `req`. */
void req_reply_built(struct req *req);

#endif /* PX_PROXY_REQ_H */
