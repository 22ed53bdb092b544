/* A client's limiter calls and its other commands reach Redis in the
 * order it sent them, and the limiter calls of many clients share script
 * calls, through the real binary against real Redis (single and a
 * 3-master cluster).
 *
 * cellgate holds a part-filled batch of limiter calls back while the
 * connection it goes on owes the limiter a reply (Nagle's rule: the calls
 * that arrive meanwhile join it), and puts the calls of every client that
 * owes nothing else on one connection per node. Neither may let a
 * client's GET, DEL or SET overtake its CL.THROTTLE, or the other way
 * round. The limiter's-own-user mode (limiter_password), where the
 * limiter's calls go on connections of their own, is tested in
 * test_acl.c. Nothing asserts how fast anything is. */
#include "tests/support/px_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/integration/cluster_fixture.h"
#include "tests/integration/fixture.h"
#include "tests/integration/limiter_support.h"

PX_TEST_SUITE(it_limiter_order);

#define ROUNDS    20   /* rounds of the mixed pipeline */
#define WAITERS   10   /* clients whose calls wait behind a call in flight */
#define BUSY_MS   1000 /* how long the script that holds Redis runs */
#define SETTLE_MS 100  /* lets a command reach Redis before the next goes */
#define PAUSE_MS  500  /* how long the masters keep the first map back */

/* Two shared connections per node, so that clients differ in lanes. */
static const char more_yaml[] = "upstream_pool: 2\n";

/* A tree, so LIMITER is on too; the tests use CL.THROTTLE. */
static const char tree_yaml[] = "user:\n"
                                "  children:\n"
                                "    \"*\":\n"
                                "      limits: [2, 1, 60]\n";

static char late_limits[512]; /* init_cluster_map_late's limits file */

static void init_single(void)
{
    px_limits_start(PX_MODE_SINGLE, tree_yaml, more_yaml);
}

static void init_cluster(void)
{
    px_limits_start(PX_MODE_CLUSTER, tree_yaml, more_yaml);
}

/* The mixed pipeline of px_check_client_order, twice over, beside
 * another client's limiter calls. */
static void clients_keep_their_order(void)
{
    redisContext *c = px_connect(px_env()->proxy.port);
    redisContext *o = px_connect(px_env()->proxy.port);

    px_check_client_order(c, o, "ord", ROUNDS);
    px_check_client_order(c, o, "ord2", ROUNDS);
    /* One at a time too: nothing owed, so the client moves lanes. */
    px_check_client_order(c, o, "ord3", 1);
    redisFree(o);
    redisFree(c);
}

Test(it_limiter_order, a_clients_commands_keep_its_order_single,
     .init = init_single, .fini = px_env_fini, .timeout = 60)
{
    clients_keep_their_order();
}

Test(it_limiter_order, a_clients_commands_keep_its_order_cluster,
     .init = init_cluster, .fini = px_cluster_fini, .timeout = 120)
{
    clients_keep_their_order();
}

/* A command that takes a private connection (MULTI ... EXEC) after a
 * CL.THROTTLE, and a CL.THROTTLE after it: each sees the other. */
Test(it_limiter_order, a_transaction_and_cl_throttle_keep_their_order,
     .init = init_single, .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = px_connect(px_env()->proxy.port);
    redisReply *r;

    redisAppendCommand(c, "CL.THROTTLE tx 0 1 60");
    redisAppendCommand(c, "MULTI");
    redisAppendCommand(c, "DEL tx");
    redisAppendCommand(c, "EXEC");
    redisAppendCommand(c, "CL.THROTTLE tx 0 1 60");
    redisAppendCommand(c, "CL.THROTTLE tx 0 1 60");
    px_flush(c);
    px_check_five(px_next(c), "first", 0, 1, 0, -1, 60);
    px_check_status(px_next(c), "OK");
    px_check_status(px_next(c), "QUEUED");
    r = px_next(c);
    cr_assert(r->type == REDIS_REPLY_ARRAY && r->elements == 1 &&
                  r->element[0]->integer == 1,
              "EXEC's DEL did not find the TAT the first call wrote");
    freeReplyObject(r);
    px_check_five(px_next(c), "after the transaction", 0, 1, 0, -1, 60);
    px_check_five(px_next(c), "refused", 1, 1, 0, 60, 60);
    redisFree(c);
}

/* Calls that arrive, one client each, while a call is in flight on the
 * limiter's connection wait for its reply and then go to Redis together,
 * in one script call, whatever lanes their clients' commands use: Redis
 * is held by a script, so the first call stays in flight while the others
 * arrive. Every reply is exact. */
Test(it_limiter_order, calls_that_arrive_meanwhile_share_one_script_call,
     .init = init_single, .fini = px_env_fini, .timeout = 60)
{
    redisContext *d = px_redis_connect(&px_env()->redis, NULL);
    redisContext *busy = px_connect(px_env()->proxy.port);
    redisContext *first = px_connect(px_env()->proxy.port);
    redisContext *w[WAITERS];
    long long before;
    char what[32];
    int i;

    for (i = 0; i < WAITERS; i++) {
        w[i] = px_connect(px_env()->proxy.port);
    }
    /* The library is loaded (a load in flight holds calls back too). */
    px_check_five(px_cmd(first, "CL.THROTTLE warm 0 1 60"), "warm", 0, 1, 0, -1,
                  60);
    before = px_cmdstat_calls(d, "fcall");
    px_hold_redis(busy, BUSY_MS);
    px_sleep_ms(SETTLE_MS);
    redisAppendCommand(first, "CL.THROTTLE first 0 1 60");
    px_flush(first);
    px_sleep_ms(SETTLE_MS);
    for (i = 0; i < WAITERS; i++) {
        redisAppendCommand(w[i], "CL.THROTTLE w%d 1 1 60", i);
        px_flush(w[i]);
    }
    px_check_int(px_next(busy), 1);
    px_check_five(px_next(first), "first", 0, 1, 0, -1, 60);
    for (i = 0; i < WAITERS; i++) {
        snprintf(what, sizeof(what), "waiter %d", i);
        px_check_five(px_next(w[i]), what, 0, 2, 1, -1, 60);
        redisFree(w[i]);
    }
    cr_assert_eq(px_cmdstat_calls(d, "fcall") - before, 2,
                 "%lld script calls for the first call and %d waiting ones",
                 px_cmdstat_calls(d, "fcall") - before, WAITERS);
    redisFree(first);
    redisFree(busy);
    redisFree(d);
}

/* Clients and rounds of the test below. */
#define OWN_CLIENTS 6
#define OWN_ROUNDS  5

/* Adds the "127.0.0.1:PORT" of MONITOR line `line` (`[db addr] "CMD"
 * ...`) to `set` (n entries, at most OWN_CLIENTS * 4) unless there. */
static void own_add(char set[][32], int *n, const char *line)
{
    const char *a = strchr(line, '[');
    const char *sp = a != NULL ? strchr(a, ' ') : NULL;
    const char *end = sp != NULL ? strchr(sp, ']') : NULL;
    size_t len;

    cr_assert(end != NULL, "MONITOR line: %s", line);
    len = (size_t)(end - sp - 1);
    cr_assert_lt(len, 32);
    for (int i = 0; i < *n; i++) {
        if (strlen(set[i]) == len && memcmp(set[i], sp + 1, len) == 0) {
            return;
        }
    }
    cr_assert_lt(*n, OWN_CLIENTS * 4);
    memcpy(set[*n], sp + 1, len);
    set[*n][len] = '\0';
    (*n)++;
}

/* The limiter's calls have a connection of their own per node: clients
 * that owe nothing else send their calls there, and their later commands
 * (not pipelined behind a call) go on their own lanes, so no client's
 * reply, however large, waits on the wire in front of limiter replies.
 * Redis's MONITOR names the connection each command came on: no
 * connection carries both a script call and a GET or SET. */
static void limiter_has_its_own_connection(void)
{
    const char *marker = "own-connection-done";
    redisContext *d = px_direct_for("{own}", 5);
    redisContext *mon = px_direct_for("{own}", 5);
    redisContext *c[OWN_CLIENTS];
    char lim[OWN_CLIENTS * 4][32], fwd[OWN_CLIENTS * 4][32], what[64];
    int nlim = 0, nfwd = 0, i, r;

    for (i = 0; i < OWN_CLIENTS; i++) {
        c[i] = px_connect(px_env()->proxy.port);
    }
    px_check_status(px_cmd(mon, "MONITOR"), "OK");
    for (r = 0; r < OWN_ROUNDS; r++) {
        for (i = 0; i < OWN_CLIENTS; i++) {
            snprintf(what, sizeof(what), "client %d, round %d", i, r);
            px_check_five(px_cmd(c[i], "CL.THROTTLE {own}k%d 9 1 60", i), what,
                          0, 10, 9 - r, -1, 60 * (r + 1));
            snprintf(what, sizeof(what), "%d", r);
            px_check_status(px_cmd(c[i], "SET {own}s%d %s", i, what), "OK");
            px_check_str(px_cmd(c[i], "GET {own}s%d", i), what);
        }
    }
    px_check_str(px_cmd(d, "ECHO %s", marker), marker);
    for (;;) {
        redisReply *m = px_next(mon);
        cr_assert_eq(m->type, REDIS_REPLY_STATUS);
        if (strstr(m->str, marker) != NULL) {
            freeReplyObject(m);
            break;
        }
        if (strstr(m->str, " lua]") != NULL) {
            /* A script's own commands. */
        } else if (strstr(m->str, "] \"FCALL\"") != NULL) {
            own_add(lim, &nlim, m->str);
        } else if (strstr(m->str, "] \"GET\"") != NULL ||
                   strstr(m->str, "] \"SET\"") != NULL) {
            own_add(fwd, &nfwd, m->str);
        }
        freeReplyObject(m);
    }
    cr_assert_gt(nlim, 0, "no script call seen");
    cr_assert_gt(nfwd, 0, "no GET or SET seen");
    for (i = 0; i < nlim; i++) {
        for (r = 0; r < nfwd; r++) {
            cr_assert_str_neq(lim[i], fwd[r],
                              "%s carried script calls and GET/SET", lim[i]);
        }
    }
    for (i = 0; i < OWN_CLIENTS; i++) {
        redisFree(c[i]);
    }
    redisFree(mon);
    redisFree(d);
}

Test(it_limiter_order, limiter_calls_have_a_connection_of_their_own_single,
     .init = init_single, .fini = px_env_fini, .timeout = 60)
{
    limiter_has_its_own_connection();
}

Test(it_limiter_order, limiter_calls_have_a_connection_of_their_own_cluster,
     .init = init_cluster, .fini = px_cluster_fini, .timeout = 120)
{
    limiter_has_its_own_connection();
}

/* A proxy whose first slot map is late: every master paused (CLIENT
 * PAUSE ... ALL: the proxy's CLUSTER SLOTS waits too) while it starts, so
 * the clients' first commands are held until the map arrives. */
static void init_cluster_map_late(void)
{
    struct px_cluster *cl;

    px_write_file(late_limits, sizeof(late_limits), "limits.yaml", tree_yaml);
    px_cluster_init();
    cl = px_cluster();
    for (int m = 0; m < cl->nmasters; m++) {
        redisContext *d = px_cluster_connect(cl, m);
        px_check_status(px_cmd(d, "CLIENT PAUSE %d ALL", PAUSE_MS), "OK");
        redisFree(d);
    }
    px_cluster_proxy_start(&px_env()->proxy, cl, more_yaml);
}

/* Held requests go on in the order they came, a client's limiter calls
 * sent before its command behind them (before, a GET held behind its
 * CL.THROTTLE reached Redis first and found no TAT: the limiter's batch
 * waited for the next loop turn). */
Test(it_limiter_order, held_until_the_map_keeps_the_order_cluster,
     .init = init_cluster_map_late, .fini = px_cluster_fini, .timeout = 120)
{
    redisContext *c = px_connect(px_env()->proxy.port);
    redisContext *o = px_connect(px_env()->proxy.port);

    px_check_client_order(c, o, "late", 2);
    redisFree(o);
    redisFree(c);
}
