/* Client connections.
 *
 *   socket --read--> resp_reader --cmd--> req (linked in c->reqs first) -->
 *   router_dispatch
 *
 *   c->reqs:  head [done] [owed] [done] ... tail
 *              |
 *              +--> c->wq.out while the head is done --> socket (flush pass)
 *
 * Replies leave strictly in request order: only the head may be written, and
 * a request holds its place in c->reqs before it is dispatched. Messages that
 * no request asked for (pub/sub, MONITOR) are appended behind the newest
 * request, or written at once when none is pending.
 *
 * Back-pressure: at conf.max_pipeline pending requests the client stops
 * reading (the reader keeps what it already has) and resumes below half.
 * A protocol switch (HELLO 3, RESET) pauses the same way until every reply
 * owed before it is out: later commands go over the other protocol's
 * connections and must not overtake earlier ones. So does a request the
 * router holds back (order_held) until the client's earlier requests of
 * another kind are answered: a CL.THROTTLE after a SET, or the other way
 * round, when the two go on different connections (router_order_ready).
 * A client is closed when what cellgate holds for it passes
 * client_max_output_bytes: bytes written but not taken by the kernel, and
 * replies (and pushes) kept in c->reqs behind an unfinished earlier request
 * (a BLPOP, a WAIT, a held LIMITER CHECK), counted where they are stored
 * (c->held). The one reply in transit is not counted (a 70 MB value
 * reaches a client that reads it); anything piling up behind it is.
 *
 * CLIENT REPLY OFF/SKIP marks requests `silent` as they are parsed: they
 * run as usual and their replies are dropped when they complete (pushes
 * relayed meanwhile are kept). */
#include "proxy/client.h"
#include "proxy/client_ops.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "conf/conf.h"
#include "parser/resp.h"
#include "parser/resp_enc.h"
#include "parser/resp_value.h"
#include "proxy/client_tls.h"
#include "proxy/core/cluster.h"
#include "proxy/core/log.h"
#include "proxy/core/metrics.h"
#include "proxy/core/req.h"
#include "proxy/core/tls.h"
#include "proxy/core/upstream.h"
#include "proxy/core/util.h"
#include "proxy/priv.h"
#include "proxy/pubsub.h"
#include "proxy/router.h"
#include "proxy/server.h"

static const char reply_max_clients[] =
    "-ERR max number of clients reached\r\n";

static void client_on_close(uv_handle_t *h)
{
    struct client *c = container_of(h, struct client, tcp);

    resp_reader_free(c->rd);
    wq_free(&c->wq);
    tls_conn_free(c->tls);
    px_free(c->name);
    px_free(c->lib_name);
    px_free(c->lib_ver);
    px_free(c);
}

void client_close(struct client *c)
{
    if (c->closing) {
        return;
    }
    c->closing = 1;
    log_debug("client %llu: closed", (unsigned long long)c->id);
    uv_read_stop((uv_stream_t *)&c->tcp);
    queue_remove(&c->dirty_node);
    client_tls_gone(c);
    /* Requests an upstream still owes a reply to become orphans, freed when
     * the reply or the failure arrives; the rest go now. */
    while (!queue_empty(&c->reqs)) {
        struct req *req = container_of(queue_head(&c->reqs), struct req, cnode);
        queue_remove(&req->cnode);
        c->nreqs--;
        req_orphan(req);
    }
    if (c->priv != NULL) {
        priv_release(c);
    }
    priv_aux_release(c);
    pubsub_client_gone(c);
    queue_remove(&c->node);
    server.nclients--;
    uv_close((uv_handle_t *)&c->tcp, client_on_close);
}

/* Appends `n` bytes of output. A reply appended once the previous reply in
 * transit has been written becomes the reply in transit: however large, it
 * is not counted against the limit. */
static void client_out_append(struct client *c, const char *p, size_t n)
{
    uint64_t written = c->out_total - wq_pending(&c->wq);

    if (written >= c->head_end) {
        c->head_end = c->out_total + n;
    }
    PX_CHECK_OOM(buf_append(&c->wq.out, p, n));
    c->out_total += n;
}

/* Closes `c`, as Redis does, when what cellgate holds for it besides the
 * reply in transit passes client_max_output_bytes; closing frees it all
 * (its requests' replies, its write queue). */
static void client_check_output(struct client *c)
{
    unsigned long long limit = server.conf->client_max_output_bytes;
    uint64_t pending = wq_pending(&c->wq);
    uint64_t written = c->out_total - pending;
    uint64_t transit = c->head_end > written ? c->head_end - written : 0;
    uint64_t counted = pending - transit + c->held;

    if (counted > limit) {
        server.stats.output_limit++;
        log_warn("client %llu: holds %llu bytes of output (%llu waiting "
                 "behind unfinished requests), over client_max_output_bytes "
                 "%llu: closing",
                 (unsigned long long)c->id, (unsigned long long)counted,
                 (unsigned long long)c->held, limit);
        client_close(c);
    }
}

/* Unlinks a request of `c` from its FIFO and frees it. */
static void client_req_free(struct client *c, struct req *req)
{
    queue_remove(&req->cnode);
    c->nreqs--;
    req_free_to(&server.req_pool, req);
}

/* Moves done replies from the head of c->reqs to the output. */
static void client_drain(struct client *c)
{
    int moved = 0;

    while (!c->closing && !queue_empty(&c->reqs)) {
        struct req *req = container_of(queue_head(&c->reqs), struct req, cnode);
        if (!req->done) {
            break;
        }
        client_out_append(c, req->reply.data, req->reply.len);
        c->held -= req->reply.len;
        moved = 1;
        if (req->close_after) {
            /* QUIT or a protocol error: nothing after this is answered. */
            c->quitting = 1;
            client_req_free(c, req);
            uv_read_stop((uv_stream_t *)&c->tcp);
            break;
        }
        client_req_free(c, req);
    }
    if (moved && !c->closing) {
        server_mark_client(c);
        client_check_output(c);
    }
}

/* The completion callback of every client request (req_reply): keeps the
 * reply as the client must see it, then writes out what is in order. */
static void client_on_reply(struct req *req, const char *p, size_t n)
{
    struct client *c = req->client;
    enum req_retry retry = REQ_RETRY_PASS;

    if (req->retry != NULL && p != req->reply.data && !c->closing) {
        retry = req->retry(req, p, n);
    }
    if (retry == REQ_RETRY_AGAIN) {
        router_forward(req); /* still owed: sent again */
        return;
    }
    if (retry == REQ_RETRY_TAKEN) {
        return; /* completed meanwhile */
    }
    if (req->made_error) {
        server.stats.errors++;
    }
    if (req->lat == REQ_LAT_DECISION) {
        PX_ASSERT(c->lim_owed > 0);
        c->lim_owed--;
    } else if (req->lat == REQ_LAT_FORWARD) {
        PX_ASSERT(c->fwd_owed > 0);
        c->fwd_owed--;
    }
    if (c->order_held != NULL && !c->closing && router_order_ready(c)) {
        server_mark_client(c); /* its flush dispatches the held request */
    }
    if (req->lat != REQ_LAT_NONE) {
        metrics_observe(req->lat == REQ_LAT_DECISION ? &server.metrics.decision
                                                     : &server.metrics.forward,
                        uv_hrtime() - req->parsed_ns);
    }
    if (!c->closing && p != req->reply.data && req->reply.len == 0 &&
        !req->silent && req->filter == NULL && !req->close_after &&
        queue_head(&c->reqs) == &req->cnode) {
        /* The usual case, the oldest request's plain reply: straight to the
         * output, with no copy kept in the request. */
        client_out_append(c, p, n);
        client_req_free(c, req);
        client_drain(c);
        server_mark_client(c);
        client_check_output(c);
        return;
    }
    if (p == req->reply.data && n == req->reply.len) {
        /* Built in place by the proxy. */
        if (req->silent) {
            /* CLIENT REPLY OFF/SKIP: the command ran, its reply is
             * dropped; pushes relayed before it stay. */
            req->reply.len = req->npush;
        }
    } else if (req->silent) {
        /* dropped, pushes kept */
    } else if (req->filter != NULL) {
        req->filter(req, p, n);
    } else {
        PX_CHECK_OOM(buf_append(&req->reply, p, n));
    }
    req->done = 1;
    if (c->closing) {
        return;
    }
    /* Its pushes were counted as they came; now the rest of it. */
    PX_ASSERT(req->reply.len >= req->npush);
    c->held += req->reply.len - req->npush;
    if (queue_head(&c->reqs) == &req->cnode) {
        client_drain(c);
    } else {
        client_check_output(c); /* held behind an unfinished request */
    }
}

struct req *client_req_new(struct client *c, struct resp_cmd *cmd)
{
    struct req *req = req_new_from(&server.req_pool, cmd);

    req->client = c;
    req->lane = c->lane;
    req->proto = c->proto;
    req->on_reply = client_on_reply;
    req->parsed_ns = uv_hrtime();
    queue_insert_tail(&c->reqs, &req->cnode);
    c->nreqs++;
    return req;
}

void client_stop_reading(struct client *c)
{
    c->input_done = 1;
    uv_read_stop((uv_stream_t *)&c->tcp);
}

void client_push(struct client *c, const char *p, size_t n)
{
    struct req *tail;

    if (c->closing || c->quitting) {
        return;
    }
    if (queue_empty(&c->reqs)) {
        client_out_append(c, p, n);
        server_mark_client(c);
        client_check_output(c);
        return;
    }
    /* Behind the newest request, so it reaches the client after every
     * reply that came before it on the wire. */
    tail = container_of(queue_tail(&c->reqs), struct req, cnode);
    PX_CHECK_OOM(buf_append(&tail->reply, p, n));
    c->held += n;
    if (!tail->done) {
        tail->npush += n; /* kept even if the reply is dropped */
    }
    client_check_output(c);
}

/* Remembers the command being run, for CLIENT LIST's cmd= and idle=:
 * "get", or "client|list" for a command with subcommands. */
static void client_note_command(struct client *c, const struct resp_cmd *cmd)
{
    static const char *const containers[] = {
        "acl",      "client",  "cluster", "command", "config", "debug",
        "function", "latency", "memory",  "module",  "object", "pubsub",
        "script",   "slowlog", "xgroup",  "xinfo",
    };
    size_t len, k, n = 0, slen;
    const char *p = resp_cmd_arg(cmd, 0, &len);

    c->last_ms = server_now_ms();
    for (k = 0; k < len && n < 24; k++) {
        c->last_cmd[n++] = (char)tolower((unsigned char)p[k]);
    }
    c->last_cmd[n] = '\0';
    if (cmd->argc < 2) {
        return;
    }
    for (k = 0; k < ARRAY_SIZE(containers); k++) {
        /* The first letter rules out nearly all, cheaply: this runs for
         * every command. */
        if (containers[k][0] == c->last_cmd[0] &&
            strcmp(c->last_cmd, containers[k]) == 0) {
            break;
        }
    }
    if (k == ARRAY_SIZE(containers)) {
        return;
    }
    p = resp_cmd_arg(cmd, 1, &slen);
    c->last_cmd[n++] = '|';
    for (k = 0; k < slen && n < sizeof(c->last_cmd) - 1; k++) {
        c->last_cmd[n++] = (char)tolower((unsigned char)p[k]);
    }
    c->last_cmd[n] = '\0';
}

/* Parses and dispatches buffered commands until the reader runs dry or the
 * pipeline limit pauses the client. */
static void client_process(struct client *c)
{
    struct resp_cmd *cmd;
    struct req *req;
    int rc;

    while (!c->closing && !c->quitting && !c->input_done) {
        if (c->proto_wait && c->nreqs == 0) {
            c->proto_wait = 0;
        }
        if (c->order_held != NULL && router_order_ready(c)) {
            req = c->order_held;
            c->order_held = NULL;
            req_resume(req); /* where the router held it (req->resume) */
            continue;
        }
        if (c->nreqs >= server.conf->max_pipeline || c->proto_wait ||
            c->rid_wait || c->order_held != NULL) {
            if (!c->paused) {
                c->paused = 1;
                uv_read_stop((uv_stream_t *)&c->tcp);
            }
            return;
        }
        rc = resp_reader_next(c->rd, &cmd);
        if (rc == RESP_AGAIN) {
            return;
        }
        if (rc == RESP_OK) {
            server.stats.commands++;
            req = client_req_new(c, cmd);
            req->silent = c->reply_off || c->skip_next;
            c->skip_next = 0;
            client_note_command(c, cmd);
            router_dispatch(req);
            continue;
        }
        /* A protocol error: one error reply, then close (Redis). */
        log_debug("client %llu: %s", (unsigned long long)c->id,
                  resp_reader_error(c->rd));
        client_stop_reading(c);
        req = client_req_new(c, NULL);
        req->close_after = 1;
        req_reply_error(req, "%s",
                        rc == RESP_ENOMEM ? "out of memory"
                                          : resp_reader_error(c->rd));
        return;
    }
}

static void client_on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *b)
{
    PX_UNUSED(h);
    PX_UNUSED(hint);
    /* One read at a time on one thread: the slab is always free here. */
    *b = uv_buf_init(server.read_slab, sizeof(server.read_slab));
}

static void client_on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *b)
{
    struct client *c = container_of(s, struct client, tcp);

    if (nread < 0) {
        client_close(c);
        return;
    }
    if (nread == 0 || c->closing) {
        return;
    }
    if (c->tls != NULL) {
        enum client_tls_rc rc = client_tls_read(c, b->base, (size_t)nread);

        if (rc == CLIENT_TLS_CLOSE) {
            client_close(c);
            return;
        }
        if (c->wq.enc.len > 0 || rc == CLIENT_TLS_OPENED) {
            server_mark_client(c); /* the handshake's answer, an alert, or
                                      what waited for the handshake */
        }
        if (rc == CLIENT_TLS_WAIT) {
            return;
        }
    } else if (resp_reader_feed(c->rd, b->base, (size_t)nread) != RESP_OK) {
        px_oom((size_t)nread);
    }
    client_process(c);
    server_flush_early();
}

static void client_on_wq_event(struct wq *wq, int status)
{
    struct client *c = container_of(wq, struct client, wq);

    if (status < 0) {
        log_debug("client %llu: write failed: %s", (unsigned long long)c->id,
                  uv_strerror(status));
        client_close(c);
        return;
    }
    if (c->quitting && wq_pending(&c->wq) == 0) {
        client_close(c);
    }
}

void client_flush(struct client *c)
{
    int rc;

    if (c->closing) {
        return;
    }
    rc = wq_flush(&c->wq);
    if (rc < 0) {
        client_on_wq_event(&c->wq, rc);
        return;
    }
    if (c->quitting) {
        if (wq_pending(&c->wq) == 0) {
            client_close(c);
        }
        return;
    }
    if (c->paused && c->nreqs <= server.conf->max_pipeline / 2 &&
        (!c->proto_wait || c->nreqs == 0) && !c->rid_wait &&
        (c->order_held == NULL || router_order_ready(c))) {
        c->paused = 0;
        client_process(c);
        if (!c->paused && !c->closing && !c->quitting && !c->input_done) {
            uv_read_start((uv_stream_t *)&c->tcp, client_on_alloc,
                          client_on_read);
        }
    }
}

/* Cluster mode: tells the subscription registry about a confirmation of
 * kind k (0 subscribe, 1 psubscribe, 3 unsubscribe, 4 punsubscribe) for
 * channel `chan` (a null one, as the last UNSUBSCRIBE of none sends, names
 * nothing). */
static void client_note_subscription(struct client *c, size_t k,
                                     const struct resp_value *chan)
{
    if (!cluster_sharded(&server.cluster) || c->priv == NULL ||
        chan->type != '$' || chan->null) {
        return; /* single mode counts right, or a null channel */
    }
    pubsub_note(c, c->priv->name, k == 1 || k == 4, k < 3, chan->str,
                chan->len);
}

/* Subscription confirmations are *3 $<kind> <channel or nil> :<count> in
 * RESP2 and the same as a push (>3) in RESP3; the count is the client's
 * total. Every frame of a private connection comes here: the prefix test
 * keeps the others (EXEC's replies, values) from being parsed. */
void client_note_priv_frame(struct client *c, const char *p, size_t n)
{
    static const char *const kinds[] = {
        "subscribe",   "psubscribe",   "ssubscribe",
        "unsubscribe", "punsubscribe", "sunsubscribe",
    };
    struct resp_value v;
    size_t k, used;

    if (n < 16 ||
        (memcmp(p, "*3\r\n$", 5) != 0 && memcmp(p, ">3\r\n$", 5) != 0) ||
        resp_value_parse(p, n, &v, &used) != RESP_OK) {
        return;
    }
    for (k = 0; k < ARRAY_SIZE(kinds); k++) {
        if (resp_value_is(&v.elem[0], kinds[k])) {
            break;
        }
    }
    /* The count, the client's total, is at most 10^9 (as a sanity cap). */
    if (k < ARRAY_SIZE(kinds) && v.elem[2].type == ':' &&
        v.elem[2].integer >= 0 && v.elem[2].integer <= 1000000000) {
        if (k == 2 || k == 5) {
            c->sess.ssubs = (unsigned)v.elem[2].integer;
        } else {
            c->sess.subs = (unsigned)v.elem[2].integer;
            client_note_subscription(c, k, &v.elem[1]);
        }
        c->sess.push_wait = 0;
    }
    resp_value_free(&v);
}

void client_set_proto(struct client *c, int proto)
{
    if (c->proto == proto) {
        return;
    }
    c->proto = proto;
    if (c->priv != NULL) {
        upstream_switch_proto(c->priv, proto);
    }
    /* The request that switched is in c->reqs: anything else there was
     * sent, or will be, over the old protocol's connections. */
    if (c->nreqs > 1) {
        c->proto_wait = 1;
    }
}

void client_clear_state_flags(struct client *c)
{
    pubsub_client_gone(c);
    sess_reset(&c->sess);
}

/* A reply made here that closes `c` once the replies before it are out. */
static void client_close_after_owed(struct client *c)
{
    struct req *req = client_req_new(c, NULL);

    req->close_after = 1;
    req_reply_built(req);
}

/* What the modules below this one may do to a client (installed in every
 * client it accepts). */
static const struct client_ops client_ops = {
    .push = client_push,
    .frame = client_note_priv_frame,
    .state_gone = client_clear_state_flags,
    .close_after_owed = client_close_after_owed,
    .close = client_close,
    .stop_reading = client_stop_reading,
};

void client_accept(uv_stream_t *listener)
{
    const struct conf *conf = server.conf;
    struct resp_limits lim;
    struct client *c = px_calloc(1, sizeof(*c));
    int rc;

    c->id = ++server.next_client_id;
    c->lane = c->id;
    queue_init(&c->reqs);
    queue_init(&c->aux);
    queue_init(&c->node);
    queue_init(&c->dirty_node);
    queue_init(&c->hs_link);
    wq_init(&c->wq, (uv_stream_t *)&c->tcp, client_on_wq_event);
    c->authed = conf->requirepass == NULL;
    c->proto = RESP_PROTO2;
    c->ops = &client_ops;
    c->ctime_ms = server_now_ms();
    c->last_ms = c->ctime_ms;
    memcpy(c->last_cmd, "NULL", 5);
    lim.max_bulk = conf->max_bulk_bytes;
    lim.max_elements = conf->max_elements;
    lim.max_inline = conf->max_inline_bytes;
    c->rd = resp_reader_new(&lim);
    if (c->rd == NULL) {
        px_oom(sizeof(lim));
    }
    uv_tcp_init(server.loop, &c->tcp);
    queue_insert_tail(&server.clients, &c->node);
    server.nclients++;
    rc = uv_accept(listener, (uv_stream_t *)&c->tcp);
    if (rc < 0) {
        log_warn("accept failed: %s", uv_strerror(rc));
        client_close(c);
        return;
    }
    server.stats.connections++;
    uv_tcp_nodelay(&c->tcp, 1);
    if (listener == (uv_stream_t *)&server.tls_listener) {
        client_tls_accept(c);
    }
    if (server.nclients > conf->max_clients) {
        server.stats.rejected_conns++;
        log_warn("client %llu: max number of clients reached (%u)",
                 (unsigned long long)c->id, conf->max_clients);
        client_out_append(c, reply_max_clients, sizeof(reply_max_clients) - 1);
        c->quitting = 1;
        server_mark_client(c);
        if (c->tls == NULL) {
            return;
        }
        /* TLS: the refusal is sent once the handshake is done. */
    }
    rc = uv_read_start((uv_stream_t *)&c->tcp, client_on_alloc, client_on_read);
    if (rc < 0) {
        client_close(c);
        return;
    }
    log_debug("client %llu: connected", (unsigned long long)c->id);
}
