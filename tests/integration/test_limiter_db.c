/* CL.THROTTLE in the caller's database, single Redis: a client that
 * selected db 1 throttles db 1's key, as redis-cell does, while a
 * bystander in db 0 throttles db 0's key of the same name; each sequence
 * is redis-cell's own, and each db holds its own TAT, read straight from
 * Redis. The refusal cache (which holds db 0's keys) never answers db 1's
 * key. LIMITER's raw form stays on db 0 whatever the client selected. With
 * the two ACL users of --print-acl, the limiter user's connection selects
 * the db as well.
 * Replies assume back-to-back calls less than a second apart, as the
 * reference rows of test_limiter.c do. */
#include "tests/support/px_test.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "tests/integration/fixture.h"
#include "tests/integration/limiter_support.h"
#include "tests/integration/lstate.h"

PX_TEST_SUITE(it_limiter_db);

#define NS ((int64_t)1000000000) /* nanoseconds per second */

/* Polls of the refusal cache's learning (it reads each key once). */
#define POLLS   2000
#define POLL_MS 1

/* The TAT of `key` in db `db`, read on the direct connection `d`. */
static int64_t tat_in(redisContext *d, int db, const char *key)
{
    int64_t tat;

    px_check_status(px_cmd(d, "SELECT %d", db), "OK");
    tat = px_get_tat(d, key, strlen(key));
    px_check_status(px_cmd(d, "SELECT 0"), "OK");
    return tat;
}

/* 1 when `key` exists in db `db`. */
static long long exists_in(redisContext *d, int db, const char *key)
{
    redisReply *r;
    long long n;

    px_check_status(px_cmd(d, "SELECT %d", db), "OK");
    r = lstate_cmd(d, "EXISTS %s", key);
    cr_assert_eq(r->type, REDIS_REPLY_INTEGER);
    n = r->integer;
    freeReplyObject(r);
    px_check_status(px_cmd(d, "SELECT 0"), "OK");
    return n;
}

/* Writes what `c` has buffered (its replies are read later). */
static void send_all(redisContext *c)
{
    int done = 0;

    while (!done) {
        cr_assert_eq(redisBufferWrite(c, &done), REDIS_OK);
    }
}

Test(it_limiter_db, cl_throttle_acts_on_the_callers_db, .init = px_env_init,
     .fini = px_env_fini, .timeout = 60)
{
    redisContext *a = px_connect(px_env()->proxy.port);
    redisContext *b = px_connect(px_env()->proxy.port);
    redisContext *d = px_redis_connect(&px_env()->redis, NULL);
    int64_t tat0, tat1;
    int k;

    px_check_status(px_cmd(a, "SELECT 1"), "OK");
    /* Pipelined side by side: a's three calls and b's one go out in the
     * same flush, in batches of their own dbs. */
    for (k = 0; k < 3; k++) {
        cr_assert_eq(redisAppendCommand(a, "CL.THROTTLE k 1 2 60"), REDIS_OK);
    }
    cr_assert_eq(redisAppendCommand(b, "CL.THROTTLE k 1 2 60"), REDIS_OK);
    send_all(a);
    send_all(b);
    px_check_five(px_next(a), "db 1, 1st", 0, 2, 1, -1, 30);
    px_check_five(px_next(a), "db 1, 2nd", 0, 2, 0, -1, 60);
    px_check_five(px_next(a), "db 1, 3rd", 1, 2, 0, 30, 60);
    px_check_five(px_next(b), "db 0, 1st", 0, 2, 1, -1, 30);
    /* Each db's key holds its own state: two emission intervals (30 s)
     * ahead in db 1, one in db 0. */
    tat1 = tat_in(d, 1, "k");
    tat0 = tat_in(d, 0, "k");
    cr_assert(tat1 - tat0 > 20 * NS && tat1 - tat0 < 40 * NS,
              "db 1's TAT %lld, db 0's %lld", (long long)tat1, (long long)tat0);
    cr_assert_eq(exists_in(d, 2, "k"), 0, "db 2 got a key");
    /* LIMITER's raw form is the limiter's, in db 0, from any db. */
    px_check_five(px_cmd(a, "LIMITER raw 1 2 60"), "raw", 0, 2, 1, -1, 30);
    cr_assert_eq(exists_in(d, 1, "raw"), 0, "the raw form wrote db 1");
    cr_assert_eq(exists_in(d, 0, "raw"), 1, "the raw form missed db 0");
    /* Back in db 0, a shares b's key. */
    px_check_status(px_cmd(a, "SELECT 0"), "OK");
    px_check_five(px_cmd(a, "CL.THROTTLE k 1 2 60"), "a in db 0", 0, 2, 0, -1,
                  60);
    px_check_five(px_cmd(b, "CL.THROTTLE k 1 2 60"), "db 0, 2nd", 1, 2, 0, 30,
                  60);
    cr_assert_eq(tat_in(d, 1, "k"), tat1, "db 1's key moved");
    redisFree(d);
    redisFree(b);
    redisFree(a);
}

Test(it_limiter_db, the_refusal_cache_never_answers_another_dbs_key,
     .init = px_env_init, .fini = px_env_fini, .timeout = 60)
{
    redisContext *a = px_connect(px_env()->proxy.port);
    redisContext *b = px_connect(px_env()->proxy.port);
    long long hits;
    int i;

    /* db 0's "hot" refused, until the cache answers it. */
    px_check_five(px_cmd(b, "CL.THROTTLE hot 0 1 3600"), "db 0", 0, 1, 0, -1,
                  3600);
    hits = px_info_int(b, "limiter_refusal_cache_hits");
    for (i = 0; i < POLLS; i++) {
        struct px_five v = px_take_five(px_cmd(b, "CL.THROTTLE hot 0 1 3600"),
                                        "db 0 learning");
        cr_assert_eq(v.limited, 1, "db 0: admitted twice");
        if (px_info_int(b, "limiter_refusal_cache_hits") != hits) {
            break;
        }
        px_sleep_ms(POLL_MS);
    }
    cr_assert_lt(i, POLLS, "the cache never answered db 0's key");
    /* db 1's "hot" is another key: admitted, then refused by Redis. */
    px_check_status(px_cmd(a, "SELECT 1"), "OK");
    hits = px_info_int(b, "limiter_refusal_cache_hits");
    px_check_five(px_cmd(a, "CL.THROTTLE hot 0 1 3600"), "db 1", 0, 1, 0, -1,
                  3600);
    for (i = 0; i < 20; i++) {
        struct px_five v =
            px_take_five(px_cmd(a, "CL.THROTTLE hot 0 1 3600"), "db 1 again");
        cr_assert_eq(v.limited, 1, "db 1: admitted twice");
        px_sleep_ms(POLL_MS);
    }
    cr_assert_eq(px_info_int(b, "limiter_refusal_cache_hits"), hits,
                 "db 1's calls were answered from the cache");
    redisFree(b);
    redisFree(a);
}

/* The two users, applied to Redis by --print-acl as docs/operations.md says. */
#define USERS_YAML                                                             \
    "upstream_user: app\nupstream_password: app-pw\n"                          \
    "limiter_user: lim\nlimiter_password: lim-pw\n"

static void init_users(void)
{
    char conf[PX_PATH_MAX], cmd[2 * PX_PATH_MAX + 64];
    const char *argv[] = { "/bin/sh", "-c", cmd, NULL };
    struct px_run r;

    px_env_prepare();
    px_redis_start(&px_env()->redis, NULL);
    px_write_file(conf, sizeof(conf), "users.yaml", USERS_YAML);
    snprintf(cmd, sizeof(cmd), "%s --config %s --print-acl | redis-cli -p %d",
             PX_CELLGATE_BIN, conf, px_env()->redis.port);
    px_run(&r, argv);
    cr_assert_eq(r.status, 0, "print-acl | redis-cli: %s%s", r.out, r.err);
    cr_assert_str_eq(r.out, "OK\nOK\n", "redis-cli said: %s", r.out);
    px_run_free(&r);
    px_proxy_start_for(&px_env()->proxy, &px_env()->redis, USERS_YAML);
}

Test(it_limiter_db, the_limiter_user_throttles_in_the_callers_db,
     .init = init_users, .fini = px_env_fini, .timeout = 60)
{
    redisContext *a = px_connect(px_env()->proxy.port);
    redisContext *b = px_connect(px_env()->proxy.port);
    redisContext *d = px_redis_connect(&px_env()->redis, NULL);

    px_check_status(px_cmd(a, "SELECT 1"), "OK");
    px_check_five(px_cmd(a, "CL.THROTTLE k 1 2 60"), "db 1, 1st", 0, 2, 1, -1,
                  30);
    px_check_five(px_cmd(a, "CL.THROTTLE k 1 2 60"), "db 1, 2nd", 0, 2, 0, -1,
                  60);
    px_check_five(px_cmd(b, "CL.THROTTLE k 1 2 60"), "db 0, 1st", 0, 2, 1, -1,
                  30);
    cr_assert(tat_in(d, 1, "k") > tat_in(d, 0, "k"), "db 1 is behind db 0");
    redisFree(d);
    redisFree(b);
    redisFree(a);
}

/* A SELECT the node refuses (db 99 of 16) leaves the client in the db it
 * had, and so its CL.THROTTLE: db 1's key goes on counting, db 0 and the
 * refused db get nothing; a bystander in db 0 is untouched. */
Test(it_limiter_db, a_refused_select_keeps_the_db_it_had, .init = px_env_init,
     .fini = px_env_fini, .timeout = 60)
{
    redisContext *a = px_connect(px_env()->proxy.port);
    redisContext *b = px_connect(px_env()->proxy.port);
    redisContext *d = px_redis_connect(&px_env()->redis, NULL);
    redisReply *r;

    px_check_status(px_cmd(a, "SELECT 1"), "OK");
    px_check_five(px_cmd(a, "CL.THROTTLE rk 1 2 60"), "db 1, first", 0, 2, 1,
                  -1, 30);
    r = px_cmd(a, "SELECT 99");
    cr_assert_eq(r->type, REDIS_REPLY_ERROR, "SELECT 99 accepted");
    cr_assert_str_eq(r->str, "ERR DB index is out of range");
    freeReplyObject(r);
    px_check_five(px_cmd(a, "CL.THROTTLE rk 1 2 60"), "db 1, second", 0, 2, 0,
                  -1, 60);
    px_check_five(px_cmd(b, "CL.THROTTLE rk 1 2 60"), "bystander, db 0", 0, 2,
                  1, -1, 30);
    cr_assert_eq(exists_in(d, 1, "rk"), 1);
    cr_assert_eq(exists_in(d, 0, "rk"), 1);
    /* a's SET lands in db 1 too: its connection never left it. */
    px_check_status(px_cmd(a, "SET rk:v x"), "OK");
    cr_assert_eq(exists_in(d, 1, "rk:v"), 1);
    cr_assert_eq(exists_in(d, 0, "rk:v"), 0);
    redisFree(a);
    redisFree(b);
    redisFree(d);
}
