/* The command policy: an ordinary client gets -NOPERM for every command
 * that acts on the server, on other connections or on the whole keyspace,
 * in single and cluster mode, whatever the spelling (case, inline, inside
 * MULTI), and Redis is left exactly as it was, while a client beside the
 * attacker is served as usual. An admin client may run them; commands:
 * rules change the list; --check-config names a bad rule's location.
 * Also: reconnects back off while a node refuses cellgate's connections. */
#include "tests/integration/cluster_fixture.h"
#include "tests/integration/fixture.h"
#include "tests/integration/limiter_support.h"
#include "tests/support/px_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

PX_TEST_SUITE(it_policy);

#define NOPERM      "NOPERM this command is disabled in cellgate"
#define ADMIN_PASS  "adm1n"
#define ADMIN_YAML  "admin_password: " ADMIN_PASS "\n"
#define NSEED       24 /* keys written before the attacks */
#define MAX_MASTERS 3

/* ---------------- Both modes ---------------- */

static int pol_cluster; /* the running test is in cluster mode */

static void init_single_with(const char *yaml)
{
    pol_cluster = 0;
    px_env_prepare();
    px_redis_start(&px_env()->redis, NULL);
    px_proxy_start_for(&px_env()->proxy, &px_env()->redis, yaml);
}

static void init_cluster_with(const char *yaml)
{
    pol_cluster = 1;
    px_env_prepare();
    px_cluster_start(px_cluster(), 3, 0);
    px_cluster_proxy_start(&px_env()->proxy, px_cluster(), yaml);
}

static void init_single(void)
{
    init_single_with(ADMIN_YAML);
}

static void init_cluster(void)
{
    init_cluster_with(ADMIN_YAML);
}

static void init_single_rules(void)
{
    init_single_with(ADMIN_YAML
                     "commands: \"+flushall -get -limiter|adjust\"\n");
}

static void init_cluster_rules(void)
{
    init_cluster_with(ADMIN_YAML "commands:\n  - +flushall\n  - -GET\n"
                                 "  - -LIMITER|ADJUST\n");
}

static void fini(void)
{
    if (pol_cluster) {
        px_cluster_fini();
    } else {
        px_env_fini();
    }
}

/* Direct connections to every master (single mode: the one Redis). */
static int pol_masters(redisContext **out)
{
    int n = 0, i;

    if (!pol_cluster) {
        out[0] = px_redis_connect(&px_env()->redis, NULL);
        return 1;
    }
    for (i = 0; i < px_cluster()->nnodes && n < MAX_MASTERS; i++) {
        if (px_cluster_is_master(px_cluster(), i)) {
            out[n++] = px_cluster_connect(px_cluster(), i);
        }
    }
    return n;
}

static void pol_close(redisContext **d, int n)
{
    int i;

    for (i = 0; i < n; i++) {
        redisFree(d[i]);
    }
}

/* ---------------- What Redis looks like ---------------- */

#define MAX_IDS 64

/* What an attack could change on one node. */
struct node_state {
    long long dbsize;
    char maxclients[32];
    long long ids[MAX_IDS]; /* connections it had */
    int nids;
};

static void node_state_read(redisContext *d, struct node_state *s)
{
    redisReply *r;
    const char *p;

    memset(s, 0, sizeof(*s));
    r = px_cmd(d, "DBSIZE");
    cr_assert_eq(r->type, REDIS_REPLY_INTEGER);
    s->dbsize = r->integer;
    freeReplyObject(r);
    r = px_cmd(d, "CONFIG GET maxclients");
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
    cr_assert_eq(r->elements, 2);
    snprintf(s->maxclients, sizeof(s->maxclients), "%s", r->element[1]->str);
    freeReplyObject(r);
    r = px_cmd(d, "CLIENT LIST");
    cr_assert_eq(r->type, REDIS_REPLY_STRING);
    for (p = r->str; (p = strstr(p, "id=")) != NULL && s->nids < MAX_IDS;
         p += 3) {
        if (p == r->str || p[-1] == '\n') {
            s->ids[s->nids++] = atoll(p + 3);
        }
    }
    freeReplyObject(r);
}

/* Asserts that node `d` is as `before` says: up, a master, no key lost, no
 * setting changed, none of its connections killed, no user added, not
 * paused (a write answers at once). */
static void node_state_check(redisContext *d, const struct node_state *before)
{
    struct node_state now;
    redisReply *r;
    int i, j;

    px_check_status(px_cmd(d, "PING"), "PONG");
    /* Paused writes would hold PUBLISH (and time out here). */
    px_check_int(px_cmd(d, "PUBLISH pol:ch x"), 0);
    node_state_read(d, &now);
    cr_assert_eq(now.dbsize, before->dbsize, "keys lost: %lld -> %lld",
                 before->dbsize, now.dbsize);
    cr_assert_str_eq(now.maxclients, before->maxclients);
    for (i = 0; i < before->nids; i++) {
        for (j = 0; j < now.nids && now.ids[j] != before->ids[i]; j++) {
        }
        cr_assert_lt(j, now.nids, "connection id=%lld was killed",
                     before->ids[i]);
    }
    r = px_cmd(d, "ROLE");
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
    cr_assert_str_eq(r->element[0]->str, "master");
    freeReplyObject(r);
    r = px_cmd(d, "ACL USERS");
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
    cr_assert_eq(r->elements, 1);
    cr_assert_str_eq(r->element[0]->str, "default");
    freeReplyObject(r);
}

/* ---------------- The client beside ---------------- */

/* Writes NSEED keys through the proxy, as an ordinary client. */
static void seed(redisContext *c)
{
    int i;

    for (i = 0; i < NSEED; i++) {
        px_check_status(px_cmd(c, "SET pol:seed:%d v%d", i, i), "OK");
    }
}

static long long pol_rounds; /* rounds the client beside has run */

/* The client beside the attacker: its round `n` of ordinary commands,
 * every reply checked exactly (the seeded keys too). */
static void neighbour_round(redisContext *c, int n)
{
    char want[32];

    px_check_status(px_cmd(c, "SET pol:n:%d r%d", n, n), "OK");
    snprintf(want, sizeof(want), "r%d", n);
    px_check_str(px_cmd(c, "GET pol:n:%d", n), want);
    px_check_int(px_cmd(c, "INCR pol:count"), ++pol_rounds);
    snprintf(want, sizeof(want), "v%d", n % NSEED);
    px_check_str(px_cmd(c, "GET pol:seed:%d", n % NSEED), want);
    px_check_int(px_cmd(c, "EXISTS pol:seed:0 pol:seed:1 pol:seed:2"), 3);
}

/* ---------------- The attacks ---------------- */

/* Sends `text` split at spaces as one command; asserts a reply came. */
static redisReply *pol_cmd_words(redisContext *c, const char *text)
{
    char copy[256], *argv[16], *save = NULL, *w;
    int argc = 0;
    redisReply *r;

    snprintf(copy, sizeof(copy), "%s", text);
    for (w = strtok_r(copy, " ", &save); w != NULL && argc < 16;
         w = strtok_r(NULL, " ", &save)) {
        argv[argc++] = w;
    }
    r = redisCommandArgv(c, argc, (const char **)argv, NULL);
    cr_assert_not_null(r, "%s: no reply (%s)", text, c->errstr);
    return r;
}

/* Each one is refused whatever it would do. */
static const char *const attacks[] = {
    "FLUSHALL",
    "FLUSHALL ASYNC",
    "flushall sync",
    "FLUSHDB",
    "FlushDb ASYNC",
    "SWAPDB 0 1",
    "CONFIG SET maxclients 1",
    "config set maxclients 1",
    "CONFIG GET requirepass",
    "CONFIG RESETSTAT",
    "CONFIG REWRITE",
    "CLIENT KILL TYPE normal",
    "client kill type normal skipme no",
    "CLIENT PAUSE 100000",
    "CLIENT PAUSE 100000 WRITE",
    "CLIENT UNPAUSE",
    "CLIENT NO-EVICT on",
    "CLIENT LIST",
    "DEBUG SLEEP 0",
    "DEBUG SET-ACTIVE-EXPIRE 0",
    "debug segfault",
    "SHUTDOWN",
    "SHUTDOWN NOSAVE",
    "shutdown nosave force",
    "FAILOVER",
    "REPLICAOF 127.0.0.1 1",
    "SLAVEOF 127.0.0.1 1",
    "REPLICAOF NO ONE",
    "MONITOR",
    "SAVE",
    "BGSAVE",
    "BGREWRITEAOF",
    "MODULE LOAD /nonexistent.so",
    "MODULE LIST",
    "ACL SETUSER evil on >pw +@all ~*",
    "ACL DELUSER default",
    "SLOWLOG RESET",
    "LATENCY RESET",
    "CLUSTER RESET HARD",
    "CLUSTER FAILOVER",
    "MIGRATE 127.0.0.1 1 pol:seed:0 0 1000",
    "SYNC",
    "PSYNC ? -1",
    "LASTSAVE",
    /* The limiter's library: replaced, it would decide every limit. */
    "FUNCTION LOAD REPLACE body",
    "function flush",
    "FUNCTION FLUSH SYNC",
    "FUNCTION DELETE cellgate",
    "FUNCTION RESTORE payload REPLACE",
};

#define NATTACKS (sizeof(attacks) / sizeof(attacks[0]))

/* Every attack from an ordinary client gets NOPERM, with the client
 * beside served between them, and every node stays as it was. */
static void run_attacks(void)
{
    redisContext *d[MAX_MASTERS], *a, *b;
    struct node_state before[MAX_MASTERS];
    int nd, i;
    size_t k;

    b = px_connect(px_env()->proxy.port);
    a = px_connect(px_env()->proxy.port);
    seed(b);
    nd = pol_masters(d);
    for (i = 0; i < nd; i++) {
        node_state_read(d[i], &before[i]);
    }
    for (k = 0; k < NATTACKS; k++) {
        redisReply *r = pol_cmd_words(a, attacks[k]);
        cr_assert_eq(r->type, REDIS_REPLY_ERROR, "%s: type %d", attacks[k],
                     r->type);
        cr_assert_str_eq(r->str, NOPERM, "%s: %s", attacks[k], r->str);
        freeReplyObject(r);
        neighbour_round(b, (int)k);
    }
    /* The attacker's connection still works for ordinary commands. */
    px_check_str(px_cmd(a, "GET pol:seed:1"), "v1");
    {
        /* The neighbour's keys were added (NATTACKS and pol:count), on
         * whichever node: counted over all of them. */
        long long total = 0;
        for (i = 0; i < nd; i++) {
            struct node_state now;
            node_state_read(d[i], &now);
            before[i].dbsize = now.dbsize;
            total += now.dbsize;
            node_state_check(d[i], &before[i]);
        }
        cr_assert_eq(total, NSEED + (long long)NATTACKS + 1);
    }
    for (i = 0; i < NSEED; i++) {
        char want[16];
        snprintf(want, sizeof(want), "v%d", i);
        px_check_str(px_cmd(b, "GET pol:seed:%d", i), want);
    }
    pol_close(d, nd);
    redisFree(a);
    redisFree(b);
}

Test(it_policy, attacks_are_refused_single, .init = init_single, .fini = fini,
     .timeout = 120)
{
    run_attacks();
}

Test(it_policy, attacks_are_refused_cluster, .init = init_cluster, .fini = fini,
     .timeout = 180)
{
    run_attacks();
}

/* ---------------- Other spellings ---------------- */

/* Inline commands, mixed case, inside MULTI (first or later command, so
 * also before a deferred MULTI reached a node): refused, the transaction
 * aborted, nothing run. */
static void run_spellings(void)
{
    static const char *const inline_cmds[] = {
        "flushall\r\n",
        "  FlushAll   async\r\n",
        "CONFIG set maxclients 1\r\n",
        "client KILL type normal\r\n",
        "SHUTDOWN\r\n",
    };
    static const char noperm_wire[] = "-" NOPERM "\r\n";
    redisContext *d[MAX_MASTERS], *b, *a;
    struct node_state before[MAX_MASTERS];
    redisReply *r;
    size_t k;
    int nd, i, fd;

    b = px_connect(px_env()->proxy.port);
    seed(b);
    nd = pol_masters(d);
    for (i = 0; i < nd; i++) {
        node_state_read(d[i], &before[i]);
    }
    fd = px_raw_connect(px_env()->proxy.port, 0);
    for (k = 0; k < sizeof(inline_cmds) / sizeof(inline_cmds[0]); k++) {
        cr_assert_eq(px_raw_send(fd, inline_cmds[k], strlen(inline_cmds[k])),
                     0);
        px_raw_expect(fd, noperm_wire, sizeof(noperm_wire) - 1);
        neighbour_round(b, (int)k);
    }
    px_raw_send(fd, "GET pol:seed:3\r\n", 16);
    px_raw_expect(fd, "$2\r\nv3\r\n", 8);
    close(fd);

    a = px_connect(px_env()->proxy.port);
    px_check_error(px_cmd(a, "fLuShAlL"), NOPERM);
    px_check_error(px_cmd(a, "Config Set maxclients 1"), NOPERM);

    /* A refused command after a queued one. */
    px_check_status(px_cmd(a, "MULTI"), "OK");
    px_check_status(px_cmd(a, "SET pol:tx changed"), "QUEUED");
    px_check_error(px_cmd(a, "FLUSHALL"), NOPERM);
    px_check_error(px_cmd(a, "CLIENT KILL TYPE normal"), NOPERM);
    px_check_status(px_cmd(a, "APPEND pol:tx more"), "QUEUED");
    px_check_error(px_cmd(a, "EXEC"),
                   "EXECABORT Transaction discarded because of previous "
                   "errors.");
    neighbour_round(b, 10);
    /* A refused command first (cluster mode: MULTI not sent yet). */
    px_check_status(px_cmd(a, "MULTI"), "OK");
    px_check_error(px_cmd(a, "flushdb"), NOPERM);
    px_check_status(px_cmd(a, "SET pol:tx changed"), "QUEUED");
    px_check_error(px_cmd(a, "EXEC"),
                   "EXECABORT Transaction discarded because of previous "
                   "errors.");
    /* Nothing of either transaction ran. */
    px_check_nil(px_cmd(a, "GET pol:tx"));
    px_check_str(px_cmd(a, "GET pol:seed:0"), "v0");
    /* A transaction with no refused command still runs. */
    px_check_status(px_cmd(a, "MULTI"), "OK");
    px_check_status(px_cmd(a, "INCR pol:tx"), "QUEUED");
    r = px_cmd(a, "EXEC");
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
    cr_assert_eq(r->elements, 1);
    cr_assert_eq(r->element[0]->integer, 1);
    freeReplyObject(r);
    px_check_int(px_cmd(a, "DEL pol:tx"), 1);
    neighbour_round(b, 11);

    for (i = 0; i < nd; i++) {
        struct node_state now;
        node_state_read(d[i], &now);
        before[i].dbsize = now.dbsize; /* the neighbour wrote some */
        node_state_check(d[i], &before[i]);
    }
    pol_close(d, nd);
    redisFree(a);
    redisFree(b);
}

Test(it_policy, inline_case_and_multi_do_not_bypass_single, .init = init_single,
     .fini = fini, .timeout = 120)
{
    run_spellings();
}

Test(it_policy, inline_case_and_multi_do_not_bypass_cluster,
     .init = init_cluster, .fini = fini, .timeout = 180)
{
    run_spellings();
}

/* ---------------- Admin ---------------- */

/* The same commands succeed for an admin client (the ones that would stop
 * or demote the fixture's nodes are left out), while an ordinary client
 * beside is still refused. */
static void run_admin(void)
{
    redisContext *d[MAX_MASTERS], *adm, *b;
    redisReply *r;
    int nd, i;

    b = px_connect(px_env()->proxy.port);
    seed(b);
    adm = px_connect(px_env()->proxy.port);
    px_check_status(px_cmd(adm, "AUTH admin %s", ADMIN_PASS), "OK");
    r = px_cmd(adm, "CONFIG GET maxclients");
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "type %d: %s", r->type,
                 r->type == REDIS_REPLY_ERROR ? r->str : "");
    freeReplyObject(r);
    px_check_status(px_cmd(adm, "CONFIG SET slowlog-max-len 129"), "OK");
    px_check_status(px_cmd(adm, "CONFIG RESETSTAT"), "OK");
    px_check_status(px_cmd(adm, "CLIENT PAUSE 10"), "OK");
    px_check_status(px_cmd(adm, "CLIENT UNPAUSE"), "OK");
    px_check_status(px_cmd(adm, "CLIENT NO-EVICT on"), "OK");
    r = px_cmd(adm, "CLIENT LIST");
    cr_assert_eq(r->type, REDIS_REPLY_STRING);
    freeReplyObject(r);
    px_check_status(px_cmd(adm, "SLOWLOG RESET"), "OK");
    neighbour_round(b, 0);
    px_check_error(px_cmd(b, "CONFIG SET slowlog-max-len 7"), NOPERM);
    px_check_error(px_cmd(b, "FLUSHALL"), NOPERM);
    nd = pol_masters(d);
    {
        /* CONFIG SET reaches one node in cluster mode. */
        int set = 0;
        for (i = 0; i < nd; i++) {
            r = px_cmd(d[i], "CONFIG GET slowlog-max-len");
            set += strcmp(r->element[1]->str, "129") == 0;
            freeReplyObject(r);
        }
        cr_assert_geq(set, 1);
    }
    /* Last: the admin wipes every node. */
    px_check_status(px_cmd(adm, "FLUSHALL"), "OK");
    for (i = 0; i < nd; i++) {
        px_check_int(px_cmd(d[i], "DBSIZE"), 0);
    }
    px_check_nil(px_cmd(b, "GET pol:seed:0"));
    px_check_status(px_cmd(b, "SET pol:after 1"), "OK");
    pol_close(d, nd);
    redisFree(adm);
    redisFree(b);
}

Test(it_policy, admin_runs_them_single, .init = init_single, .fini = fini,
     .timeout = 120)
{
    redisContext *adm = px_connect(px_env()->proxy.port);

    run_admin();
    /* Single mode only: SWAPDB and SAVE. */
    px_check_status(px_cmd(adm, "AUTH admin %s", ADMIN_PASS), "OK");
    px_check_status(px_cmd(adm, "SWAPDB 0 1"), "OK");
    px_check_status(px_cmd(adm, "SWAPDB 0 1"), "OK");
    px_check_str(px_cmd(adm, "GET pol:after"), "1");
    px_check_status(px_cmd(adm, "SAVE"), "OK");
    redisFree(adm);
}

Test(it_policy, admin_runs_them_cluster, .init = init_cluster, .fini = fini,
     .timeout = 180)
{
    run_admin();
}

/* ---------------- commands: ---------------- */

/* "+flushall -get -limiter|adjust": FLUSHALL is allowed, GET and LIMITER
 * ADJUST refused (a client that could give any identity's units back),
 * the rest of the default stays (LIMITER's other forms among it). */
static void run_rules(void)
{
    redisContext *d[MAX_MASTERS], *a, *b;
    redisReply *r;
    int nd, i;

    b = px_connect(px_env()->proxy.port);
    a = px_connect(px_env()->proxy.port);
    seed(b);
    px_check_error(px_cmd(a, "GET pol:seed:0"), NOPERM);
    px_check_error(px_cmd(a, "get pol:seed:0"), NOPERM);
    px_check_error(px_cmd(a, "FLUSHDB"), NOPERM);
    px_check_error(px_cmd(a, "CONFIG SET maxclients 1"), NOPERM);
    px_check_int(px_cmd(b, "EXISTS pol:seed:0"), 1);
    px_check_status(px_cmd(a, "SET pol:k v"), "OK");
    px_check_status(px_cmd(a, "FLUSHALL"), "OK");
    nd = pol_masters(d);
    for (i = 0; i < nd; i++) {
        px_check_int(px_cmd(d[i], "DBSIZE"), 0);
    }
    px_check_int(px_cmd(b, "EXISTS pol:seed:0 pol:k"), 0);
    px_check_error(px_cmd(a, "LIMITER ADJUST user:1 -5"), NOPERM);
    px_check_error(px_cmd(a, "limiter Adjust user:1 5"), NOPERM);
    r = px_cmd(a, "LIMITER pol:cl 1 10 60"); /* CL.THROTTLE's form */
    cr_assert(r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 5);
    freeReplyObject(r);
    /* An admin is not bound by the rules. */
    px_check_status(px_cmd(b, "AUTH admin %s", ADMIN_PASS), "OK");
    px_check_status(px_cmd(b, "SET pol:k v"), "OK");
    px_check_str(px_cmd(b, "GET pol:k"), "v");
    r = px_cmd(b, "LIMITER ADJUST user:1 -5"); /* no tree: not NOPERM */
    cr_assert(r != NULL && r->type == REDIS_REPLY_ERROR &&
                  strstr(r->str, "NOPERM") == NULL,
              "%s", r != NULL && r->str != NULL ? r->str : "(null)");
    freeReplyObject(r);
    pol_close(d, nd);
    redisFree(a);
    redisFree(b);
}

Test(it_policy, rules_change_the_policy_single, .init = init_single_rules,
     .fini = fini, .timeout = 120)
{
    run_rules();
}

Test(it_policy, rules_change_the_policy_cluster, .init = init_cluster_rules,
     .fini = fini, .timeout = 180)
{
    run_rules();
}

/* ---------------- Scripts ---------------- */

/* cellgate does not look inside scripts: what keeps them from the
 * server's commands is the ACL user cellgate logs into Redis as. */
static void init_acl_user(void)
{
    redisContext *d;

    pol_cluster = 0;
    px_env_prepare();
    px_redis_start(&px_env()->redis, NULL);
    d = px_redis_connect(&px_env()->redis, NULL);
    px_check_status(px_cmd(d, "ACL SETUSER cg on >cgpass ~* &* +@all "
                              "-@admin -@dangerous +info"),
                    "OK");
    redisFree(d);
    px_proxy_start_for(&px_env()->proxy, &px_env()->redis,
                       "upstream_user: cg\nupstream_password: cgpass\n");
}

Test(it_policy, scripts_are_bound_by_the_upstream_user, .init = init_acl_user,
     .fini = fini, .timeout = 120)
{
    redisContext *a = px_connect(px_env()->proxy.port);
    redisContext *d = px_redis_connect(&px_env()->redis, NULL);
    redisReply *r;

    px_check_status(px_cmd(a, "SET pol:k v"), "OK");
    r = px_cmd(a, "EVAL %s 0", "return redis.call('FLUSHALL')");
    cr_assert_eq(r->type, REDIS_REPLY_ERROR);
    cr_assert_not_null(strstr(r->str, "can't run this command"), "%s", r->str);
    freeReplyObject(r);
    px_check_error(px_cmd(a, "FLUSHALL"), NOPERM);
    px_check_str(px_cmd(a, "GET pol:k"), "v");
    px_check_int(px_cmd(d, "DBSIZE"), 1);
    redisFree(d);
    redisFree(a);
}

/* ---------------- --check-config ---------------- */

Test(it_policy, check_config_names_an_unknown_command, .fini = px_env_fini,
     .timeout = 30)
{
    char path[PX_PATH_MAX];
    struct px_run res;
    const char *argv[] = { PX_CELLGATE_BIN, "--config", path, "--check-config",
                           NULL };

    px_write_file(path, sizeof(path), "bad.yaml",
                  "listen: 127.0.0.1:7777\n"
                  "commands:\n"
                  "  - +flushall\n"
                  "  - -no-such-command\n"
                  "  - +@no-such-category\n");
    px_run(&res, argv);
    cr_assert_eq(res.status, 1, "exit %d, stderr: %s", res.status, res.err);
    px_check_location(res.err, path, 4);
    px_check_location(res.err, path, 5);
    cr_assert_not_null(strstr(res.err, "unknown command \"-no-such-command\""),
                       "%s", res.err);
    cr_assert_not_null(
        strstr(res.err, "unknown category \"+@no-such-category\""), "%s",
        res.err);
    px_run_free(&res);

    px_write_file(path, sizeof(path), "good.yaml",
                  "listen: 127.0.0.1:7777\n"
                  "commands: \"+flushall -keys +@dangerous -@admin "
                  "+client|kill -config|get\"\n");
    px_run(&res, argv);
    cr_assert_eq(res.status, 0, "exit %d, stderr: %s", res.status, res.err);
    px_run_free(&res);
}

/* ---------------- Reconnect backoff ---------------- */

/* Connections a node was asked for so far: those it took and those it
 * refused (Redis counts the refused ones apart). */
static long long pol_accepted(redisContext *d)
{
    return px_info_int(d, "total_connections_received") +
           px_info_int(d, "rejected_connections");
}

/* A node that refuses cellgate's connections (maxclients reached) sees a
 * few attempts, not one every 50 ms per connection; once it takes clients
 * again cellgate serves. */
static void init_full_node(void)
{
    pol_cluster = 0;
    px_env_prepare();
    px_redis_start(&px_env()->redis, NULL);
}

Test(it_policy, reconnects_back_off_while_the_node_refuses,
     .init = init_full_node, .fini = fini, .timeout = 120)
{
    redisContext *d = px_redis_connect(&px_env()->redis, NULL);
    redisContext *c;
    redisReply *r;
    long long first, attempts;
    int ok = 0, tries;

    /* The direct connection holds the only slot. */
    px_check_status(px_cmd(d, "CONFIG SET maxclients 1"), "OK");
    px_proxy_start_for(&px_env()->proxy, &px_env()->redis, NULL);
    c = px_connect(px_env()->proxy.port);
    r = px_cmd(c, "GET pol:k");
    cr_assert_eq(r->type, REDIS_REPLY_ERROR);
    freeReplyObject(r);
    first = pol_accepted(d);
    px_sleep_ms(3000);
    attempts = pol_accepted(d) - first;
    /* Two shared connections retrying every 50 ms: about 120. Backing off
     * to 2 s: at most 8 each in 3 s. */
    cr_assert_leq(attempts, 20, "%lld connection attempts in 3 s", attempts);
    cr_assert_geq(attempts, 2, "cellgate stopped trying");
    /* Requests fail fast meanwhile, with the reason. */
    r = px_cmd(c, "GET pol:k");
    cr_assert_eq(r->type, REDIS_REPLY_ERROR);
    cr_assert_not_null(strstr(r->str, "unavailable: ERR max number of "
                                      "clients reached"),
                       "%s", r->str);
    freeReplyObject(r);

    px_check_status(px_cmd(d, "CONFIG SET maxclients 10000"), "OK");
    for (tries = 0; tries < 100 && !ok; tries++) {
        r = px_cmd(c, "SET pol:k back");
        ok = r->type == REDIS_REPLY_STATUS;
        freeReplyObject(r);
        if (!ok) {
            px_sleep_ms(100);
        }
    }
    cr_assert(ok, "cellgate did not serve again");
    px_check_str(px_cmd(c, "GET pol:k"), "back");
    px_check_str(px_cmd(d, "GET pol:k"), "back");
    redisFree(c);
    redisFree(d);
}

/* ---------------- Limiter keys named by CL.THROTTLE ---------------- */

static const char victim_yaml[] = "user:\n"
                                  "  children:\n"
                                  "    \"*\":\n"
                                  "      limits: [5, 1, 3600]\n";

#define VICTIM_KEY "cellgate:{user:victim}#0:gcra"

static void init_victim_embedded(void)
{
    px_limits_start(PX_MODE_EMBEDDED, victim_yaml, "admin_password: s3cret\n");
}

static void init_victim_single(void)
{
    px_limits_start(PX_MODE_SINGLE, victim_yaml, "admin_password: s3cret\n");
}

static void init_victim_cluster(void)
{
    px_limits_start(PX_MODE_CLUSTER, victim_yaml, "admin_password: s3cret\n");
}

/* CL.THROTTLE (or the raw LIMITER form) of another identity's key, with
 * a day's period, would push its TAT a day ahead: refused for an
 * ordinary client, nothing written; the victim's own checks count on as
 * before; an admin client may. */
static void run_victim(void)
{
    static const char *const forms[] = { "CL.THROTTLE", "cl.throttle",
                                         "LIMITER" };
    redisContext *v = px_connect(px_env()->proxy.port);
    redisContext *a = px_connect(px_env()->proxy.port);
    redisContext *d = px_direct_for(VICTIM_KEY, strlen(VICTIM_KEY));
    int64_t tat = 0;
    size_t k;

    px_check_five(px_cmd(v, "LIMITER CHECK user:victim"), "first", 0, 6, 5, -1,
                  3600);
    if (d != NULL) {
        tat = px_get_tat(d, VICTIM_KEY, strlen(VICTIM_KEY));
    }
    for (k = 0; k < sizeof(forms) / sizeof(forms[0]); k++) {
        px_check_error(
            px_cmd(a, "%s %s 100000 1 86400", forms[k], VICTIM_KEY),
            "NOPERM keys under 'cellgate:' belong to the rate limiter; "
            "AUTH admin to touch them");
        px_check_five(px_cmd(v, "LIMITER PEEK user:victim"), "victim", 0, 6, 4,
                      -1, 7200);
    }
    /* Wrong arguments are still redis-cell's usage error first. */
    px_check_error_prefix(px_cmd(a, "CL.THROTTLE %s", VICTIM_KEY),
                          "Cell error: Store error: Usage:");
    if (d != NULL) {
        cr_assert_eq(px_get_tat(d, VICTIM_KEY, strlen(VICTIM_KEY)), tat,
                     "a refused CL.THROTTLE moved the victim's TAT");
    }
    px_check_five(px_cmd(v, "LIMITER CHECK user:victim"), "second", 0, 6, 4, -1,
                  7200);
    px_check_status(px_cmd(a, "AUTH admin s3cret"), "OK");
    if (d == NULL) {
        /* The embedded store: one map holds both, so the admin's
         * CL.THROTTLE of the limit key sees the victim's state. */
        px_check_five(px_cmd(a, "CL.THROTTLE %s 5 1 3600 0", VICTIM_KEY),
                      "admin", 0, 6, 4, -1, 7200);
    } else {
        /* On Redis the victim's state is a record of its identity's
         * state string (docs/limiter.md, State): the key CL.THROTTLE reads is
         * another, absent one; what matters is that the admin is let through.
         */
        px_check_five(px_cmd(a, "CL.THROTTLE %s 5 1 3600 0", VICTIM_KEY),
                      "admin", 0, 6, 6, -1, 0);
    }
    if (d != NULL) {
        redisFree(d);
    }
    redisFree(a);
    redisFree(v);
}

Test(it_policy, limiter_keys_are_not_throttled_by_clients_embedded,
     .init = init_victim_embedded, .fini = px_env_fini, .timeout = 60)
{
    run_victim();
}

Test(it_policy, limiter_keys_are_not_throttled_by_clients_single,
     .init = init_victim_single, .fini = px_env_fini, .timeout = 60)
{
    run_victim();
}

Test(it_policy, limiter_keys_are_not_throttled_by_clients_cluster,
     .init = init_victim_cluster, .fini = px_cluster_fini, .timeout = 120)
{
    run_victim();
}
