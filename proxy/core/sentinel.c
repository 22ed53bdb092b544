/* Sentinel mode: finding the master, and following it.
 *
 *   ask:    SENTINEL GET-MASTER-ADDR-BY-NAME name on sentinel i; no answer
 *           (down, an error, a null: it does not know the name) --> i + 1,
 *           at once, until each was tried once; then again after a backoff
 *   check:  ROLE on the host:port named, on a connection of its own (the
 *           data's user): "master" --> cluster_single_move, and on_change;
 *           a replica (a sentinel that has not seen a failover yet) or no
 *           answer --> ask again after a backoff
 *   watch:  SUBSCRIBE +switch-master on one sentinel; a message for our
 *           name is checked as an answer is. Losing that connection
 *           subscribes on the next sentinel and asks again at once: a
 *           switch may have been missed while no one listened
 *   safety: an ask every SENTINEL_ASK_MS while all is well (one small
 *           request on a kept connection), should a message be lost
 *
 * Until the first master is known the cluster holds requests (cluster_ready
 * is false), and fails them after connect_timeout_ms. The sentinels'
 * connections are private upstreams (UPSTREAM_SENTINEL: AUTH as
 * sentinel_user, nothing else set up), made here and nowhere else; they
 * never reconnect by themselves, this module decides when and where. */
#include "proxy/core/sentinel.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf/conf.h"
#include "parser/resp.h"
#include "parser/resp_enc.h"
#include "parser/resp_value.h"
#include "proxy/core/cluster.h"
#include "proxy/core/core.h"
#include "proxy/core/log.h"
#include "proxy/core/req.h"
#include "proxy/core/upstream.h"
#include "proxy/core/util.h"

/* The safety-net ask while a master is known. */
#define SENTINEL_ASK_MS 2000

/* After a named master that was not one (yet), or a first round in which
 * no sentinel answered: the next try. A failover takes Sentinel seconds,
 * so this is far below what it adds. Rounds that keep failing (sentinels
 * down, a wrong password) wait twice as long each time, up to
 * SENTINEL_ASK_MS, so they cost little and log little. */
#define SENTINEL_RETRY_MS 250

/* After a subscription failed at once: its next try (another sentinel). */
#define SENTINEL_SUB_RETRY_MS 500

/* After a switch, how long an ask's answer naming the master just left is
 * taken for a sentinel that has not heard of the switch yet (sentinels
 * share a new configuration within seconds, and convert the old master
 * into a replica about as soon): its old master may still say ROLE master
 * meanwhile, and following it back would split the writes. A
 * +switch-master message is never stale: it is always followed. */
#define SENTINEL_HOLD_MS 10000

/* The least time between two rate-limited log lines (sentinels down). */
#define SENTINEL_LOG_MS 10000

/* The error owed requests on the old master get at a switch. */
#define SENTINEL_MOVED_WHY "connection lost (Sentinel named a new master)"

static void sentinel_ask(struct sentinel *s);

/* ---------------- Pure: the replies ---------------- */

/* Copies a string value into host (NUL-ended). 0, or -1 when it does not
 * fit or is empty. */
static int sentinel_copy(const struct resp_value *v, char *out, size_t cap)
{
    if (v->str == NULL || v->len == 0 || v->len >= cap ||
        memchr(v->str, '\0', v->len) != NULL) {
        return -1;
    }
    memcpy(out, v->str, v->len);
    out[v->len] = '\0';
    return 0;
}

/* A decimal port in 1..65535 from `len` bytes at `p`, or -1. */
static int sentinel_port(const char *p, size_t len)
{
    long v = 0;
    size_t i;

    if (len == 0 || len > 5) {
        return -1;
    }
    for (i = 0; i < len; i++) {
        if (p[i] < '0' || p[i] > '9') {
            return -1;
        }
        v = v * 10 + (p[i] - '0');
    }
    return v >= 1 && v <= 65535 ? (int)v : -1;
}

enum sentinel_parse sentinel_parse_addr(const char *frame, size_t len,
                                        char *host, size_t hostcap, int *port)
{
    struct resp_value v;
    size_t used;
    enum sentinel_parse rc = SENTINEL_PARSE_BAD;

    if (resp_value_parse(frame, len, &v, &used) != RESP_OK) {
        return SENTINEL_PARSE_BAD;
    }
    if (v.null) {
        rc = SENTINEL_PARSE_UNKNOWN;
    } else if (v.type == '*' && v.n == 2 &&
               sentinel_copy(&v.elem[0], host, hostcap) == 0 &&
               v.elem[1].str != NULL) {
        *port = sentinel_port(v.elem[1].str, v.elem[1].len);
        rc = *port > 0 ? SENTINEL_PARSE_OK : SENTINEL_PARSE_BAD;
    }
    resp_value_free(&v);
    return rc;
}

enum sentinel_parse sentinel_parse_switch(const char *frame, size_t len,
                                          const char *name, char *host,
                                          size_t hostcap, int *port)
{
    struct resp_value v;
    const char *w[5], *p, *end;
    size_t wl[5], used, nlen = strlen(name);
    int k = 0;
    enum sentinel_parse rc = SENTINEL_PARSE_BAD;

    if (resp_value_parse(frame, len, &v, &used) != RESP_OK) {
        return SENTINEL_PARSE_BAD;
    }
    if ((v.type != '*' && v.type != '>') || v.n != 3 ||
        !resp_value_is(&v.elem[0], "message") ||
        !resp_value_is(&v.elem[1], "+switch-master") || v.elem[2].str == NULL) {
        goto out;
    }
    /* "<name> <old-ip> <old-port> <new-ip> <new-port>" */
    p = v.elem[2].str;
    end = p + v.elem[2].len;
    while (p < end && k < 5) {
        const char *sp = memchr(p, ' ', (size_t)(end - p));
        const char *e = sp != NULL ? sp : end;
        w[k] = p;
        wl[k++] = (size_t)(e - p);
        p = sp != NULL ? sp + 1 : end;
    }
    if (k != 5 || p != end || wl[0] != nlen || memcmp(w[0], name, nlen) != 0 ||
        wl[3] == 0 || wl[3] >= hostcap) {
        goto out;
    }
    *port = sentinel_port(w[4], wl[4]);
    if (*port > 0) {
        memcpy(host, w[3], wl[3]);
        host[wl[3]] = '\0';
        rc = SENTINEL_PARSE_OK;
    }
out:
    resp_value_free(&v);
    return rc;
}

int sentinel_parse_role_master(const char *frame, size_t len)
{
    struct resp_value v;
    size_t used;
    int master;

    if (resp_value_parse(frame, len, &v, &used) != RESP_OK) {
        return 0;
    }
    master = v.type == '*' && v.n >= 1 && resp_value_is(&v.elem[0], "master");
    resp_value_free(&v);
    return master;
}

int sentinel_stale(const char *prev, uint64_t switched_ms, uint64_t now_ms,
                   const char *named)
{
    return prev[0] != '\0' && strcmp(prev, named) == 0 &&
           now_ms - switched_ms < SENTINEL_HOLD_MS;
}

/* ---------------- Logging ---------------- */

/* A warning that repeats while sentinels are down: one line per
 * SENTINEL_LOG_MS at most, saying how many were left out. */
static void sentinel_warn(struct sentinel *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void sentinel_warn(struct sentinel *s, const char *fmt, ...)
{
    uint64_t now = core_now_ms(s->core);
    char line[512];
    va_list ap;

    if (s->log_ms != 0 && now - s->log_ms < SENTINEL_LOG_MS) {
        s->log_dropped++;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    if (s->log_dropped > 0) {
        log_warn("%s (and %u similar lines in the last %u s)", line,
                 s->log_dropped, (unsigned)((now - s->log_ms) / 1000));
    } else {
        log_warn("%s", line);
    }
    s->log_ms = now;
    s->log_dropped = 0;
}

/* ---------------- Connections ---------------- */

static void sentinel_on_query_gone(struct upstream *up, int failed);
static void sentinel_on_sub_gone(struct upstream *up, int failed);
static void sentinel_on_sub_push(struct upstream *up, const char *p, size_t n);
static void sentinel_on_role_gone(struct upstream *up, int failed);

static const struct upstream_ops sentinel_query_ops = {
    .gone = sentinel_on_query_gone,
};

static const struct upstream_ops sentinel_sub_ops = {
    .push = sentinel_on_sub_push,
    .gone = sentinel_on_sub_gone,
};

static const struct upstream_ops sentinel_role_ops = {
    .gone = sentinel_on_role_gone,
};

/* A connection to sentinel `i` (TLS with sentinel_tls: the core's
 * sentinel_tls context, upstream.c). */
static struct upstream *sentinel_connect(struct sentinel *s, int i,
                                         const struct upstream_ops *ops)
{
    struct upstream *up =
        upstream_new_private(s->core, s->addrs[i].host, s->addrs[i].port,
                             RESP_PROTO2, UPSTREAM_SENTINEL, ops);

    up->ctx = s;
    return up;
}

/* Closes a connection of the module's that `*slot` holds (its owed
 * request fails through its callback, which finds *slot cleared). */
static void sentinel_close(struct upstream **slot, const char *why)
{
    struct upstream *up = *slot;

    *slot = NULL;
    if (up != NULL) {
        upstream_destroy(up, why);
    }
}

static void sentinel_on_query_gone(struct upstream *up, int failed)
{
    struct sentinel *s = up->ctx;

    PX_UNUSED(failed);
    if (s->query == up) {
        s->query = NULL;
    }
}

static void sentinel_on_role_gone(struct upstream *up, int failed)
{
    struct sentinel *s = up->ctx;

    PX_UNUSED(failed);
    if (s->role == up) {
        s->role = NULL;
    }
}

/* ---------------- The master ---------------- */

/* The candidate checked out: it is the master from now on. */
static void sentinel_adopt(struct sentinel *s)
{
    char old[sizeof(s->master)], now[sizeof(s->master)];
    int rc;

    snprintf(old, sizeof(old), "%s", s->master);
    snprintf(now, sizeof(now), "%s:%d", s->cand_host, s->cand_port);
    rc = cluster_single_move(s->cl, s->cand_host, s->cand_port,
                             SENTINEL_MOVED_WHY);
    if (rc < 0) {
        sentinel_warn(s, "sentinel: master '%s' at %s: not a valid address",
                      s->core->conf->sentinel.master, now);
        s->next_ask_ms = core_now_ms(s->core) + SENTINEL_RETRY_MS;
        return;
    }
    s->cl->last_err[0] = '\0';
    if (rc == 0) {
        return;
    }
    snprintf(s->master, sizeof(s->master), "%s", now);
    snprintf(s->prev, sizeof(s->prev), "%s", old);
    s->switched_ms = core_now_ms(s->core);
    if (old[0] != '\0') {
        s->switches++;
        log_warn("sentinel: master '%s' is now %s (was %s), named by "
                 "sentinel %s: connections moved",
                 s->core->conf->sentinel.master, now, old, s->cand_from);
    } else {
        log_info("sentinel: master '%s' is %s, named by sentinel %s",
                 s->core->conf->sentinel.master, now, s->cand_from);
    }
    if (s->on_change != NULL) {
        s->on_change(s->arg, old, now);
    }
}

/* The reply to ROLE on the candidate. */
static void sentinel_on_role(struct req *req, const char *frame, size_t len)
{
    struct sentinel *s = req->ctx;
    struct upstream *up = s->role; /* NULL when the connection failed */

    if (s->stopped || s->cand_port == 0) {
        return; /* stopped, or given up on (a newer candidate, late) */
    }
    s->role = NULL;
    if (sentinel_parse_role_master(frame, len)) {
        sentinel_adopt(s);
    } else {
        snprintf(s->cl->last_err, sizeof(s->cl->last_err),
                 "%.50s:%d, named by sentinel %.50s, is not a master (%s)",
                 s->cand_host, s->cand_port, s->cand_from,
                 frame[0] == '-' ? "no answer to ROLE" : "ROLE");
        sentinel_warn(s, "sentinel: %s", s->cl->last_err);
        /* The sentinel asked may not have seen the failover: ask the
         * next one. */
        s->ask_at = (s->ask_at + 1) % s->n;
        s->next_ask_ms = core_now_ms(s->core) + SENTINEL_RETRY_MS;
    }
    s->cand_host[0] = '\0';
    s->cand_port = 0;
    if (up != NULL) {
        upstream_destroy(up, NULL);
    }
}

/* Sentinel `from` names host:port as the master: check it with ROLE,
 * unless it is the master already or being checked. */
static void sentinel_consider(struct sentinel *s, const char *host, int port,
                              const char *from)
{
    static const char *const role[] = { "ROLE" };
    char name[300];

    snprintf(name, sizeof(name), "%s:%d", host, port);
    if (strcmp(name, s->master) == 0 ||
        (s->cand_port == port && strcmp(s->cand_host, host) == 0)) {
        return;
    }
    if (strcmp(name, s->named) != 0) {
        /* One line per answer that changes: a candidate that is not a
         * master yet is named again at every try. */
        log_info("sentinel %s: master '%s' is at %s", from,
                 s->core->conf->sentinel.master, name);
        snprintf(s->named, sizeof(s->named), "%s", name);
    }
    s->cand_port = 0; /* the old check's reply is not this one's */
    sentinel_close(&s->role, "connection closed (a newer master named)");
    snprintf(s->cand_host, sizeof(s->cand_host), "%s", host);
    s->cand_port = port;
    snprintf(s->cand_from, sizeof(s->cand_from), "%s", from);
    s->role = upstream_new_private(s->core, host, port, RESP_PROTO2, 0,
                                   &sentinel_role_ops);
    s->role->ctx = s;
    s->role_sent_ms = core_now_ms(s->core);
    upstream_send(s->role, req_own_argv(1, role, sentinel_on_role, s));
}

/* ---------------- Asking ---------------- */

/* The ask on sentinel `ask_at` got no useful answer: the next sentinel at
 * once, or after a backoff when each had its turn. */
static void sentinel_ask_failed(struct sentinel *s, const char *why)
{
    const struct sentinel_addr *a = &s->addrs[s->ask_at];

    snprintf(s->cl->last_err, sizeof(s->cl->last_err), "sentinel %.50s: %.90s",
             a->name, why);
    sentinel_warn(s, "sentinel %s: master '%s': %s", a->name,
                  s->core->conf->sentinel.master, why);
    s->ask_at = (s->ask_at + 1) % s->n;
    if (++s->tried < s->n) {
        sentinel_ask(s);
        return;
    }
    s->tried = 0;
    s->round_ms = s->round_ms == 0 ? SENTINEL_RETRY_MS : s->round_ms * 2;
    if (s->round_ms > SENTINEL_ASK_MS) {
        s->round_ms = SENTINEL_ASK_MS;
    }
    s->next_ask_ms = core_now_ms(s->core) + s->round_ms;
}

static void sentinel_on_addr(struct req *req, const char *frame, size_t len)
{
    struct sentinel *s = req->ctx;
    char host[256], why[300];
    int port = 0;

    s->asking = 0;
    if (s->stopped) {
        return;
    }
    switch (sentinel_parse_addr(frame, len, host, sizeof(host), &port)) {
    case SENTINEL_PARSE_OK:
        s->tried = 0;
        s->round_ms = 0;
        s->next_ask_ms = core_now_ms(s->core) + SENTINEL_ASK_MS;
        snprintf(why, sizeof(why), "%s:%d", host, port);
        if (sentinel_stale(s->prev, s->switched_ms, core_now_ms(s->core),
                           why)) {
            sentinel_warn(s,
                          "sentinel %s still names the previous master %s: "
                          "not followed (it has not seen the switch yet)",
                          s->addrs[s->ask_at].name, why);
            s->ask_at = (s->ask_at + 1) % s->n; /* ask a better informed */
            return;
        }
        sentinel_consider(s, host, port, s->addrs[s->ask_at].name);
        return;
    case SENTINEL_PARSE_UNKNOWN:
        sentinel_ask_failed(s, "it monitors no master of that name");
        return;
    case SENTINEL_PARSE_BAD:
        break;
    }
    {
        /* An error's text, without its '-', a leading "ERR " and CRLF;
         * any other reply is the wrong shape. */
        size_t skip = len >= 5 && memcmp(frame, "-ERR ", 5) == 0 ? 5
                      : frame[0] == '-'                          ? 1
                                                                 : 0;
        size_t n = len >= skip + 2 ? len - skip - 2 : 0;
        if (skip == 0) {
            snprintf(why, sizeof(why),
                     "unexpected reply to "
                     "GET-MASTER-ADDR-BY-NAME");
        } else {
            snprintf(why, sizeof(why), "%.*s", (int)(n > 150 ? 150 : n),
                     frame + skip);
        }
    }
    if (s->query != NULL && s->query_at == s->ask_at) {
        /* An error reply (NOAUTH...): a fresh connection next time. */
        sentinel_close(&s->query, NULL);
    }
    sentinel_ask_failed(s, why);
}

static void sentinel_ask(struct sentinel *s)
{
    const char *argv[3] = { "SENTINEL", "GET-MASTER-ADDR-BY-NAME",
                            s->core->conf->sentinel.master };

    if (s->asking || s->stopped) {
        return;
    }
    if (s->query != NULL && s->query_at != s->ask_at) {
        sentinel_close(&s->query, NULL);
    }
    if (s->query == NULL) {
        s->query = sentinel_connect(s, s->ask_at, &sentinel_query_ops);
        s->query_at = s->ask_at;
    }
    s->asking = 1;
    s->ask_sent_ms = core_now_ms(s->core);
    /* May complete at once (a refused send): the callback moves on. */
    upstream_send(s->query, req_own_argv(3, argv, sentinel_on_addr, s));
}

/* ---------------- Watching ---------------- */

static void sentinel_on_sub_push(struct upstream *up, const char *p, size_t n)
{
    struct sentinel *s = up->ctx;
    char host[256];
    int port;

    if (s->stopped || up != s->sub) {
        return;
    }
    if (sentinel_parse_switch(p, n, s->core->conf->sentinel.master, host,
                              sizeof(host), &port) == SENTINEL_PARSE_OK) {
        sentinel_consider(s, host, port, up->name);
    }
}

static void sentinel_on_subscribed(struct req *req, const char *frame,
                                   size_t len)
{
    struct sentinel *s = req->ctx;

    if (s->stopped || s->sub == NULL) {
        return;
    }
    if (frame[0] == '-') {
        sentinel_warn(s, "sentinel %s: SUBSCRIBE +switch-master: %.*s",
                      s->sub->name, (int)(len > 150 ? 150 : len - 2),
                      frame + 1);
        sentinel_close(&s->sub, NULL);
        s->sub_at = (s->sub_at + 1) % s->n;
        return;
    }
    log_info("sentinel %s: watching +switch-master", s->sub->name);
    s->next_sub_ms = 0; /* a later loss resubscribes at once */
}

/* The subscription is lost: the next sentinel's, and an ask, since a
 * switch may have come while no one listened. */
static void sentinel_on_sub_gone(struct upstream *up, int failed)
{
    struct sentinel *s = up->ctx;
    uint64_t now = core_now_ms(s->core);

    PX_UNUSED(failed);
    if (s->sub != up) {
        return; /* closed by this module, which knows */
    }
    s->sub = NULL;
    if (s->stopped) {
        return;
    }
    sentinel_warn(s,
                  "sentinel %s: subscription lost (%s); watching the "
                  "next sentinel",
                  up->name, up->last_err[0] ? up->last_err : "closed");
    s->sub_at = (s->sub_at + 1) % s->n;
    if (s->next_sub_ms == 0) {
        s->next_sub_ms = now; /* it had worked: try the next one now */
    } else {
        s->next_sub_ms = now + SENTINEL_SUB_RETRY_MS;
    }
    s->next_ask_ms = now;
}

static void sentinel_subscribe(struct sentinel *s, uint64_t now_ms)
{
    static const char *const argv[2] = { "SUBSCRIBE", "+switch-master" };

    if (s->sub != NULL || s->stopped || now_ms < s->next_sub_ms) {
        return;
    }
    /* Until it confirms, a loss waits before the next try. */
    s->next_sub_ms = now_ms + SENTINEL_SUB_RETRY_MS;
    s->sub = sentinel_connect(s, s->sub_at, &sentinel_sub_ops);
    upstream_send(s->sub, req_own_argv(2, argv, sentinel_on_subscribed, s));
}

/* ---------------- Lifetime ---------------- */

int sentinel_start(struct sentinel *s, struct core *core, struct cluster *cl,
                   sentinel_change_fn *on_change, void *arg)
{
    const struct conf_sentinel *cs = &core->conf->sentinel;
    int i;

    memset(s, 0, sizeof(*s));
    s->core = core;
    s->cl = cl;
    s->on_change = on_change;
    s->arg = arg;
    if (cs->naddrs == 0) {
        return PX_OK;
    }
    s->addrs = px_calloc((size_t)cs->naddrs, sizeof(*s->addrs));
    for (i = 0; i < cs->naddrs; i++) {
        snprintf(s->addrs[i].name, sizeof(s->addrs[i].name), "%s:%d",
                 cs->addrs[i].host, cs->addrs[i].port);
        snprintf(s->addrs[i].host, sizeof(s->addrs[i].host), "%s",
                 cs->addrs[i].host);
        s->addrs[i].port = cs->addrs[i].port;
    }
    s->n = cs->naddrs;
    snprintf(cl->last_err, sizeof(cl->last_err), "no sentinel answered yet");
    sentinel_ask(s);
    sentinel_subscribe(s, core_now_ms(core));
    return PX_OK;
}

void sentinel_cron(struct sentinel *s, uint64_t now_ms)
{
    const struct conf *conf = s->core->conf;
    uint64_t late =
        (uint64_t)conf->connect_timeout_ms +
        (conf->command_timeout_ms > 0 ? conf->command_timeout_ms : 1000);

    if (s->n == 0 || s->stopped) {
        return;
    }
    if (s->asking && now_ms - s->ask_sent_ms > late) {
        /* Its owed ask fails through sentinel_on_addr: the next one. */
        sentinel_close(&s->query, "connection closed: no reply in time");
    }
    if (s->role != NULL && now_ms - s->role_sent_ms > late) {
        snprintf(s->cl->last_err, sizeof(s->cl->last_err),
                 "%.50s:%d, named by sentinel %.50s, did not answer ROLE",
                 s->cand_host, s->cand_port, s->cand_from);
        sentinel_warn(s, "sentinel: %s", s->cl->last_err);
        s->cand_port = 0;
        s->cand_host[0] = '\0';
        sentinel_close(&s->role, NULL);
        s->next_ask_ms = now_ms + SENTINEL_RETRY_MS;
    }
    if (!s->asking && now_ms >= s->next_ask_ms) {
        sentinel_ask(s);
    }
    sentinel_subscribe(s, now_ms);
}

void sentinel_stop(struct sentinel *s)
{
    s->stopped = 1;
    sentinel_close(&s->query, "proxy shutting down");
    sentinel_close(&s->sub, "proxy shutting down");
    sentinel_close(&s->role, "proxy shutting down");
}

void sentinel_free(struct sentinel *s)
{
    px_free(s->addrs);
    s->addrs = NULL;
    s->n = 0;
}
