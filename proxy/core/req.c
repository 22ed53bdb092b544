/* Request lifecycle.
 *
 *   client->reqs:  [r1 done] [r2 owed by up A] [r3 done] ...
 *                      |
 *                      +-- flushed to the client only from the head, while
 *                          the head is done: replies keep request order.
 *
 * A req is freed exactly once: by its client's flush pass after its reply is
 * written out, here after the callback of a proxy-made request, or here
 * when it is an orphan (its client left: req_orphan) or swallowed.
 *
 * Whoever creates a request sets its completion callback; the core calls
 * it and nothing else, so nothing here knows about clients or merges. */
#include "proxy/core/req.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "parser/resp.h"
#include "parser/resp_enc.h"
#include "proxy/core/util.h"

#ifdef PX_ASAN
#include <sanitizer/asan_interface.h>
/* A spare request is poisoned but for its link in the pool, so that a use
 * after its release still fails under AddressSanitizer as a use after free
 * would. */
#define REQ_SPARE_POISON(r)                                                    \
    ASAN_POISON_MEMORY_REGION((char *)(r) + sizeof((r)->cnode),                \
                              sizeof(*(r)) - sizeof((r)->cnode))
#define REQ_SPARE_UNPOISON(r) ASAN_UNPOISON_MEMORY_REGION((r), sizeof(*(r)))
#else
#define REQ_SPARE_POISON(r)   ((void)(r))
#define REQ_SPARE_UNPOISON(r) ((void)(r))
#endif

_Static_assert(offsetof(struct req, cnode) == 0,
               "a spare request's pool link comes first (REQ_SPARE_POISON)");

/* Makes `req`'s memory a new request owning `cmd`. */
static struct req *req_init(struct req *req, struct resp_cmd *cmd)
{
    memset(req, 0, sizeof(*req));
    queue_init(&req->cnode);
    queue_init(&req->unode);
    req->proto = RESP_PROTO2;
    req->cmd = cmd;
    buf_init(&req->reply);
    return req;
}

struct req *req_new(struct resp_cmd *cmd)
{
    return req_init(px_malloc(sizeof(struct req)), cmd);
}

void req_pool_init(struct req_pool *pool)
{
    queue_init(&pool->spare);
    pool->n = 0;
}

void req_pool_free(struct req_pool *pool)
{
    while (!queue_empty(&pool->spare)) {
        struct queue *n = queue_head(&pool->spare);
        struct req *req = container_of(n, struct req, cnode);

        queue_remove(n);
        REQ_SPARE_UNPOISON(req);
        px_free(req);
    }
    pool->n = 0;
}

struct req *req_new_from(struct req_pool *pool, struct resp_cmd *cmd)
{
    struct queue *n;
    struct req *req;

    if (queue_empty(&pool->spare)) {
        return req_new(cmd);
    }
    n = queue_head(&pool->spare);
    queue_remove(n);
    pool->n--;
    req = container_of(n, struct req, cnode);
    REQ_SPARE_UNPOISON(req);
    return req_init(req, cmd);
}

struct req *req_own(struct resp_cmd *cmd, req_reply_fn *fn, void *ctx)
{
    struct req *req;

    if (cmd == NULL) {
        px_oom(0);
    }
    req = req_new(cmd);
    req->own = 1;
    req->on_reply = fn;
    req->ctx = ctx;
    req->swallow = fn == NULL;
    return req;
}

struct req *req_own_argv(int argc, const char *const *argv, req_reply_fn *fn,
                         void *ctx)
{
    size_t lens[8];
    int k;

    PX_ASSERT(argc > 0 && argc <= (int)ARRAY_SIZE(lens));
    for (k = 0; k < argc; k++) {
        lens[k] = strlen(argv[k]);
    }
    return req_own(resp_cmd_new(argc, argv, lens), fn, ctx);
}

/* Frees what `req` owns, not `req` itself. */
static void req_release(struct req *req)
{
    PX_ASSERT(!queue_linked(&req->cnode));
    queue_remove(&req->unode);
    if (req->mg != NULL) {
        req->mg_free(req->mg);
    }
    resp_cmd_free(req->cmd);
    route_facts_free(&req->facts);
    buf_free(&req->reply);
}

void req_free(struct req *req)
{
    req_release(req);
    px_free(req);
}

void req_free_to(struct req_pool *pool, struct req *req)
{
    req_release(req);
    if (pool->n >= REQ_POOL_MAX) {
        px_free(req);
        return;
    }
    queue_insert_head(&pool->spare, &req->cnode);
    pool->n++;
    REQ_SPARE_POISON(req);
}

void req_park(struct queue *q, struct req *req, req_resume_fn *resume,
              void *ctx)
{
    req->resume = resume;
    req->park_ctx = ctx;
    queue_insert_tail(q, &req->unode);
}

void req_resume(struct req *req)
{
    req_resume_fn *resume = req->resume;

    queue_remove(&req->unode);
    req->resume = NULL; /* park_ctx stays: the resume point reads it */
    resume(req);
}

void req_orphan(struct req *req)
{
    void (*cancel)(struct req * req) = req->cancel;

    req->client = NULL;
    req->on_reply = NULL;
    req->filter = NULL;
    req->retry = NULL;
    req->resume = NULL;
    if (cancel != NULL) {
        /* It gives back what it owes through req_owed_back, which frees
         * `req` once nothing more is owed. */
        cancel(req);
        return;
    }
    if (!queue_linked(&req->unode) && req->owed == 0) {
        req_free(req);
    }
}

int req_owed_back(struct req *root)
{
    PX_ASSERT(root->owed > 0);
    root->owed--;
    if (root->on_reply != NULL) {
        return 1;
    }
    if (root->owed == 0 && !queue_linked(&root->unode)) {
        req_free(root);
    }
    return 0;
}

void req_reply(struct req *req, const char *p, size_t n)
{
    if (req->on_reply == NULL) {
        req_free(req); /* swallowed, or its client left */
        return;
    }
    if (req->own) {
        req->on_reply(req, p, n);
        req_free(req);
        return;
    }
    req->on_reply(req, p, n); /* a client's: it may free `req` */
}

void req_reply_built(struct req *req)
{
    req_reply(req, req->reply.data, req->reply.len);
}

void req_reply_error(struct req *req, const char *fmt, ...)
{
    char msg[512];
    char *p;
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (n < 0) {
        msg[0] = '\0';
    }
    /* Arguments are user controlled: no CR/LF may reach the wire. */
    for (p = msg; *p != '\0'; p++) {
        if (*p == '\r' || *p == '\n') {
            *p = ' ';
        }
    }
    if (req->on_reply == NULL) {
        req_free(req);
        return;
    }
    req->made_error = 1;
    /* Redis convention: a text that starts with an upper-case word is
     * already "CODE message"; anything else is an ERR. redis-cell's texts
     * ("Cell error: ...") go out as the module sends them. */
    p = msg;
    while (isupper((unsigned char)*p)) {
        p++;
    }
    if (strncmp(msg, "Cell error: ", 12) == 0) {
        PX_CHECK_OOM(resp_enc_error(&req->reply, msg));
    } else if (p == msg || *p != ' ') {
        PX_CHECK_OOM(buf_append(&req->reply, "-ERR ", 5));
        PX_CHECK_OOM(buf_append_str(&req->reply, msg));
        PX_CHECK_OOM(buf_append(&req->reply, "\r\n", 2));
    } else {
        PX_CHECK_OOM(resp_enc_error(&req->reply, msg));
    }
    req_reply_built(req);
}
