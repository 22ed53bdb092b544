/* The command table and the handlers of proxy-local commands.
 *
 * Replies built here are spelled in the protocol of the request (req->proto,
 * the client's at the time): a null is `$-1` for RESP2 clients and `_` for
 * RESP3 ones, HELLO's reply an array or a map.
 *
 * The table is sorted by name and searched with bsearch. It is small on
 * purpose: a command that is not here is forwarded byte for byte, so newer
 * Redis and module commands work without a table edit. Fixed replies are
 * static wire strings, built once (Redis createSharedObjects). */
#include "proxy/command.h"

#include <ctype.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "conf/conf.h"
#include "parser/resp.h"
#include "parser/resp_enc.h"
#include "proxy/client.h"
#include "proxy/client_addr.h"
#include "proxy/core/log.h"
#include "proxy/core/req.h"
#include "proxy/core/upstream.h"
#include "proxy/core/util.h"
#include "proxy/limiter/limiter.h"
#include "proxy/priv.h"
#include "proxy/priv_send.h"
#include "proxy/server.h"
#include "proxy/session.h"

/* Longest command name we look up; longer names are never in the table. */
#define CMD_NAME_MAX 32

static const char reply_ok[] = "+OK\r\n";
static const char reply_pong[] = "+PONG\r\n";
static const char reply_reset[] = "+RESET\r\n";

/* ---------------- Helpers ---------------- */

static const char *cmd_arg(const struct req *req, int i, size_t *len)
{
    return resp_cmd_arg(req->cmd, i, len);
}

/* Parses argument i as Redis's string2ll does (what HELLO's protover goes
 * through). 0 or -1. */
static int cmd_arg_strict_ll(const struct req *req, int i, long long *out)
{
    size_t len;
    const char *p = cmd_arg(req, i, &len);

    return resp_parse_ll(p, len, out);
}

static void reply_static(struct req *req, const char *wire, size_t n)
{
    req_reply(req, wire, n);
}

/* Compares without an early exit on the first different byte. */
static int cmd_secret_eq(const char *secret, const char *p, size_t len)
{
    size_t slen = strlen(secret), k;
    unsigned char diff = (unsigned char)(slen != len);

    for (k = 0; k < len; k++) {
        diff |= (unsigned char)(p[k] ^ secret[k % (slen ? slen : 1)]);
    }
    return diff == 0;
}

/* A refused AUTH or HELLO AUTH: counted (INFO acl_access_denied_auth, as
 * Redis names it), and logged at most once a second with the number
 * refused since the last line, so a guessing client cannot flood the log
 * and an operator still sees every burst. */
static void cmd_auth_failed(struct client *c, const char *user, size_t ulen)
{
    struct server_stats *st = &server.stats;
    uint64_t now = server_now_ms();
    char addr[CLIENT_ADDR_MAX];

    st->auth_failures++;
    st->auth_unlogged++;
    if (st->auth_log_ms != 0 && now - st->auth_log_ms < 1000) {
        return;
    }
    client_addr(c, 0, addr, sizeof(addr));
    log_warn("AUTH refused for user '%.*s' from %s (%llu refused since the "
             "last such line)",
             (int)(ulen > 64 ? 64 : ulen), user, addr,
             (unsigned long long)st->auth_unlogged);
    st->auth_log_ms = now;
    st->auth_unlogged = 0;
}

/* Checks a user/password pair. Sets the client's auth bits on success.
 * Returns 1 when accepted; a refusal is counted and logged. */
static int cmd_check_auth(struct client *c, const char *user, size_t ulen,
                          const char *pass, size_t plen)
{
    const struct conf *conf = server.conf;

    if (ulen == 7 && memcmp(user, "default", 7) == 0) {
        if (conf->requirepass == NULL ||
            cmd_secret_eq(core_secret(&server.core, CONF_SECRET_REQUIREPASS),
                          pass, plen)) {
            c->authed = 1;
            c->admin = 0;
            return 1;
        }
    } else if (ulen == 5 && memcmp(user, "admin", 5) == 0 &&
               conf->admin_password != NULL &&
               cmd_secret_eq(core_secret(&server.core, CONF_SECRET_ADMIN), pass,
                             plen)) {
        c->authed = 1;
        c->admin = 1;
        return 1;
    }
    cmd_auth_failed(c, user, ulen);
    return 0;
}

/* ---------------- Local commands ---------------- */

/* PING reaches Redis whenever there is one: it is the health check of
 * clients and load balancers, and a PONG made up here would hide a node
 * that is down, loading or busy (-BUSY from a long script). Only embedded
 * mode answers it. A subscribed client's goes to its subscriptions'
 * connection: Redis answers it with a pub/sub shaped reply. */
enum cmd_how cmd_pick_ping(const struct resp_cmd *cmd,
                           const struct cmd_ctx *ctx, unsigned *flags)
{
    (void)cmd;
    (void)flags;
    if (ctx->has_priv && ctx->subscribed) {
        return CMD_PRIVATE;
    }
    return ctx->has_upstream ? CMD_FORWARD : CMD_LOCAL;
}

/* PING in embedded mode. */
static void cmd_ping(struct req *req)
{
    size_t len;
    const char *p;

    if (req->cmd->argc > 2) {
        req_reply_error(req, "wrong number of arguments for 'ping' command");
        return;
    }
    if (req->cmd->argc == 1) {
        reply_static(req, reply_pong, sizeof(reply_pong) - 1);
        return;
    }
    p = cmd_arg(req, 1, &len);
    PX_CHECK_OOM(resp_enc_bulk(&req->reply, p, len));
    req_reply_built(req);
}

static void cmd_echo(struct req *req)
{
    size_t len;
    const char *p = cmd_arg(req, 1, &len);

    PX_CHECK_OOM(resp_enc_bulk(&req->reply, p, len));
    req_reply_built(req);
}

static void cmd_quit(struct req *req)
{
    /* Replies owed before QUIT still go out; nothing after it is read. */
    client_stop_reading(req->client);
    req->close_after = 1;
    reply_static(req, reply_ok, sizeof(reply_ok) - 1);
}

static void cmd_auth(struct req *req)
{
    struct client *c = req->client;
    const char *user = "default", *pass;
    size_t ulen = 7, plen;

    if (req->cmd->argc > 3) {
        req_reply_error(req, "syntax error");
        return;
    }
    if (req->cmd->argc == 2 && server.conf->requirepass == NULL) {
        req_reply_error(req, "ERR AUTH <password> called without any password "
                             "configured for the default user. Are you sure "
                             "your configuration is correct?");
        return;
    }
    if (req->cmd->argc == 3) {
        user = cmd_arg(req, 1, &ulen);
        pass = cmd_arg(req, 2, &plen);
    } else {
        pass = cmd_arg(req, 1, &plen);
    }
    if (!cmd_check_auth(c, user, ulen, pass, plen)) {
        req_reply_error(req, "WRONGPASS invalid username-password pair or "
                             "user is disabled.");
        return;
    }
    reply_static(req, reply_ok, sizeof(reply_ok) - 1);
}

/* Sets the client's name from argument i (empty: no name). Returns 1, or 0
 * after replying with Redis's error. */
static int cmd_set_name(struct req *req, int i)
{
    struct client *c = req->client;
    size_t len;
    const char *p = cmd_arg(req, i, &len);

    if (!session_attr_ok(p, len)) {
        req_reply_error(req, "Client names cannot contain spaces, "
                             "newlines or special characters.");
        return 0;
    }
    px_free(c->name);
    c->name = len > 0 ? px_strndup(p, len) : NULL;
    return 1;
}

/* HELLO's reply, shaped as Redis's: a map of seven fields in the client's
 * (new) protocol, an array of 14 in RESP2. */
static void cmd_hello_reply(struct req *req)
{
    struct buf *b = &req->reply;
    static const char version[] = PX_VERSION;
    int proto = req->client->proto;

    req->proto = proto;
    PX_CHECK_OOM(resp_enc_map_header(b, 7, proto));
    PX_CHECK_OOM(resp_enc_bulk(b, "server", 6));
    PX_CHECK_OOM(resp_enc_bulk(b, "cellgate", 8));
    PX_CHECK_OOM(resp_enc_bulk(b, "version", 7));
    PX_CHECK_OOM(resp_enc_bulk(b, version, sizeof(version) - 1));
    PX_CHECK_OOM(resp_enc_bulk(b, "proto", 5));
    PX_CHECK_OOM(resp_enc_int(b, proto));
    PX_CHECK_OOM(resp_enc_bulk(b, "id", 2));
    PX_CHECK_OOM(resp_enc_int(b, (long long)req->client->id));
    PX_CHECK_OOM(resp_enc_bulk(b, "mode", 4));
    PX_CHECK_OOM(resp_enc_bulk(b, "standalone", 10));
    PX_CHECK_OOM(resp_enc_bulk(b, "role", 4));
    PX_CHECK_OOM(resp_enc_bulk(b, "master", 6));
    PX_CHECK_OOM(resp_enc_bulk(b, "modules", 7));
    PX_CHECK_OOM(resp_enc_array_header(b, 0));
    req_reply_built(req);
}

/* HELLO [protover [AUTH user pass] [SETNAME name]], as Redis 7.0 runs it:
 * the options are checked one after the other (a bad one stops there, and
 * AUTH takes effect in its turn), then the client must be authenticated,
 * then the name is set and the protocol switches. Redis 7.0 sets the name
 * before the credentials are checked; 7.2 does not, and neither does
 * cellgate. HELLO with no protover answers in the current protocol. */
static void cmd_hello(struct req *req)
{
    struct client *c = req->client;
    int argc = req->cmd->argc, i, name_at = 0;
    long long ver = 0;

    if (c->proto == RESP_PROTO2 && sess_subscribed(&c->sess)) {
        /* Redis refuses it before running it (processCommand). */
        req_reply_error(req, "Can't execute 'hello': only (P|S)SUBSCRIBE / "
                             "(P|S)UNSUBSCRIBE / PING / QUIT / RESET are "
                             "allowed in this context");
        return;
    }
    if (argc >= 2) {
        if (cmd_arg_strict_ll(req, 1, &ver) != 0) {
            req_reply_error(req, "Protocol version is not an integer or out "
                                 "of range");
            return;
        }
        if (ver < RESP_PROTO2 || ver > RESP_PROTO3) {
            req_reply_error(req, "NOPROTO unsupported protocol version");
            return;
        }
    }
    for (i = 2; i < argc; i++) {
        if (resp_cmd_arg_is(req->cmd, i, "auth") && i + 2 < argc) {
            size_t ulen, plen;
            const char *user = cmd_arg(req, i + 1, &ulen);
            const char *pass = cmd_arg(req, i + 2, &plen);
            if (!cmd_check_auth(c, user, ulen, pass, plen)) {
                req_reply_error(req, "WRONGPASS invalid username-password "
                                     "pair or user is disabled.");
                return;
            }
            i += 2;
        } else if (resp_cmd_arg_is(req->cmd, i, "setname") && i + 1 < argc) {
            size_t nlen;
            const char *name = cmd_arg(req, i + 1, &nlen);
            if (!session_attr_ok(name, nlen)) {
                req_reply_error(req, "Client names cannot contain spaces, "
                                     "newlines or special characters.");
                return;
            }
            name_at = i + 1; /* set once the client is authenticated */
            i += 1;
        } else {
            size_t alen;
            const char *a = cmd_arg(req, i, &alen);
            req_reply_error(req, "Syntax error in HELLO option '%.*s'",
                            (int)(alen > 128 ? 128 : alen), a);
            return;
        }
    }
    if (!c->authed) {
        req_reply_error(req, "NOAUTH HELLO must be called with the client "
                             "already authenticated, otherwise the HELLO "
                             "AUTH <user> <pass> option can be used to "
                             "authenticate the client and select the RESP "
                             "protocol version at the same time");
        return;
    }
    if (ver != 0 && ver != c->proto && sess_in_multi(&c->sess)) {
        /* The transaction's connection would queue the switch until EXEC;
         * cellgate does not follow a protocol change there. */
        req_reply_error(req, "cellgate cannot change the protocol inside "
                             "MULTI");
        return;
    }
    if (name_at > 0) {
        cmd_set_name(req, name_at);
    }
    if (ver != 0) {
        client_set_proto(c, (int)ver);
    }
    cmd_hello_reply(req);
}

/* SCRIPT (its KILL, LOAD, EXISTS, FLUSH have rows of their own): DEBUG
 * turns the connection into a Lua debugger session, so it gets a private
 * one for good; DEBUG NO ends it there, and is a no-op without one; the
 * rest is forwarded. */
enum cmd_how cmd_pick_script(const struct resp_cmd *cmd,
                             const struct cmd_ctx *ctx, unsigned *flags)
{
    if (resp_cmd_arg_is(cmd, 1, "debug") && cmd->argc == 3) {
        if (resp_cmd_arg_is(cmd, 2, "no")) {
            return ctx->has_priv ? CMD_PRIVATE : CMD_LOCAL;
        }
        if (resp_cmd_arg_is(cmd, 2, "yes") || resp_cmd_arg_is(cmd, 2, "sync")) {
            *flags |= CMD_F_STICKY;
            return CMD_PRIVATE;
        }
    }
    return CMD_FORWARD;
}

/* SCRIPT DEBUG NO with no debugger session. */
static void cmd_script_debug_no(struct req *req)
{
    reply_static(req, reply_ok, sizeof(reply_ok) - 1);
}

/* FUNCTION's subcommands other than KILL and LOAD (rows of their own):
 * forwarded, though the row stays in the class of commands cellgate
 * serves itself, as SCRIPT's and PING's do (see cmd_def.how). */
static enum cmd_how cmd_pick_function(const struct resp_cmd *cmd,
                                      const struct cmd_ctx *ctx,
                                      unsigned *flags)
{
    (void)cmd;
    (void)ctx;
    (void)flags;
    return CMD_FORWARD;
}

/* UNSUBSCRIBE, PUNSUBSCRIBE, SUNSUBSCRIBE: on the subscriptions'
 * connection; a client with none has no subscription and is answered
 * here (on a shared connection Redis's one frame per channel would be
 * matched to other requests). */
enum cmd_how cmd_pick_unsub(const struct resp_cmd *cmd,
                            const struct cmd_ctx *ctx, unsigned *flags)
{
    (void)cmd;
    (void)flags;
    return ctx->has_priv ? CMD_PRIVATE : CMD_LOCAL;
}

/* Redis's answer to an unsubscribe with no subscription: one confirmation
 * per channel named (or one with a null channel), each with a count of
 * 0. */
static void cmd_unsubscribe_none(struct req *req)
{
    struct buf *b = &req->reply;
    size_t nlen, klen, len;
    const char *name = resp_cmd_arg(req->cmd, 0, &nlen);
    char kind[16];
    int i, n = req->cmd->argc > 1 ? req->cmd->argc - 1 : 1;

    for (klen = 0; klen < nlen && klen < sizeof(kind); klen++) {
        kind[klen] = (char)tolower((unsigned char)name[klen]);
    }
    for (i = 0; i < n; i++) {
        if (req->proto == RESP_PROTO3) {
            PX_CHECK_OOM(buf_append(b, ">3\r\n", 4));
        } else {
            PX_CHECK_OOM(resp_enc_array_header(b, 3));
        }
        PX_CHECK_OOM(resp_enc_bulk(b, kind, klen));
        if (req->cmd->argc > 1) {
            const char *ch = resp_cmd_arg(req->cmd, i + 1, &len);
            PX_CHECK_OOM(resp_enc_bulk(b, ch, len));
        } else {
            PX_CHECK_OOM(resp_enc_null(b, req->proto));
        }
        PX_CHECK_OOM(resp_enc_int(b, 0));
    }
    req_reply_built(req);
}

/* RESET: the session goes back to a new connection's (name, protocol,
 * auth, reply mode, flags; lib-name and lib-ver stay, as in Redis), and the
 * private upstream, if any, is given back (its pool resets it). */
static void cmd_reset(struct req *req)
{
    struct client *c = req->client;

    px_free(c->name);
    c->name = NULL;
    c->authed = server.conf->requirepass == NULL;
    c->admin = 0;
    c->reply_off = 0;
    c->skip_next = 0;
    req->silent = 0;
    c->no_evict = 0;
    c->readonly = 0;
    priv_aux_release(c);
    if (c->priv != NULL && !queue_empty(&c->priv->inflight)) {
        /* Owed replies come first: the RESET queues behind them, and
         * Redis clears the connection's state itself. */
        client_clear_state_flags(c);
        c->priv->proto = RESP_PROTO2;
        client_set_proto(c, RESP_PROTO2);
        priv_send(req);
        return;
    }
    if (c->priv != NULL) {
        priv_release(c);
    }
    client_clear_state_flags(c);
    client_set_proto(c, RESP_PROTO2);
    reply_static(req, reply_reset, sizeof(reply_reset) - 1);
}

/* ---------------- The limiter commands ---------------- */

/* Each is also its own resume point: a request the limiter's store
 * holds (a cluster before its slot map) comes back here, past the
 * router's checks. */
static void cmd_cl_throttle(struct req *req)
{
    limiter_throttle(&server.limiter, req, req->client->admin,
                     (unsigned)req->client->sess.db, cmd_cl_throttle);
}

static void cmd_limiter(struct req *req)
{
    limiter_command(&server.limiter, req, req->client->admin, cmd_limiter);
}

/* ---------------- The table ---------------- */

/* Sorted by name (test_command checks it). Where each command goes, in
 * one place: `how` (cmd_def.h) for every command cellgate treats
 * specially, `pick` where the way depends on the arguments; a command not
 * listed is forwarded to the node of its keys. "name|sub" rows say how a
 * subcommand is served (fanned out, or KILL). */
static const struct cmd_def cmd_defs[] = {
    { .name = "asking", .arity = 1, .how = CMD_LOCAL, .proc = session_asking },
    { .name = "auth",
      .arity = -2,
      .how = CMD_LOCAL,
      .flags = CMD_F_NOAUTH,
      .proc = cmd_auth },
    { .name = "blmove",
      .arity = 6,
      .how = CMD_PRIVATE,
      .flags = CMD_F_BLOCKING },
    { .name = "blmpop",
      .arity = -5,
      .how = CMD_PRIVATE,
      .flags = CMD_F_BLOCKING },
    { .name = "blpop",
      .arity = -3,
      .how = CMD_PRIVATE,
      .flags = CMD_F_BLOCKING },
    { .name = "brpop",
      .arity = -3,
      .how = CMD_PRIVATE,
      .flags = CMD_F_BLOCKING },
    { .name = "brpoplpush",
      .arity = 4,
      .how = CMD_PRIVATE,
      .flags = CMD_F_BLOCKING },
    { .name = "bzmpop",
      .arity = -5,
      .how = CMD_PRIVATE,
      .flags = CMD_F_BLOCKING },
    { .name = "bzpopmax",
      .arity = -3,
      .how = CMD_PRIVATE,
      .flags = CMD_F_BLOCKING },
    { .name = "bzpopmin",
      .arity = -3,
      .how = CMD_PRIVATE,
      .flags = CMD_F_BLOCKING },
    { .name = "cl.throttle",
      .arity = -1,
      .how = CMD_LIMITER,
      .proc = cmd_cl_throttle },
    { .name = "client",
      .arity = -2,
      .how = CMD_LOCAL,
      .flags = CMD_F_SUBCMDS,
      .proc = session_client,
      .pick = session_client_pick },
    /* Subcommands that reach every master: found by cmd_sub only, never
     * as a command name. */
    { .name = "client|pause",
      .arity = -3,
      .how = CMD_FANOUT,
      .merge = MERGE_ALL_OK },
    { .name = "client|unpause",
      .arity = 2,
      .how = CMD_FANOUT,
      .merge = MERGE_ALL_OK },
    /* COMMAND is a @connection command that changes nothing: forwarded
     * (the entry keeps the @connection rule of the router off it). */
    { .name = "command", .arity = -1, .how = CMD_FORWARD },
    { .name = "dbsize", .arity = 1, .how = CMD_FANOUT, .merge = MERGE_SUM },
    /* DEBUG SLEEP, DEBUG RELOAD...: a connection of its own for the call,
     * so nothing queues behind it on a shared one. */
    { .name = "debug",
      .arity = -2,
      .how = CMD_PRIVATE,
      .flags = CMD_F_BLOCKING },
    { .name = "del", .arity = -2, .how = CMD_SPLIT, .merge = MERGE_SUM },
    /* EXEC, DISCARD, UNWATCH: where the transaction or WATCH lives (the
     * private connection), else anywhere Redis answers its error. */
    { .name = "discard", .arity = 1, .how = CMD_FORWARD, .flags = CMD_F_TXEND },
    { .name = "echo", .arity = 2, .how = CMD_LOCAL, .proc = cmd_echo },
    { .name = "exec", .arity = 1, .how = CMD_FORWARD, .flags = CMD_F_TXEND },
    { .name = "exists", .arity = -2, .how = CMD_SPLIT, .merge = MERGE_SUM },
    { .name = "flushall",
      .arity = -1,
      .how = CMD_FANOUT,
      .flags = CMD_F_FLUSH,
      .merge = MERGE_ALL_OK },
    { .name = "flushdb",
      .arity = -1,
      .how = CMD_FANOUT,
      .flags = CMD_F_FLUSH,
      .merge = MERGE_ALL_OK },
    { .name = "function",
      .arity = -2,
      .how = CMD_LOCAL,
      .flags = CMD_F_SUBCMDS,
      .pick = cmd_pick_function },
    { .name = "function|kill",
      .arity = 2,
      .how = CMD_KILL,
      .merge = MERGE_ANY_OK },
    { .name = "function|load",
      .arity = -3,
      .how = CMD_FANOUT,
      .merge = MERGE_SAME },
    { .name = "hello",
      .arity = -1,
      .how = CMD_LOCAL,
      .flags = CMD_F_NOAUTH,
      .proc = cmd_hello },
    /* INFO: every master's text under "# Node host:port", after the
     * proxy's own "# Proxy" section (also in single mode). */
    { .name = "info", .arity = -1, .how = CMD_FANOUT, .merge = MERGE_INFO },
    { .name = "keys", .arity = 2, .how = CMD_FANOUT, .merge = MERGE_CONCAT },
    { .name = "limiter", .arity = -1, .how = CMD_LIMITER, .proc = cmd_limiter },
    { .name = "mget", .arity = -2, .how = CMD_SPLIT, .merge = MERGE_BY_KEY },
    { .name = "monitor",
      .arity = 1,
      .how = CMD_PRIVATE,
      .flags = CMD_F_MONITOR },
    /* Split by slot: not atomic across slots (Redis refuses such
     * commands); `split_multikey: no` turns it off. */
    { .name = "mset",
      .arity = -3,
      .how = CMD_SPLIT,
      .merge = MERGE_ALL_OK,
      .key_step = 2 },
    { .name = "multi", .arity = 1, .how = CMD_PRIVATE, .flags = CMD_F_MULTI },
    { .name = "ping",
      .arity = -1,
      .how = CMD_LOCAL,
      .proc = cmd_ping,
      .pick = cmd_pick_ping },
    { .name = "psubscribe",
      .arity = -2,
      .how = CMD_PRIVATE,
      .flags = CMD_F_PUBSUB },
    { .name = "psync", .arity = -3, .how = CMD_TUNNEL },
    /* PUBLISH: in cluster mode its count adds the subscribers cellgate
     * holds for the channel on other nodes. */
    { .name = "publish",
      .arity = 3,
      .how = CMD_FORWARD,
      .flags = CMD_F_PUBLISH },
    /* PUBSUB is forwarded; NUMSUB and CHANNELS reach every master. */
    { .name = "pubsub",
      .arity = -2,
      .how = CMD_FORWARD,
      .flags = CMD_F_SUBCMDS },
    { .name = "pubsub|channels",
      .arity = -2,
      .how = CMD_FANOUT,
      .merge = MERGE_CONCAT },
    /* Subscribers are spread over the nodes: summed. */
    { .name = "pubsub|numsub",
      .arity = -2,
      .how = CMD_FANOUT,
      .merge = MERGE_NUMSUB },
    { .name = "punsubscribe",
      .arity = -1,
      .how = CMD_PRIVATE,
      .flags = CMD_F_UNSUB,
      .proc = cmd_unsubscribe_none,
      .pick = cmd_pick_unsub },
    { .name = "quit",
      .arity = -1,
      .how = CMD_LOCAL,
      .flags = CMD_F_NOAUTH,
      .proc = cmd_quit },
    { .name = "readonly",
      .arity = 1,
      .how = CMD_LOCAL,
      .proc = session_readonly },
    { .name = "readwrite",
      .arity = 1,
      .how = CMD_LOCAL,
      .proc = session_readonly },
    /* REPLCONF ACK/GETACK have no reply: on a shared connection every
     * later reply would go to the wrong request. (After SYNC it goes down
     * the client's tunnel.) */
    { .name = "replconf", .arity = -1, .how = CMD_REFUSE },
    { .name = "reset",
      .arity = 1,
      .how = CMD_LOCAL,
      .flags = CMD_F_NOAUTH,
      .proc = cmd_reset },
    { .name = "scan", .arity = -2, .how = CMD_FANOUT, .merge = MERGE_SCAN },
    { .name = "script",
      .arity = -2,
      .how = CMD_LOCAL,
      .flags = CMD_F_SUBCMDS,
      .proc = cmd_script_debug_no,
      .pick = cmd_pick_script },
    { .name = "script|exists",
      .arity = -3,
      .how = CMD_FANOUT,
      .merge = MERGE_AND },
    { .name = "script|flush",
      .arity = -2,
      .how = CMD_FANOUT,
      .merge = MERGE_ALL_OK },
    { .name = "script|kill",
      .arity = 2,
      .how = CMD_KILL,
      .merge = MERGE_ANY_OK },
    { .name = "script|load",
      .arity = 3,
      .how = CMD_FANOUT,
      .merge = MERGE_SAME },
    { .name = "select", .arity = 2, .how = CMD_LOCAL, .proc = session_select },
    /* SPUBLISH: a pub/sub command that leaves the connection as it was. */
    { .name = "spublish", .arity = 3, .how = CMD_FORWARD },
    { .name = "ssubscribe",
      .arity = -2,
      .how = CMD_PRIVATE,
      .flags = CMD_F_PUBSUB },
    { .name = "subscribe",
      .arity = -2,
      .how = CMD_PRIVATE,
      .flags = CMD_F_PUBSUB },
    { .name = "sunsubscribe",
      .arity = -1,
      .how = CMD_PRIVATE,
      .flags = CMD_F_UNSUB,
      .proc = cmd_unsubscribe_none,
      .pick = cmd_pick_unsub },
    { .name = "sync", .arity = 1, .how = CMD_TUNNEL },
    { .name = "touch", .arity = -2, .how = CMD_SPLIT, .merge = MERGE_SUM },
    { .name = "unlink", .arity = -2, .how = CMD_SPLIT, .merge = MERGE_SUM },
    { .name = "unsubscribe",
      .arity = -1,
      .how = CMD_PRIVATE,
      .flags = CMD_F_UNSUB,
      .proc = cmd_unsubscribe_none,
      .pick = cmd_pick_unsub },
    { .name = "unwatch",
      .arity = 1,
      .how = CMD_FORWARD,
      .flags = CMD_F_UNWATCH },
    { .name = "wait", .arity = 3, .how = CMD_PRIVATE, .flags = CMD_F_BLOCKING },
    { .name = "waitaof",
      .arity = 4,
      .how = CMD_PRIVATE,
      .flags = CMD_F_BLOCKING },
    { .name = "watch", .arity = -2, .how = CMD_PRIVATE, .flags = CMD_F_WATCH },
    { .name = "xread", .arity = -4, .how = CMD_FORWARD, .flags = CMD_F_XBLOCK },
    { .name = "xreadgroup",
      .arity = -7,
      .how = CMD_FORWARD,
      .flags = CMD_F_XBLOCK },
};

static int cmd_compare(const void *key, const void *elem)
{
    const char *k = key, *name = ((const struct cmd_def *)elem)->name;

    /* Most probes differ in the first letter: no strcmp call for those. */
    if (k[0] != name[0]) {
        return (unsigned char)k[0] - (unsigned char)name[0];
    }
    return strcmp(k, name);
}

const struct cmd_def *cmd_lookup(const char *name, size_t len)
{
    char lower[CMD_NAME_MAX + 1];
    size_t k;

    if (len == 0 || len > CMD_NAME_MAX) {
        return NULL;
    }
    for (k = 0; k < len; k++) {
        char ch = name[k];

        lower[k] = ch >= 'A' && ch <= 'Z' ? (char)(ch - 'A' + 'a') : ch;
        if (ch == '|') {
            return NULL; /* subcommand entries are not command names */
        }
    }
    lower[len] = '\0';
    return bsearch(lower, cmd_defs, ARRAY_SIZE(cmd_defs), sizeof(cmd_defs[0]),
                   cmd_compare);
}

const struct cmd_def *cmd_sub(const struct cmd_def *top,
                              const struct resp_cmd *cmd)
{
    char name[2 * CMD_NAME_MAX + 2];
    const struct cmd_def *def;
    const char *p;
    size_t len, slen, k;

    if (top == NULL || !(top->flags & CMD_F_SUBCMDS) || cmd->argc < 2) {
        return top;
    }
    len = strlen(top->name);
    memcpy(name, top->name, len);
    name[len] = '|';
    p = resp_cmd_arg(cmd, 1, &slen);
    if (slen == 0 || slen > CMD_NAME_MAX) {
        return top;
    }
    for (k = 0; k < slen; k++) {
        name[len + 1 + k] = (char)tolower((unsigned char)p[k]);
    }
    name[len + 1 + slen] = '\0';
    def = bsearch(name, cmd_defs, ARRAY_SIZE(cmd_defs), sizeof(cmd_defs[0]),
                  cmd_compare);
    return def != NULL ? def : top;
}

int cmd_arity_ok(const struct cmd_def *def, int argc)
{
    if (def->arity >= 0) {
        return argc == def->arity;
    }
    return argc >= -def->arity;
}

const struct cmd_def *cmd_table(size_t *n)
{
    *n = ARRAY_SIZE(cmd_defs);
    return cmd_defs;
}
