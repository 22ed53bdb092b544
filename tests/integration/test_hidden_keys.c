/* The limiter's key names stay out of an ordinary client's sight: with
 * limiter keys in Redis (checked there directly), KEYS, SCAN (a whole
 * iteration, MATCH, TYPE, COUNT) and RANDOMKEY through cellgate never show
 * one, in RESP2 and RESP3, on a shared connection and on a private one
 * (WATCH, SELECT), while every key of the client's own is listed exactly
 * and a client beside it is served exactly; an admin client sees them all.
 * KEYS, SCAN and RANDOMKEY inside MULTI are refused (CLIENT TRACKING BCAST
 * is not: test_tracking_hidden.c). Single and cluster
 * mode, each with and without the two Redis ACL users. */
#include "tests/integration/cluster_fixture.h"
#include "tests/integration/fixture.h"
#include "tests/support/px_test.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "parser/buf.h"
#include "parser/resp.h"
#include "parser/resp_enc.h"
#include "parser/resp_value.h"

PX_TEST_SUITE(it_hidden);

#define ADMIN_PASS "adm1n"
#define USERS_YAML                                                             \
    "upstream_user: app\nupstream_password: app-pw\n"                          \
    "limiter_user: cg-limiter\nlimiter_password: \"lim pw\"\n"
#define LIMITS_YAML                                                            \
    "login:\n  children:\n    \"*\":\n      limits: [2, 1, 3600]\n"
#define PREFIX "cellgate:"

#define HK_MAX     256 /* keys a set holds */
#define HK_KEYLEN  64  /* bytes of a key, with its NUL */
#define HK_LOGINS  20  /* identities checked through the limiter */
#define HK_PADS    40  /* more limiter keys, planted by the admin */
#define HK_STRINGS 30  /* the client's own strings */
#define HK_HASHES  5   /* the client's own hashes */
#define HK_DRAWS   40  /* RANDOMKEY calls */
#define HK_MASTERS 3

/* A set of key names. */
struct hk_set {
    int n;
    char k[HK_MAX][HK_KEYLEN];
};

static int hk_cluster; /* the running test is in cluster mode */

static void fini(void)
{
    if (hk_cluster) {
        px_cluster_fini();
    } else {
        px_env_fini();
    }
}

/* ---------------- Start ---------------- */

/* `cellgate --print-acl | redis-cli -p port`, as docs/operations.md says. */
static void hk_acl_apply(const char *conf, int port)
{
    char cmd[2 * PX_PATH_MAX + 64];
    const char *argv[] = { "/bin/sh", "-c", cmd, NULL };
    struct px_run r;

    snprintf(cmd, sizeof(cmd), "%s --config %s --print-acl | redis-cli -p %d",
             PX_CELLGATE_BIN, conf, port);
    px_run(&r, argv);
    cr_assert_eq(r.status, 0, "print-acl | redis-cli: %s%s", r.out, r.err);
    cr_assert_str_eq(r.out, "OK\nOK\n", "redis-cli said: %s", r.out);
    px_run_free(&r);
}

/* Redis (one server, or a 3-master cluster) and cellgate in front, with an
 * admin password, the limits file, and with `acl` the two Redis users. */
static void hk_start(int cluster, int acl)
{
    char limits[PX_PATH_MAX], conf[PX_PATH_MAX], yaml[1024];
    int i;

    hk_cluster = cluster;
    px_env_prepare();
    px_write_file(limits, sizeof(limits), "limits.yaml", LIMITS_YAML);
    snprintf(yaml, sizeof(yaml), "%sadmin_password: %s\nlimits_file: %s\n",
             acl ? USERS_YAML : "", ADMIN_PASS, limits);
    px_write_file(conf, sizeof(conf), "users.yaml", yaml);
    if (cluster) {
        px_cluster_start(px_cluster(), HK_MASTERS, 0);
    } else {
        px_redis_start(&px_env()->redis, NULL);
    }
    for (i = 0; acl && i < (cluster ? HK_MASTERS : 1); i++) {
        hk_acl_apply(conf, cluster ? px_cluster_port(px_cluster(), i)
                                   : px_env()->redis.port);
    }
    if (cluster) {
        px_cluster_proxy_start(&px_env()->proxy, px_cluster(), yaml);
    } else {
        px_proxy_start_for(&px_env()->proxy, &px_env()->redis, yaml);
    }
}

static void init_single(void)
{
    hk_start(0, 0);
}

static void init_cluster(void)
{
    hk_start(1, 0);
}

static void init_single_acl(void)
{
    hk_start(0, 1);
}

static void init_cluster_acl(void)
{
    hk_start(1, 1);
}

/* ---------------- Key sets ---------------- */

static void hk_add(struct hk_set *s, const char *k, size_t len)
{
    int i;

    cr_assert_lt(len, (size_t)HK_KEYLEN, "key too long: %.*s", (int)len, k);
    for (i = 0; i < s->n; i++) {
        if (strlen(s->k[i]) == len && memcmp(s->k[i], k, len) == 0) {
            return; /* SCAN may return a key twice */
        }
    }
    cr_assert_lt(s->n, HK_MAX);
    memcpy(s->k[s->n], k, len);
    s->k[s->n][len] = '\0';
    s->n++;
}

static int hk_cmp(const void *a, const void *b)
{
    return strcmp(a, b);
}

/* Asserts `got` and `want` hold the same keys. */
static void hk_same(struct hk_set *got, struct hk_set *want, const char *what)
{
    int i;

    qsort(got->k, (size_t)got->n, HK_KEYLEN, hk_cmp);
    qsort(want->k, (size_t)want->n, HK_KEYLEN, hk_cmp);
    for (i = 0; i < got->n && i < want->n; i++) {
        cr_assert_str_eq(got->k[i], want->k[i], "%s: key %d differs", what, i);
    }
    cr_assert_eq(got->n, want->n, "%s: %d keys, want %d", what, got->n,
                 want->n);
}

/* Asserts no key of `s` is under the limiter's prefix. */
static void hk_none_hidden(const struct hk_set *s, const char *what)
{
    int i;

    for (i = 0; i < s->n; i++) {
        cr_assert(strncmp(s->k[i], PREFIX, strlen(PREFIX)) != 0,
                  "%s shows the limiter key %s", what, s->k[i]);
    }
}

/* Adds the elements of an array reply of key names, and frees it. */
static void hk_add_reply(struct hk_set *s, redisReply *r, const char *what)
{
    size_t i;

    cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "%s: type %d (%s)", what, r->type,
                 r->type == REDIS_REPLY_ERROR ? r->str : "");
    for (i = 0; i < r->elements; i++) {
        cr_assert_eq(r->element[i]->type, REDIS_REPLY_STRING);
        hk_add(s, r->element[i]->str, r->element[i]->len);
    }
    freeReplyObject(r);
}

/* KEYS pattern through `c`. */
static void hk_keys(redisContext *c, const char *pattern, struct hk_set *s)
{
    memset(s, 0, sizeof(*s));
    hk_add_reply(s, px_cmd(c, "KEYS %s", pattern), "KEYS");
}

/* A whole SCAN iteration through `c`, from cursor 0 back to 0, with the
 * options `opts` ("" for none). */
static void hk_scan(redisContext *c, const char *opts, struct hk_set *s)
{
    char cursor[32] = "0", cmd[256];
    int pages = 0;

    memset(s, 0, sizeof(*s));
    do {
        redisReply *r;
        snprintf(cmd, sizeof(cmd), "SCAN %s COUNT 7 %s", cursor, opts);
        r = px_cmd(c, cmd);
        cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "SCAN %s: type %d (%s)", opts,
                     r->type, r->type == REDIS_REPLY_ERROR ? r->str : "");
        cr_assert_eq(r->elements, 2);
        cr_assert_lt(r->element[0]->len, sizeof(cursor));
        memcpy(cursor, r->element[0]->str, r->element[0]->len);
        cursor[r->element[0]->len] = '\0';
        {
            redisReply *page = r->element[1];
            r->element[1] = NULL; /* freed by hk_add_reply */
            hk_add_reply(s, page, "SCAN page");
        }
        freeReplyObject(r);
        cr_assert_lt(++pages, 1000, "SCAN %s never ends", opts);
    } while (strcmp(cursor, "0") != 0);
}

/* The limiter's keys as Redis holds them, on every master. */
static void hk_direct_limiter_keys(struct hk_set *s)
{
    int i;

    memset(s, 0, sizeof(*s));
    for (i = 0; i < (hk_cluster ? HK_MASTERS : 1); i++) {
        redisContext *d = hk_cluster ? px_cluster_connect(px_cluster(), i)
                                     : px_redis_connect(&px_env()->redis, NULL);
        hk_add_reply(s, px_cmd(d, "KEYS " PREFIX "*"), "direct KEYS");
        redisFree(d);
    }
}

static redisContext *hk_admin(void)
{
    redisContext *a = px_connect(px_env()->proxy.port);

    px_check_status(px_cmd(a, "AUTH admin " ADMIN_PASS), "OK");
    return a;
}

/* A direct connection to the master of `key` (the default user, whom
 * the ACL users leave as it was). */
static redisContext *hk_direct(const char *key)
{
    if (hk_cluster) {
        return px_cluster_connect(
            px_cluster(),
            px_cluster_master_of_key(px_cluster(), key, strlen(key)));
    }
    return px_redis_connect(&px_env()->redis, NULL);
}

/* Fills Redis: the client's own keys (its strings, its hashes, two whose
 * names only look like the limiter's, a CL.THROTTLE key), the limiter's
 * own (checks of login:10.1.2.<i>), and more keys under the prefix
 * written in Redis directly (strings and hashes, so SCAN TYPE meets
 * both). Returns the client's keys in `mine`, its hashes in `hashes`. */
static void hk_fill(redisContext *c, struct hk_set *mine, struct hk_set *hashes)
{
    struct hk_set lim;
    char k[HK_KEYLEN];
    int i;

    memset(mine, 0, sizeof(*mine));
    memset(hashes, 0, sizeof(*hashes));
    for (i = 0; i < HK_STRINGS; i++) {
        snprintf(k, sizeof(k), "app:s:%d", i);
        px_check_status(px_cmd(c, "SET %s v%d", k, i), "OK");
        hk_add(mine, k, strlen(k));
    }
    for (i = 0; i < HK_HASHES; i++) {
        snprintf(k, sizeof(k), "app:h:%d", i);
        px_check_int(px_cmd(c, "HSET %s f %d", k, i), 1);
        hk_add(mine, k, strlen(k));
        hk_add(hashes, k, strlen(k));
    }
    px_check_status(px_cmd(c, "SET cellgatex:1 near"), "OK");
    hk_add(mine, "cellgatex:1", 11);
    px_check_status(px_cmd(c, "SET cellgate almost"), "OK");
    hk_add(mine, "cellgate", 8);
    for (i = 0; i < HK_LOGINS; i++) {
        redisReply *r = px_cmd(c, "LIMITER CHECK login:10.1.2.%d", i);
        cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "LIMITER CHECK: type %d (%s)",
                     r->type, r->type == REDIS_REPLY_ERROR ? r->str : "");
        freeReplyObject(r);
    }
    {
        redisReply *r = px_cmd(c, "CL.THROTTLE ip:10.9.9.9 5 1 60");
        cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "CL.THROTTLE: type %d (%s)",
                     r->type, r->type == REDIS_REPLY_ERROR ? r->str : "");
        freeReplyObject(r);
        /* CL.THROTTLE's keys are the client's own names, unprefixed, as
         * with redis-cell: listed like any other of its keys. */
        hk_add(mine, "ip:10.9.9.9", 11);
    }
    for (i = 0; i < HK_PADS; i++) {
        redisContext *d;
        snprintf(k, sizeof(k), PREFIX "%s:%d", i % 2 ? "hpad" : "pad", i);
        d = hk_direct(k);
        if (i % 2 == 0) {
            px_check_status(px_cmd(d, "SET %s x", k), "OK");
        } else {
            px_check_int(px_cmd(d, "HSET %s f x", k), 1);
        }
        redisFree(d);
    }
    /* They are in Redis: the identities' keys and the pads. */
    hk_direct_limiter_keys(&lim);
    cr_assert_geq(lim.n, HK_LOGINS + HK_PADS,
                  "Redis holds %d limiter keys, want at least %d", lim.n,
                  HK_LOGINS + HK_PADS);
    for (i = 0; i < lim.n; i++) {
        if (strstr(lim.k[i], "login:10.1.2.7") != NULL) {
            break;
        }
    }
    cr_assert_lt(i, lim.n, "no limiter key names login:10.1.2.7");
}

/* A client beside the one listing: a write and a read of its own key,
 * answered exactly. */
static void hk_bystander(redisContext *b, int n)
{
    char v[32];

    snprintf(v, sizeof(v), "b%d", n);
    px_check_status(px_cmd(b, "SET by:key %s", v), "OK");
    px_check_str(px_cmd(b, "GET by:key"), v);
}

/* RANDOMKEY through `c`, HK_DRAWS times: never a limiter key, only one of
 * `mine`, or nil. */
static void hk_draws(redisContext *c, const struct hk_set *mine,
                     const char *what)
{
    int i, j;

    for (i = 0; i < HK_DRAWS; i++) {
        redisReply *r = px_cmd(c, "RANDOMKEY");
        if (r->type == REDIS_REPLY_NIL) {
            freeReplyObject(r);
            continue;
        }
        cr_assert_eq(r->type, REDIS_REPLY_STRING, "%s: RANDOMKEY type %d (%s)",
                     what, r->type, r->type == REDIS_REPLY_ERROR ? r->str : "");
        cr_assert(strncmp(r->str, PREFIX, strlen(PREFIX)) != 0,
                  "%s: RANDOMKEY drew the limiter key %s", what, r->str);
        for (j = 0; j < mine->n && strcmp(mine->k[j], r->str) != 0; j++) {
        }
        cr_assert_lt(j, mine->n, "%s: RANDOMKEY drew %s, not a key of ours",
                     what, r->str);
        freeReplyObject(r);
    }
}

/* ---------------- RESP3 ---------------- */

/* One command on a raw connection; the reply parsed into `v` (free it),
 * its bytes kept in `in`. */
static void hk_r3(int fd, struct buf *in, struct resp_value *v,
                  const char *first, ...)
{
    const char *argv[16];
    size_t lens[16], used;
    struct buf out;
    int argc = 0, closed = 0;
    va_list ap;

    va_start(ap, first);
    for (const char *w = first; w != NULL; w = va_arg(ap, const char *)) {
        cr_assert_lt(argc, 16);
        argv[argc] = w;
        lens[argc] = strlen(w);
        argc++;
    }
    va_end(ap);
    buf_init(&out);
    cr_assert_eq(resp_enc_argv(&out, argc, argv, lens), BUF_OK);
    cr_assert_eq(px_raw_send(fd, out.data, out.len), 0);
    buf_free(&out);
    buf_clear(in);
    for (;;) {
        int rc = resp_value_parse(in->data, in->len, v, &used);
        if (rc == RESP_OK) {
            return;
        }
        cr_assert_eq(rc, RESP_AGAIN, "reply to %s is not RESP", first);
        cr_assert_eq(buf_reserve(in, 4096), BUF_OK);
        cr_assert_eq(px_raw_read(fd, buf_tail(in), 1,
                                 PX_CLIENT_TIMEOUT_S * 1000, &closed),
                     1u, "no reply to %s (closed %d)", first, closed);
        buf_commit(in, 1);
    }
}

/* The client's KEYS, SCAN and RANDOMKEY in RESP3. */
static void hk_resp3(const struct hk_set *mine_in)
{
    int fd = px_raw_connect(px_env()->proxy.port, 0);
    struct hk_set got, mine = *mine_in;
    struct resp_value v;
    struct buf in;
    char cursor[32] = "0";
    size_t i;
    int draws;

    buf_init(&in);
    hk_r3(fd, &in, &v, "HELLO", "3", NULL);
    cr_assert_eq(v.type, '%', "HELLO 3: type %c", v.type);
    resp_value_free(&v);

    hk_r3(fd, &in, &v, "KEYS", "*", NULL);
    cr_assert_eq(v.type, '*', "RESP3 KEYS: type %c", v.type);
    memset(&got, 0, sizeof(got));
    for (i = 0; i < v.n; i++) {
        hk_add(&got, v.elem[i].str, v.elem[i].len);
    }
    resp_value_free(&v);
    hk_same(&got, &mine, "RESP3 KEYS *");

    memset(&got, 0, sizeof(got));
    do {
        hk_r3(fd, &in, &v, "SCAN", cursor, "COUNT", "9", NULL);
        cr_assert_eq(v.type, '*');
        cr_assert_eq(v.n, 2u);
        cr_assert_lt(v.elem[0].len, sizeof(cursor));
        memcpy(cursor, v.elem[0].str, v.elem[0].len);
        cursor[v.elem[0].len] = '\0';
        for (i = 0; i < v.elem[1].n; i++) {
            hk_add(&got, v.elem[1].elem[i].str, v.elem[1].elem[i].len);
        }
        resp_value_free(&v);
    } while (strcmp(cursor, "0") != 0);
    hk_same(&got, &mine, "RESP3 SCAN");

    for (draws = 0; draws < HK_DRAWS; draws++) {
        hk_r3(fd, &in, &v, "RANDOMKEY", NULL);
        cr_assert(v.type == '$' || v.type == '_', "RESP3 RANDOMKEY: type %c",
                  v.type);
        cr_assert(
            v.type == '_' || strncmp(v.str, PREFIX, strlen(PREFIX)) != 0 ||
                v.len < strlen(PREFIX),
            "RESP3 RANDOMKEY drew the limiter key %.*s", (int)v.len, v.str);
        resp_value_free(&v);
    }
    buf_free(&in);
    close(fd);
}

/* ---------------- The checks ---------------- */

/* Everything an ordinary client lists, against what it wrote; the admin's
 * KEYS against Redis's. */
static void hk_listing(void)
{
    redisContext *c = px_connect(px_env()->proxy.port);
    redisContext *b = px_connect(px_env()->proxy.port);
    redisContext *a;
    struct hk_set mine, hashes, got, lim, all;
    int i;

    hk_fill(c, &mine, &hashes);
    /* by:key, the bystander's, is the client's to list too. */
    hk_bystander(b, 0);
    hk_add(&mine, "by:key", 6);

    hk_keys(c, "*", &got);
    hk_same(&got, &mine, "KEYS *");
    hk_bystander(b, 1);
    hk_keys(c, PREFIX "*", &got);
    hk_none_hidden(&got, "KEYS " PREFIX "*");
    cr_assert_eq(got.n, 0, "KEYS " PREFIX "* lists %d keys", got.n);
    hk_keys(c, "cellgate*", &got);
    hk_none_hidden(&got, "KEYS cellgate*");
    cr_assert_eq(got.n, 2, "KEYS cellgate* lists %d keys", got.n);

    hk_scan(c, "", &got);
    hk_same(&got, &mine, "SCAN");
    hk_bystander(b, 2);
    hk_scan(c, "MATCH *", &got);
    hk_same(&got, &mine, "SCAN MATCH *");
    hk_scan(c, "TYPE hash", &got);
    hk_same(&got, &hashes, "SCAN TYPE hash");
    hk_scan(c, "MATCH app:h:* TYPE hash", &got);
    hk_same(&got, &hashes, "SCAN MATCH app:h:* TYPE hash");
    hk_scan(c, "MATCH " PREFIX "*", &got);
    cr_assert_eq(got.n, 0, "SCAN MATCH " PREFIX "* lists %d keys", got.n);
    hk_scan(c, "TYPE string MATCH " PREFIX "*", &got);
    cr_assert_eq(got.n, 0, "SCAN TYPE string lists %d limiter keys", got.n);
    hk_bystander(b, 3);

    hk_draws(c, &mine, "RANDOMKEY");
    hk_bystander(b, 4);
    hk_resp3(&mine);

    /* The admin sees every key Redis holds. */
    a = hk_admin();
    hk_direct_limiter_keys(&lim);
    all = mine;
    for (i = 0; i < lim.n; i++) {
        hk_add(&all, lim.k[i], strlen(lim.k[i]));
    }
    hk_keys(a, "*", &got);
    hk_same(&got, &all, "admin's KEYS *");
    hk_scan(a, "MATCH " PREFIX "*", &got);
    hk_same(&got, &lim, "admin's SCAN MATCH " PREFIX "*");
    hk_bystander(b, 5);
    redisFree(a);
    redisFree(b);
    redisFree(c);
}

/* Asserts an error reply that contains `part`, and frees it. */
static void hk_refused(redisReply *r, const char *part, const char *what)
{
    cr_assert_eq(r->type, REDIS_REPLY_ERROR, "%s: not refused (type %d)", what,
                 r->type);
    cr_assert(strstr(r->str, part) != NULL, "%s: %s", what, r->str);
    freeReplyObject(r);
}

/* Inside MULTI; CLIENT TRACKING BCAST accepted. */
static void hk_refusals(void)
{
    static const char *const queued[] = { "KEYS *", "SCAN 0", "RANDOMKEY" };
    redisContext *c = px_connect(px_env()->proxy.port);
    redisContext *b = px_connect(px_env()->proxy.port);
    redisContext *a;
    size_t i;

    px_check_status(px_cmd(c, "SET app:x 1"), "OK");
    for (i = 0; i < sizeof(queued) / sizeof(queued[0]); i++) {
        px_check_status(px_cmd(c, "MULTI"), "OK");
        px_check_status(px_cmd(c, "SET app:x 2"), "QUEUED");
        hk_refused(px_cmd(c, queued[i]), "NOPERM", queued[i]);
        hk_refused(px_cmd(c, "EXEC"), "EXECABORT", "EXEC");
        hk_bystander(b, (int)i);
    }
    px_check_str(px_cmd(c, "GET app:x"), "1"); /* no EXEC ran */

    /* BCAST is let through (its limiter keys are filtered out of the
     * invalidations: test_tracking_hidden.c). */
    px_check_status(px_cmd(c, "CLIENT TRACKING on BCAST"), "OK");
    px_check_status(px_cmd(c, "CLIENT TRACKING off"), "OK");
    px_check_status(
        px_cmd(c, "CLIENT TRACKING on PREFIX cellgate:{login BCAST"), "OK");
    px_check_status(px_cmd(c, "CLIENT TRACKING off"), "OK");
    hk_bystander(b, 11);

    a = hk_admin();
    px_check_status(px_cmd(a, "CLIENT TRACKING on BCAST"), "OK");
    px_check_status(px_cmd(a, "CLIENT TRACKING off"), "OK");
    px_check_status(px_cmd(a, "MULTI"), "OK");
    px_check_status(px_cmd(a, "KEYS *"), "QUEUED");
    {
        redisReply *r = px_cmd(a, "EXEC");
        cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "admin's EXEC: type %d",
                     r->type);
        freeReplyObject(r);
    }
    redisFree(a);
    redisFree(b);
    redisFree(c);
}

/* On a private connection: WATCH (both modes), SELECT (single mode). */
static void hk_private(void)
{
    redisContext *c = px_connect(px_env()->proxy.port);
    redisContext *b = px_connect(px_env()->proxy.port);
    struct hk_set mine, hashes, got;

    hk_fill(c, &mine, &hashes);
    px_check_status(px_cmd(c, "WATCH app:s:0"), "OK");
    hk_keys(c, "*", &got);
    hk_none_hidden(&got, "KEYS * while watching");
    hk_scan(c, "", &got);
    hk_none_hidden(&got, "SCAN while watching");
    hk_draws(c, &mine, "RANDOMKEY while watching");
    if (!hk_cluster) {
        /* One node: the private connection sees every key. */
        hk_keys(c, "*", &got);
        hk_same(&got, &mine, "KEYS * while watching");
    }
    px_check_status(px_cmd(c, "UNWATCH"), "OK");
    hk_bystander(b, 0);

    if (!hk_cluster) {
        redisContext *d = px_redis_connect(&px_env()->redis, NULL);
        struct hk_set one;
        int i;

        /* db 1: limiter-like keys only, then one of the client's. */
        px_check_status(px_cmd(d, "SELECT 1"), "OK");
        for (i = 0; i < 10; i++) {
            px_check_status(px_cmd(d, "SET " PREFIX "db1:%d x", i), "OK");
        }
        px_check_status(px_cmd(c, "SELECT 1"), "OK");
        for (i = 0; i < 5; i++) {
            px_check_nil(px_cmd(c, "RANDOMKEY"));
        }
        hk_keys(c, "*", &got);
        cr_assert_eq(got.n, 0, "KEYS * in db 1 lists %d keys", got.n);
        hk_bystander(b, 1);
        px_check_status(px_cmd(c, "SET app:db1 y"), "OK");
        memset(&one, 0, sizeof(one));
        hk_add(&one, "app:db1", 7);
        hk_keys(c, "*", &got);
        hk_same(&got, &one, "KEYS * in db 1");
        hk_scan(c, "", &got);
        hk_same(&got, &one, "SCAN in db 1");
        hk_draws(c, &one, "RANDOMKEY in db 1");
        px_check_status(px_cmd(c, "SELECT 0"), "OK");
        hk_bystander(b, 2);
        redisFree(d);
    }
    redisFree(b);
    redisFree(c);
}

Test(it_hidden, listing_single, .init = init_single, .fini = fini)
{
    hk_listing();
}

Test(it_hidden, listing_cluster, .init = init_cluster, .fini = fini,
     .timeout = 120)
{
    hk_listing();
}

Test(it_hidden, listing_single_acl_users, .init = init_single_acl, .fini = fini)
{
    hk_listing();
}

Test(it_hidden, listing_cluster_acl_users, .init = init_cluster_acl,
     .fini = fini, .timeout = 120)
{
    hk_listing();
}

Test(it_hidden, refusals_single, .init = init_single, .fini = fini)
{
    hk_refusals();
}

Test(it_hidden, refusals_cluster, .init = init_cluster, .fini = fini,
     .timeout = 120)
{
    hk_refusals();
}

Test(it_hidden, private_connection_single, .init = init_single, .fini = fini)
{
    hk_private();
}

Test(it_hidden, private_connection_single_acl_users, .init = init_single_acl,
     .fini = fini)
{
    hk_private();
}

Test(it_hidden, private_connection_cluster, .init = init_cluster, .fini = fini,
     .timeout = 120)
{
    hk_private();
}
