/* One client request, from parse to reply.
 *
 * A req is created when its command is parsed and linked into its client's
 * FIFO (`cnode`) before it is dispatched, so a request that completes at once
 * can never overtake an earlier one. While an upstream owes its reply it is
 * also linked in that upstream's `inflight` FIFO (`unode`). If the client goes
 * away first, the req becomes an orphan (req_orphan) and is freed when the
 * upstream answers or fails, or when its last owed part comes back.
 *
 * The core never looks into the client: a request reports completion
 * through its one callback (`on_reply`), set by whoever made it. */
#ifndef PX_PROXY_REQ_H
#define PX_PROXY_REQ_H

#include <stddef.h>
#include <stdint.h>

#include "parser/buf.h"
#include "proxy/core/queue.h"
#include "proxy/core/route.h"

struct client;
struct resp_cmd;
struct cmd_def;
struct merge;
struct req;

/* THE completion callback of a request, set by whoever creates it: the
 * client (a client's request: keep the reply, write it out in order) or the
 * proxy code that made it (CLUSTER SLOTS, a limiter script, a part of a
 * split command). `frame` is one complete reply, borrowed for the call; it
 * is req->reply itself when the proxy built the reply in place
 * (req_reply_built). A proxy-made request (`own`) is freed after its
 * callback returns; a client's request belongs to its client. */
typedef void req_reply_fn(struct req *req, const char *frame, size_t len);

/* Rewrites the reply of a client's request before it is kept (CLIENT
 * GETREDIR names a Redis connection that the client knows by cellgate's
 * id): appends what the client must see to req->reply. */
typedef void req_filter_fn(struct req *req, const char *frame, size_t len);

/* What a retry hook did with a reply (req_retry_fn). */
enum req_retry {
    REQ_RETRY_PASS,  /* nothing: the reply goes on to the client */
    REQ_RETRY_TAKEN, /* it completed the request itself; `frame` dropped */
    REQ_RETRY_AGAIN, /* the request must be sent anew (its client's
                        completion callback routes it); `frame` dropped */
};

/* Sees the reply of a client's request before anything else does, and
 * says what to do with it. RANDOMKEY draws again when it drew a limiter
 * key (proxy/hidden.c). The hook does not route: the one who sends the
 * client's requests does, so the hook needs nothing above it. */
typedef enum req_retry req_retry_fn(struct req *req, const char *frame,
                                    size_t len);

/* Frees the state of a request served in parts (a merge). */
typedef void req_parts_free_fn(struct merge *mg);

/* Where a parked request goes on (req_park): the point where its owner
 * stopped, never the start of its routing. */
typedef void req_resume_fn(struct req *req);

struct req {
    struct queue cnode;        /* link in client->reqs (arrival order) */
    struct queue unode;        /* link in upstream->inflight (or a wait
                                  queue of the core) while owed */
    struct client *client;     /* borrowed, never looked into by the core:
                                  the client it serves; NULL for the
                                  proxy's own requests and once orphaned */
    struct resp_cmd *cmd;      /* owned; NULL for local replies */
    const struct cmd_def *def; /* borrowed from the command table, or NULL */
    struct route_facts facts;  /* owned: what the node's key table says of
                                  cmd, classified once by the router */
    struct buf reply;          /* owned: reply bytes (and relayed pushes) */
    uint64_t sent_ms;          /* loop time when queued upstream */
    uint64_t parsed_ns;        /* uv_hrtime when a client's request was
                                  parsed: the start of its latency */
    req_reply_fn *on_reply;    /* the completion callback (see above);
                                  NULL: the reply is dropped and the
                                  request freed (swallowed, orphaned) */
    void *ctx;                 /* borrowed: on_reply's context */
    req_filter_fn *filter;     /* a client request's reply rewriter, or
                                  NULL */
    req_retry_fn *retry;       /* a client request's second look at its
                                  reply, or NULL */
    unsigned tries;            /* times `retry` sent it again */
    req_resume_fn *resume;     /* a parked request goes on there
                                  (req_park, req_resume) */
    void *park_ctx;            /* borrowed: what a parked request waits
                                  on, for its resume point (the upstream
                                  a SYNC waits on), or NULL */
    void (*cancel)(struct req *req); /* its client left: ends at once what
                                        it waits for that nothing else
                                        would end soon (a WAIT timer),
                                        giving back its owed share; set
                                        and cleared by that owner */
    void *cancel_ctx;                /* borrowed: cancel's context */
    unsigned redirects;              /* MOVED/ASK followed so far */
    uint64_t lane;                   /* lane of the client it serves: picks the
                                       connection, so a client's commands keep
                                       their order on each node */
    struct merge *mg;                /* owned: parts of a split or fanned-out
                                        request, NULL for a plain one */
    req_parts_free_fn *mg_free;      /* frees mg */
    unsigned part;                   /* a part's index in its root's merge */
    unsigned owed;                   /* THE count of what the request still
                                        waits for besides its own reply:
                                        parts, script calls, WAIT timers
                                        (req_owed_back) */
    int proto;                       /* protocol of its reply: the client's when
                                        the command was parsed (RESP_PROTO2 for
                                        the proxy's own requests); picks the
                                        connection pool */
    long long filter_arg;            /* the filter's own value (SELECT n: the db
                                        the client had before it; PUBLISH:
                                        the subscribers cellgate holds on
                                        other nodes) */
    size_t npush;                    /* bytes of relayed pushes at the start of
                                        reply, that came before the reply */
    unsigned done : 1;               /* the reply is complete */
    unsigned own : 1;         /* made by the proxy: freed after on_reply */
    unsigned made_error : 1;  /* its reply is an error the proxy wrote */
    unsigned silent : 1;      /* CLIENT REPLY OFF/SKIP: the reply is
                                 dropped, pushes are kept */
    unsigned swallow : 1;     /* proxy's own request: reply is dropped */
    unsigned close_after : 1; /* close the client once this reply is out */
    unsigned blocking : 1;    /* a blocking call (BLPOP...): CLIENT LIST
                                 shows its client blocked until done */
    unsigned tunnel : 1;      /* SYNC/PSYNC: the stream after it is relayed
                                 raw (upstream_send_tunnel) */
    unsigned limiter : 1;     /* the limiter's: sent on its connections
                                 (cluster_limiter_upstream) */
    unsigned until_reset : 1; /* proxy's own RESET: frames before its
                                 +RESET belong to the state it ends */
    unsigned lat : 2;         /* the latency histogram its reply is
                                 observed in (enum req_lat) */
};

/* Which latency a client's request measures, set by the router. */
enum req_lat {
    REQ_LAT_NONE = 0, /* answered by the proxy: not observed */
    REQ_LAT_DECISION, /* CL.THROTTLE, LIMITER: parsed to reply queued */
    REQ_LAT_FORWARD,  /* sent to a node: parsed to reply delivered */
};

/* A new request owning `cmd` (may be NULL), linked nowhere. Its creator
 * sets on_reply (and client, lane, proto for a client's request). */
struct req *req_new(struct resp_cmd *cmd);

/* Spare requests, kept for reuse: a forwarded command costs a request,
 * and glibc's calloc (which never takes from its per-thread cache) and
 * free of one cost about as much as the rest of its parsing. */
struct req_pool {
    struct queue spare; /* owned: freed requests, linked by cnode */
    unsigned n;         /* length of spare */
};

/* At most this many spare requests are kept (about 400 bytes each). */
#define REQ_POOL_MAX 1024

void req_pool_init(struct req_pool *pool);

/* Frees every spare request. */
void req_pool_free(struct req_pool *pool);

/* req_new, reusing a spare request of `pool` when it holds one. */
struct req *req_new_from(struct req_pool *pool, struct resp_cmd *cmd);

/* req_free, keeping the request itself in `pool` while it has room. */
void req_free_to(struct req_pool *pool, struct req *req);

/* The proxy's own request: `cmd` (taken; NULL aborts as out of memory),
 * whose reply goes to `fn` with `ctx` (NULL: dropped), freed afterwards.
 * Send it with the cluster's send API or upstream_send. */
struct req *req_own(struct resp_cmd *cmd, req_reply_fn *fn, void *ctx);

/* The same for the command argv[0..argc). */
struct req *req_own_argv(int argc, const char *const *argv, req_reply_fn *fn,
                         void *ctx);

/* Frees a request, its command, its reply and its parts. It must not be in
 * a client's FIFO any more (the client unlinks it first). */
void req_free(struct req *req);

/* Parks `req` at the tail of `q` (through unode) until its owner lets it
 * go on: the cluster's wait for its map, the wait for Redis's client id
 * and a SYNC's wait for the replies owed before it are these, and each
 * request resumes through its own `resume`, where it stopped, finding
 * what it waited on in req->park_ctx (`ctx`, may be NULL). */
void req_park(struct queue *q, struct req *req, req_resume_fn *resume,
              void *ctx);

/* Unparks `req` (off its queue) and calls its resume point once. */
void req_resume(struct req *req);

/* The client of `req` left: its request becomes an orphan, freed when what
 * it waits for comes back (its reply, its last owed part), or at once when
 * it waits for nothing; what req->cancel names ends now. The one place
 * orphans are made. May free `req`. */
void req_orphan(struct req *req);

/* One of the things `root` waits for (root->owed) came back. Returns 1 when
 * the caller goes on with `root`; 0 when `root` is an orphan, in which case
 * the result is dropped and `root` is freed once nothing more is owed. The
 * one place orphans are freed, besides req_reply. */
int req_owed_back(struct req *root);

/* Completes `req` with the reply bytes `p`/`n` (borrowed). May free `req`:
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
