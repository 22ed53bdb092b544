/* Session commands (see session.h).
 *
 * A client's session is cellgate's: these handlers read and write
 * struct client and answer in Redis 7.2's words and validation, whatever
 * the version of the Redis behind (7.0 knows no CLIENT SETINFO). The ids,
 * addresses and names in CLIENT ID/INFO/LIST/KILL are cellgate's own
 * clients': the connections cellgate holds to Redis are an implementation
 * detail no client should see or kill.
 *
 *   CLIENT SETNAME/GETNAME/SETINFO/ID/INFO/LIST/NO-EVICT/REPLY,
 *   CLIENT KILL, SELECT 0, READONLY, READWRITE, ASKING   -> answered here
 *   CLIENT TRACKING on, NO-TOUCH on, SELECT n            -> private upstream
 *   CLIENT UNBLOCK <id>                                  -> translated to the
 *                                   Redis id of that client's private one
 *   CLIENT PAUSE/UNPAUSE/HELP/CACHING, unknown subcommands -> forwarded
 *   (a subcommand the node knows and cellgate does not: private upstream,
 *    since it may change the connection) */
#include "proxy/session.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "conf/conf.h"
#include "parser/buf.h"
#include "parser/resp.h"
#include "parser/resp_enc.h"
#include "proxy/client.h"
#include "proxy/client_addr.h"
#include "proxy/client_ops.h"
#include "proxy/client_output.h"
#include "proxy/core/cluster.h"
#include "proxy/core/core.h"
#include "proxy/core/req.h"
#include "proxy/core/upstream.h"
#include "proxy/core/util.h"
#include "proxy/priv_send.h"
#include "proxy/server.h"
#include "proxy/tracking.h"

/* Shows at most this much of a client's argument in an error. */
#define SESSION_ARG_SHOWN 128

static const char reply_ok[] = "+OK\r\n";

/* ---------------- Helpers ---------------- */

void session_ok(struct req *req)
{
    req_reply(req, reply_ok, sizeof(reply_ok) - 1);
}

/* Argument i as a strict decimal (Redis's string2ll). 0 or -1. */
int session_arg_ll(const struct req *req, int i, long long *out)
{
    size_t len;
    const char *p = resp_cmd_arg(req->cmd, i, &len);

    return resp_parse_ll(p, len, out);
}

int session_attr_ok(const char *p, size_t len)
{
    size_t k;

    for (k = 0; k < len; k++) {
        if (p[k] < '!' || p[k] > '~') {
            return 0;
        }
    }
    return 1;
}

/* Replaces an owned string with argument i (empty: none). */
static void session_set_attr(char **field, const struct req *req, int i)
{
    size_t len;
    const char *p = resp_cmd_arg(req->cmd, i, &len);

    px_free(*field);
    *field = len > 0 ? px_strndup(p, len) : NULL;
}

/* Client types of CLIENT LIST TYPE and CLIENT KILL TYPE. cellgate's
 * clients are never masters or replicas. */
enum session_type {
    SESSION_T_NORMAL,
    SESSION_T_PUBSUB,
    SESSION_T_REPLICA,
    SESSION_T_MASTER,
    SESSION_T_BAD,
};

static enum session_type session_type_arg(const struct req *req, int i)
{
    if (resp_cmd_arg_is(req->cmd, i, "normal")) {
        return SESSION_T_NORMAL;
    }
    if (resp_cmd_arg_is(req->cmd, i, "pubsub")) {
        return SESSION_T_PUBSUB;
    }
    if (resp_cmd_arg_is(req->cmd, i, "replica") ||
        resp_cmd_arg_is(req->cmd, i, "slave")) {
        return SESSION_T_REPLICA;
    }
    if (resp_cmd_arg_is(req->cmd, i, "master")) {
        return SESSION_T_MASTER;
    }
    return SESSION_T_BAD;
}

static enum session_type session_type_of(const struct client *c)
{
    return sess_subscribed(&c->sess) ? SESSION_T_PUBSUB : SESSION_T_NORMAL;
}

static void session_unknown_type(struct req *req, int i)
{
    size_t len;
    const char *p = resp_cmd_arg(req->cmd, i, &len);

    req_reply_error(req, "Unknown client type '%.*s'",
                    (int)(len > SESSION_ARG_SHOWN ? SESSION_ARG_SHOWN : len),
                    p);
}

/* ---------------- CLIENT LIST / INFO ---------------- */

/* True while a blocking call of `c` (BLPOP...) waits for its reply. */
static int session_blocked(const struct client *c)
{
    const struct queue *q;

    for (q = queue_head(&c->reqs); q != &c->reqs; q = q->next) {
        const struct req *r = container_of(q, struct req, cnode);
        if (r->blocking && !r->done) {
            return 1;
        }
    }
    return 0;
}

/* The flags letters of CLIENT LIST, in Redis's order. */
static void session_flags(const struct client *c, char *out)
{
    char *p = out;

    if (c->sess.monitor) {
        *p++ = 'O';
    }
    if (sess_subscribed(&c->sess)) {
        *p++ = 'P';
    }
    if (sess_in_multi(&c->sess)) {
        *p++ = 'x';
    }
    if (session_blocked(c)) {
        *p++ = 'b';
    }
    if (c->sess.tracking) {
        *p++ = 't';
    }
    if (c->quitting || c->input_done) {
        *p++ = 'c';
    }
    if (c->readonly) {
        *p++ = 'r';
    }
    if (c->no_evict) {
        *p++ = 'e';
    }
    if (c->sess.no_touch) {
        *p++ = 'T';
    }
    if (p == out) {
        *p++ = 'N';
    }
    *p = '\0';
}

struct client *session_client_by_id(uint64_t id)
{
    struct queue *q;

    for (q = queue_head(&server.clients); q != &server.clients; q = q->next) {
        struct client *c = container_of(q, struct client, node);
        if (c->id == id && !c->closing) {
            return c;
        }
    }
    return NULL;
}

/* Appends the CLIENT LIST line of `c`, with its final newline. */
static void session_client_line(struct buf *b, const struct client *c)
{
    char addr[CLIENT_ADDR_MAX], laddr[CLIENT_ADDR_MAX], flags[16];
    char line[768];
    uint64_t now = core_now_ms(&server.core);
    /* omem: what counts toward client_max_output_bytes, held replies
     * included. */
    size_t omem = client_output_bytes(c), qbuf = resp_reader_pending(c->rd);
    uv_os_fd_t fd = -1;
    int n;

    client_addr(c, 0, addr, sizeof(addr));
    client_addr(c, 1, laddr, sizeof(laddr));
    session_flags(c, flags);
    uv_fileno((const uv_handle_t *)&c->tcp, &fd);
    n = snprintf(
        line, sizeof(line),
        "id=%llu addr=%s laddr=%s fd=%d name=%s age=%llu idle=%llu "
        "flags=%s db=%ld sub=%u psub=0 ssub=%u multi=%d qbuf=%zu "
        "qbuf-free=0 argv-mem=0 multi-mem=0 rbs=0 rbp=0 obl=0 oll=%u "
        "omem=%zu tot-mem=%zu events=%s cmd=%s user=%s redir=%d resp=%d "
        "lib-name=%s lib-ver=%s\n",
        (unsigned long long)c->id, addr, laddr, (int)fd,
        c->name != NULL ? c->name : "",
        (unsigned long long)((now - c->ctime_ms) / 1000),
        (unsigned long long)((now - c->last_ms) / 1000), flags, c->sess.db,
        c->sess.subs, c->sess.ssubs,
        sess_in_multi(&c->sess) ? c->sess.multi_count : -1, qbuf, c->nreqs,
        omem, omem + qbuf + sizeof(*c), wq_pending(&c->wq) > 0 ? "rw" : "r",
        c->last_cmd, c->admin ? "admin" : "default", c->sess.tracking ? 0 : -1,
        c->proto, c->lib_name != NULL ? c->lib_name : "",
        c->lib_ver != NULL ? c->lib_ver : "");
    if (n > 0) {
        PX_CHECK_OOM(buf_append(
            b, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1));
    }
}

/* Replies with `text` as Redis replies CLIENT LIST: a verbatim string in
 * RESP3, a bulk string in RESP2. Frees nothing. */
static void session_reply_text(struct req *req, const struct buf *text)
{
    PX_CHECK_OOM(resp_enc_verbatim(&req->reply, "txt", text->data, text->len,
                                   req->proto));
    req_reply_built(req);
}

static void session_client_info(struct req *req)
{
    struct buf text;

    buf_init(&text);
    session_client_line(&text, req->client);
    session_reply_text(req, &text);
    buf_free(&text);
}

/* CLIENT LIST [TYPE normal|master|replica|pubsub] [ID id [id ...]] */
static void session_client_list(struct req *req)
{
    int argc = req->cmd->argc, i, type = -1;
    struct buf text;
    struct queue *q;

    buf_init(&text);
    if (argc == 4 && resp_cmd_arg_is(req->cmd, 2, "type")) {
        type = (int)session_type_arg(req, 3);
        if (type == SESSION_T_BAD) {
            session_unknown_type(req, 3);
            return;
        }
    } else if (argc > 3 && resp_cmd_arg_is(req->cmd, 2, "id")) {
        for (i = 3; i < argc; i++) {
            long long id;
            struct client *c;
            if (session_arg_ll(req, i, &id) != 0) {
                buf_free(&text);
                req_reply_error(req, "Invalid client ID");
                return;
            }
            c = id > 0 ? session_client_by_id((uint64_t)id) : NULL;
            if (c != NULL) {
                session_client_line(&text, c);
            }
        }
        session_reply_text(req, &text);
        buf_free(&text);
        return;
    } else if (argc != 2) {
        req_reply_error(req, "syntax error");
        return;
    }
    for (q = queue_head(&server.clients); q != &server.clients; q = q->next) {
        struct client *c = container_of(q, struct client, node);
        if (!c->closing && (type < 0 || (int)session_type_of(c) == type)) {
            session_client_line(&text, c);
        }
    }
    session_reply_text(req, &text);
    buf_free(&text);
}

/* ---------------- CLIENT KILL ---------------- */

/* The filters of CLIENT KILL. */
struct session_kill {
    const char *addr, *laddr; /* borrowed from the command, or NULL */
    size_t addr_len, laddr_len;
    int type;    /* enum session_type, or -1 */
    int user;    /* 0 default, 1 admin, -1 any */
    uint64_t id; /* 0 any */
    int skipme;  /* leave the caller alone */
};

/* Parses the new-style filters. 0, or -1 after replying with the error. */
static int session_kill_parse(struct req *req, struct session_kill *k)
{
    int argc = req->cmd->argc, i;
    size_t len;
    const char *p;

    for (i = 2; i < argc; i += 2) {
        if (i + 1 >= argc) {
            req_reply_error(req, "syntax error");
            return -1;
        }
        p = resp_cmd_arg(req->cmd, i + 1, &len);
        if (resp_cmd_arg_is(req->cmd, i, "id")) {
            long long id;
            if (session_arg_ll(req, i + 1, &id) != 0 || id < 1) {
                req_reply_error(req, "client-id should be greater than 0");
                return -1;
            }
            k->id = (uint64_t)id;
        } else if (resp_cmd_arg_is(req->cmd, i, "type")) {
            k->type = (int)session_type_arg(req, i + 1);
            if (k->type == SESSION_T_BAD) {
                session_unknown_type(req, i + 1);
                return -1;
            }
        } else if (resp_cmd_arg_is(req->cmd, i, "addr")) {
            k->addr = p;
            k->addr_len = len;
        } else if (resp_cmd_arg_is(req->cmd, i, "laddr")) {
            k->laddr = p;
            k->laddr_len = len;
        } else if (resp_cmd_arg_is(req->cmd, i, "user")) {
            if (resp_word_is(p, len, "default")) {
                k->user = 0;
            } else if (resp_word_is(p, len, "admin") &&
                       server.conf->admin_password != NULL) {
                k->user = 1;
            } else {
                req_reply_error(
                    req, "No such user '%.*s'",
                    (int)(len > SESSION_ARG_SHOWN ? SESSION_ARG_SHOWN : len),
                    p);
                return -1;
            }
        } else if (resp_cmd_arg_is(req->cmd, i, "skipme")) {
            if (resp_word_is(p, len, "yes")) {
                k->skipme = 1;
            } else if (resp_word_is(p, len, "no")) {
                k->skipme = 0;
            } else {
                req_reply_error(req, "syntax error");
                return -1;
            }
        } else {
            req_reply_error(req, "syntax error");
            return -1;
        }
    }
    return 0;
}

static int session_kill_matches(const struct session_kill *k,
                                const struct client *c, const struct client *me)
{
    char a[CLIENT_ADDR_MAX];

    if (c->closing || (c == me && k->skipme)) {
        return 0;
    }
    if (k->id != 0 && c->id != k->id) {
        return 0;
    }
    if (k->type >= 0 && (int)session_type_of(c) != k->type) {
        return 0;
    }
    if (k->user >= 0 && (int)c->admin != k->user) {
        return 0;
    }
    if (k->addr != NULL) {
        client_addr(c, 0, a, sizeof(a));
        if (strlen(a) != k->addr_len || memcmp(a, k->addr, k->addr_len) != 0) {
            return 0;
        }
    }
    if (k->laddr != NULL) {
        client_addr(c, 1, a, sizeof(a));
        if (strlen(a) != k->laddr_len ||
            memcmp(a, k->laddr, k->laddr_len) != 0) {
            return 0;
        }
    }
    return 1;
}

/* CLIENT KILL addr:port | CLIENT KILL <filter> <value> ...: closes
 * cellgate's own clients (admin only when admin_password is set). */
static void session_client_kill(struct req *req)
{
    struct session_kill k = { .type = -1, .user = -1, .skipme = 1 };
    struct client *me = req->client;
    struct queue *q, *next;
    long long killed = 0;
    int old_style = req->cmd->argc == 3, kill_me = 0;

    if (server.conf->admin_password != NULL && !me->admin) {
        req_reply_error(req, "NOPERM this user has no permissions to run the "
                             "'client|kill' command");
        return;
    }
    if (old_style) {
        k.addr = resp_cmd_arg(req->cmd, 2, &k.addr_len);
        k.skipme = 0; /* the old form may kill the caller */
    } else if (session_kill_parse(req, &k) != 0) {
        return;
    }
    for (q = queue_head(&server.clients); q != &server.clients; q = next) {
        struct client *c = container_of(q, struct client, node);
        next = q->next;
        if (!session_kill_matches(&k, c, me)) {
            continue;
        }
        killed++;
        if (c == me) {
            kill_me = 1;
        } else {
            c->ops->close(c);
        }
    }
    if (kill_me) {
        /* After this reply, as Redis does: nothing after it is read. */
        me->ops->stop_reading(me);
        req->close_after = 1;
    }
    if (!old_style) {
        PX_CHECK_OOM(resp_enc_int(&req->reply, killed));
        req_reply_built(req);
    } else if (killed == 0) {
        req_reply_error(req, "No such client");
    } else {
        session_ok(req);
    }
}

/* ---------------- Other CLIENT subcommands ---------------- */

static void session_client_id(struct req *req)
{
    PX_CHECK_OOM(resp_enc_int(&req->reply, (long long)req->client->id));
    req_reply_built(req);
}

static void session_client_setname(struct req *req)
{
    size_t len;
    const char *p = resp_cmd_arg(req->cmd, 2, &len);

    if (!session_attr_ok(p, len)) {
        req_reply_error(req, "Client names cannot contain spaces, newlines "
                             "or special characters.");
        return;
    }
    session_set_attr(&req->client->name, req, 2);
    session_ok(req);
}

static void session_client_getname(struct req *req)
{
    const char *name = req->client->name;

    if (name == NULL) {
        PX_CHECK_OOM(resp_enc_null(&req->reply, req->proto));
    } else {
        PX_CHECK_OOM(resp_enc_bulk(&req->reply, name, strlen(name)));
    }
    req_reply_built(req);
}

/* CLIENT SETINFO LIB-NAME|LIB-VER <value> (Redis 7.2). */
static void session_client_setinfo(struct req *req)
{
    struct client *c = req->client;
    size_t alen, vlen;
    const char *attr = resp_cmd_arg(req->cmd, 2, &alen);
    const char *val = resp_cmd_arg(req->cmd, 3, &vlen);
    int shown = (int)(alen > SESSION_ARG_SHOWN ? SESSION_ARG_SHOWN : alen);
    char **field;

    if (resp_word_is(attr, alen, "lib-name")) {
        field = &c->lib_name;
    } else if (resp_word_is(attr, alen, "lib-ver")) {
        field = &c->lib_ver;
    } else {
        req_reply_error(req, "Unrecognized option '%.*s'", shown, attr);
        return;
    }
    if (!session_attr_ok(val, vlen)) {
        req_reply_error(req,
                        "%.*s cannot contain spaces, newlines or special "
                        "characters.",
                        shown, attr);
        return;
    }
    session_set_attr(field, req, 3);
    session_ok(req);
}

/* Parses argument 2 as ON or OFF into *on. 0, or -1 after replying. */
int session_on_off(struct req *req, int *on)
{
    if (resp_cmd_arg_is(req->cmd, 2, "on")) {
        *on = 1;
    } else if (resp_cmd_arg_is(req->cmd, 2, "off")) {
        *on = 0;
    } else {
        req_reply_error(req, "syntax error");
        return -1;
    }
    return 0;
}

static void session_client_no_evict(struct req *req)
{
    int on;

    if (session_on_off(req, &on) == 0) {
        req->client->no_evict = (unsigned)on;
        session_ok(req);
    }
}

/* CLIENT NO-TOUCH changes what Redis does on reads: on, it needs a private
 * connection; off, the connection is given back once idle. */
static void session_client_no_touch(struct req *req)
{
    struct client *c = req->client;
    int on;

    if (session_on_off(req, &on) != 0) {
        return;
    }
    if (on) {
        c->sess.no_touch = 1;
        priv_send(req);
        return;
    }
    c->sess.no_touch = 0;
    if (c->priv != NULL) {
        priv_send(req);
        return;
    }
    session_ok(req);
}

/* CLIENT REPLY ON|OFF|SKIP: cellgate drops the replies itself; the
 * commands still run. OFF and SKIP have no reply of their own. */
static void session_client_reply(struct req *req)
{
    struct client *c = req->client;

    if (resp_cmd_arg_is(req->cmd, 2, "on")) {
        c->reply_off = 0;
        c->skip_next = 0;
        req->silent = 0;
        session_ok(req);
    } else if (resp_cmd_arg_is(req->cmd, 2, "off")) {
        c->reply_off = 1;
        req->silent = 1;
        req_reply(req, "", 0);
    } else if (resp_cmd_arg_is(req->cmd, 2, "skip")) {
        c->skip_next = !c->reply_off;
        req->silent = 1;
        req_reply(req, "", 0);
    } else {
        req_reply_error(req, "syntax error");
    }
}

/* ---------------- The CLIENT table ---------------- */

typedef void session_proc_fn(struct req *req);

struct session_sub {
    const char *name;      /* lower case */
    int arity;             /* Redis convention, counting "client" */
    session_proc_fn *proc; /* NULL: forwarded as it is */
    int untracked_fwd;     /* forwarded when the client does not track
                              (Redis refuses it, with no effect, on any
                              connection) */
};

/* CLIENT PAUSE and UNPAUSE have rows of their own (command.c). */
static const struct session_sub session_subs[] = {
    { "caching", 3, tracking_client_caching, 1 },
    { "getname", 2, session_client_getname, 0 },
    { "getredir", 2, tracking_client_getredir, 0 },
    { "help", 2, NULL, 0 },
    { "id", 2, session_client_id, 0 },
    { "info", 2, session_client_info, 0 },
    { "kill", -3, session_client_kill, 0 },
    { "list", -2, session_client_list, 0 },
    { "no-evict", 3, session_client_no_evict, 0 },
    { "no-touch", 3, session_client_no_touch, 0 },
    { "reply", 3, session_client_reply, 0 },
    { "setinfo", 4, session_client_setinfo, 0 },
    { "setname", 3, session_client_setname, 0 },
    { "tracking", -3, tracking_client_tracking, 0 },
    { "trackinginfo", 2, tracking_client_trackinginfo, 0 },
    { "unblock", -3, tracking_client_unblock, 0 },
};

static const struct session_sub *session_sub_of(const struct resp_cmd *cmd)
{
    size_t k;

    for (k = 0; k < ARRAY_SIZE(session_subs); k++) {
        if (resp_cmd_arg_is(cmd, 1, session_subs[k].name)) {
            return &session_subs[k];
        }
    }
    return NULL;
}

static int session_sub_arity_ok(const struct session_sub *s, int argc)
{
    return !((s->arity >= 0 && argc != s->arity) ||
             (s->arity < 0 && argc < -s->arity) ||
             (strcmp(s->name, "unblock") == 0 && argc > 4));
}

enum cmd_how session_client_pick(const struct resp_cmd *cmd,
                                 const struct cmd_ctx *ctx, unsigned *flags)
{
    const struct session_sub *s = session_sub_of(cmd);

    if (s == NULL) {
        /* A subcommand of a newer Redis may change the connection: give
         * it a private one for good. One the node does not know gets its
         * error. */
        if (ctx->listed) {
            *flags |= CMD_F_STICKY;
            return CMD_PRIVATE;
        }
        return CMD_FORWARD;
    }
    if (!session_sub_arity_ok(s, cmd->argc)) {
        return CMD_LOCAL; /* session_client answers Redis's error */
    }
    if (s->proc == NULL || (s->untracked_fwd && !ctx->tracking)) {
        return CMD_FORWARD;
    }
    return CMD_LOCAL;
}

void session_client(struct req *req)
{
    const struct session_sub *s = session_sub_of(req->cmd);

    /* session_client_pick sent every other case on its way. */
    PX_ASSERT(s != NULL);
    if (!session_sub_arity_ok(s, req->cmd->argc)) {
        req_reply_error(
            req, "wrong number of arguments for 'client|%s' command", s->name);
        return;
    }
    PX_ASSERT(s->proc != NULL);
    s->proc(req);
}

/* ---------------- SELECT, READONLY, READWRITE, ASKING ---------------- */

/* The node's reply to SELECT n: passed on; a refusal restores the db the
 * client had. */
static void session_select_reply(struct req *req, const char *frame, size_t len)
{
    if (len > 0 && frame[0] == '-' && req->client != NULL) {
        req->client->sess.db = (long)req->filter_arg;
    }
    PX_CHECK_OOM(buf_append(&req->reply, frame, len));
}

void session_select(struct req *req)
{
    struct client *c = req->client;
    long long db;

    if (session_arg_ll(req, 1, &db) != 0) {
        req_reply_error(req, "value is not an integer or out of range");
        return;
    }
    if (db < INT_MIN || db > INT_MAX) {
        req_reply_error(req, "value is out of range, value must between "
                             "-2147483648 and 2147483647");
        return;
    }
    if (cluster_sharded(&server.cluster) && db != 0) {
        req_reply_error(req, "ERR SELECT is not allowed in cluster mode");
        return;
    }
    if (db < 0) {
        req_reply_error(req, "ERR DB index is out of range");
        return;
    }
    if (db == 0 && (c->priv == NULL || c->sess.db == 0)) {
        c->sess.db = 0;
        session_ok(req);
        return;
    }
    /* SELECT n, or back to 0 on the connection that selected n. The node
     * checks the range. The client's db is set now, so the commands it
     * pipelined behind follow it to the private connection, and set back
     * if the node refuses it (SELECT 99 of 16 databases), so CL.THROTTLE
     * acts on the db the connection really has. */
    req->filter_arg = c->sess.db;
    req->filter = session_select_reply;
    c->sess.db = (long)db;
    priv_send(req);
}

void session_readonly(struct req *req)
{
    req->client->readonly = resp_cmd_arg_is(req->cmd, 0, "readonly");
    session_ok(req);
}

void session_asking(struct req *req)
{
    session_ok(req);
}
