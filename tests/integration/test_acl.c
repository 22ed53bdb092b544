/* The two Redis ACL users: `cellgate --print-acl` prints them, redis-cli
 * applies them to real redis-servers, and then Redis itself refuses client
 * traffic every way to limiter state the prefix guard cannot see (a script
 * or function naming a limiter key only in its arguments, SORT ... GET, and
 * an admin client's direct writes and flushes), while the limiter, logged
 * in as its own user, works as before: checks, overrides, resets,
 * CL.THROTTLE, the refusal cache, a library flushed under it. Nothing is
 * written, and a client beside the attacker is served exactly. At start
 * cellgate checks the users with ACL DRYRUN and logs what it found. Single
 * and cluster mode. */
#include "tests/integration/cluster_fixture.h"
#include "tests/integration/fixture.h"
#include "tests/integration/limiter_support.h"
#include "tests/integration/lstate.h"
#include "tests/support/px_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

PX_TEST_SUITE(it_acl);

#define ADMIN_PASS "adm1n"
#define USERS_YAML                                                             \
    "upstream_user: app\nupstream_password: app-pw\n"                          \
    "limiter_user: cg-limiter\nlimiter_password: \"lim pw\"\n"                 \
    "admin_password: " ADMIN_PASS "\n"

/* user:<id> may pass 3 times an hour; CL.THROTTLE tests use their own. */
#define LIMITS_YAML                                                            \
    "user:\n  children:\n    \"*\":\n      limits: [2, 1, 3600]\n"

#define MALLORY_OVR  "cellgate:{user:mallory}#overrides"
#define VICTIM_KEY   "cellgate:{user:victim}#0:gcra"
#define VICTIM_STATE "cellgate:{user:victim}"
#define MAX_MASTERS  3

static int acl_cluster;              /* the running test is in cluster mode */
static char acl_conf[PX_PATH_MAX];   /* proxy.yaml naming the users */
static char acl_limits[PX_PATH_MAX]; /* limits.yaml */

static void fini(void)
{
    if (acl_cluster) {
        px_cluster_fini();
    } else {
        px_env_fini();
    }
}

/* Writes proxy.yaml (the users, plus `more`) for --print-acl and for the
 * proxy, and the limits file. */
static void acl_files(const char *more)
{
    char text[1024];

    px_write_file(acl_limits, sizeof(acl_limits), "limits.yaml", LIMITS_YAML);
    snprintf(text, sizeof(text), "%slimits_file: %s\n%s", USERS_YAML,
             acl_limits, more != NULL ? more : "");
    px_write_file(acl_conf, sizeof(acl_conf), "users.yaml", text);
}

/* `cellgate --print-acl | redis-cli -p port`, as docs/operations.md says. */
static void acl_apply(int port)
{
    char cmd[2 * PX_PATH_MAX + 64];
    const char *argv[] = { "/bin/sh", "-c", cmd, NULL };
    struct px_run r;

    snprintf(cmd, sizeof(cmd), "%s --config %s --print-acl | redis-cli -p %d",
             PX_CELLGATE_BIN, acl_conf, port);
    px_run(&r, argv);
    cr_assert_eq(r.status, 0, "print-acl | redis-cli: %s%s", r.out, r.err);
    cr_assert_str_eq(r.out, "OK\nOK\n", "redis-cli said: %s", r.out);
    px_run_free(&r);
}

/* The proxy's lines after the users (its own listen line comes first). */
static void acl_proxy_yaml(char *out, size_t outlen, const char *more)
{
    snprintf(out, outlen, "%slimits_file: %s\n%s", USERS_YAML, acl_limits,
             more != NULL ? more : "");
}

static void init_single(void)
{
    char yaml[1024];

    acl_cluster = 0;
    px_env_prepare();
    acl_files(NULL);
    px_redis_start(&px_env()->redis, NULL);
    acl_apply(px_env()->redis.port);
    acl_proxy_yaml(yaml, sizeof(yaml), NULL);
    px_proxy_start_for(&px_env()->proxy, &px_env()->redis, yaml);
}

static void init_cluster(void)
{
    char yaml[1024];
    int i;

    acl_cluster = 1;
    px_env_prepare();
    acl_files(NULL);
    px_cluster_start(px_cluster(), 3, 0);
    for (i = 0; i < 3; i++) {
        acl_apply(px_cluster_port(px_cluster(), i));
    }
    acl_proxy_yaml(yaml, sizeof(yaml), NULL);
    px_cluster_proxy_start(&px_env()->proxy, px_cluster(), yaml);
}

/* A direct (default user) connection to the master of `key`. */
static redisContext *acl_direct(const char *key)
{
    if (acl_cluster) {
        return px_cluster_connect(
            px_cluster(),
            px_cluster_master_of_key(px_cluster(), key, strlen(key)));
    }
    return px_redis_connect(&px_env()->redis, NULL);
}

/* Keys in all masters together. */
static long long acl_dbsize(void)
{
    long long total = 0;
    int i;

    for (i = 0; i < (acl_cluster ? MAX_MASTERS : 1); i++) {
        redisContext *d = acl_cluster
                              ? px_cluster_connect(px_cluster(), i)
                              : px_redis_connect(&px_env()->redis, NULL);
        redisReply *r = px_cmd(d, "DBSIZE");
        cr_assert_eq(r->type, REDIS_REPLY_INTEGER);
        total += r->integer;
        freeReplyObject(r);
        redisFree(d);
    }
    return total;
}

/* The error Redis gives a user its ACL refuses (a script's or a
 * command's), never the proxy's own guard. */
static void acl_check_refused_by_redis(redisReply *r, const char *what)
{
    cr_assert_eq(r->type, REDIS_REPLY_ERROR, "%s: not refused (type %d)", what,
                 r->type);
    cr_assert(strstr(r->str, "in cellgate") == NULL &&
                  strstr(r->str, "belong to the rate limiter") == NULL,
              "%s: refused by the proxy, not by Redis: %s", what, r->str);
    cr_assert(strstr(r->str, "no permissions") != NULL ||
                  strstr(r->str, "can't access") != NULL ||
                  strstr(r->str, "denied") != NULL,
              "%s: not an ACL refusal: %s", what, r->str);
    freeReplyObject(r);
}

/* Asserts a LIMITER reply's limited and remaining fields (limit 3), and
 * frees it. */
static void acl_check(redisReply *r, const char *what, long long limited,
                      long long remaining)
{
    struct px_five f = px_take_five(r, what);

    cr_assert_eq(f.limited, limited, "%s: limited %lld", what, f.limited);
    cr_assert_eq(f.limit, 3, "%s: limit %lld", what, f.limit);
    cr_assert_eq(f.remaining, remaining, "%s: remaining %lld", what,
                 f.remaining);
}

/* A client beside the attacker: a write, a read and a limiter check, each
 * answered exactly. `n` numbers its round. */
static void acl_bystander(redisContext *b, int n)
{
    char v[32];

    snprintf(v, sizeof(v), "v%d", n);
    px_check_status(px_cmd(b, "SET by:key %s", v), "OK");
    px_check_str(px_cmd(b, "GET by:key"), v);
    acl_check(px_cmd(b, "LIMITER PEEK user:bob"), "bob's peek", 0, 2);
}

/* Every way around the prefix guard, by an ordinary client and by an
 * admin client, refused by Redis, with nothing written. */
static void acl_attacks(void)
{
    static const char hset[] = "return redis.call('HSET',ARGV[1],ARGV[2],"
                               "ARGV[3])";
    static const char lib[] =
        "#!lua name=evil\nredis.register_function('evil', function(k, a) "
        "return redis.call('HSET', a[1], a[2], a[3]) end)";
    redisContext *c = px_connect(px_env()->proxy.port);
    redisContext *a = px_connect(px_env()->proxy.port);
    redisContext *b = px_connect(px_env()->proxy.port);
    redisContext *d = acl_direct(MALLORY_OVR);
    redisContext *dv = acl_direct(VICTIM_KEY);
    redisReply *r;
    long long keys;
    char sha[64], tat[64];
    int i, admitted = 0;

    /* The victim's state exists before the attacks; the library of the
     * FCALL attack is loaded on Redis by its operator (default user). */
    acl_check(px_cmd(c, "LIMITER CHECK user:victim"), "victim", 0, 2);
    r = px_cmd(d, "FUNCTION LOAD REPLACE %s", lib);
    cr_assert_eq(r->type, REDIS_REPLY_STRING, "FUNCTION LOAD: %s", r->str);
    freeReplyObject(r);
    r = lstate_cmd(dv, "GET %s", VICTIM_KEY);
    cr_assert_eq(r->type, REDIS_REPLY_STRING, "the victim has no state");
    snprintf(tat, sizeof(tat), "%s", r->str);
    freeReplyObject(r);
    acl_bystander(b, 0);
    keys = acl_dbsize();

    /* An ordinary client: the limiter key is in the arguments only. */
    acl_check_refused_by_redis(px_cmd(c, "EVAL %s 1 {user:mallory}x %s %s %s",
                                      hset, MALLORY_OVR, "user:mallory",
                                      "unlimited"),
                               "EVAL");
    acl_bystander(b, 1);
    r = px_cmd(c, "SCRIPT LOAD %s", hset);
    cr_assert_eq(r->type, REDIS_REPLY_STRING);
    snprintf(sha, sizeof(sha), "%s", r->str);
    freeReplyObject(r);
    acl_check_refused_by_redis(px_cmd(c,
                                      "EVALSHA %s 1 {user:mallory}x %s %s "
                                      "unlimited",
                                      sha, MALLORY_OVR, "user:mallory"),
                               "EVALSHA");
    acl_check_refused_by_redis(px_cmd(c,
                                      "FCALL evil 1 {user:mallory}x %s %s %s",
                                      MALLORY_OVR, "user:mallory", "unlimited"),
                               "FCALL");
    acl_bystander(b, 2);
    px_check_int(px_cmd(c, "RPUSH {user:mallory}l a"), 1);
    acl_check_refused_by_redis(
        px_cmd(c, "SORT {user:mallory}l BY nosort GET cellgate:*"),
        "SORT ... GET cellgate:*");
    if (!acl_cluster) {
        /* No key declared at all (single mode: one node has every key). */
        acl_check_refused_by_redis(
            px_cmd(c, "EVAL %s 0 %s user:victim x", hset, VICTIM_KEY),
            "EVAL with no keys");
    }

    /* An admin client passes the proxy's guard and policy: Redis still
     * refuses its client user the limiter's keys and the keyspace-wide
     * commands. */
    px_check_status(px_cmd(a, "AUTH admin " ADMIN_PASS), "OK");
    acl_check_refused_by_redis(px_cmd(a, "SET %s 1", VICTIM_KEY), "admin SET");
    acl_check_refused_by_redis(px_cmd(a, "DEL %s", VICTIM_KEY), "admin DEL");
    /* (The victim's state is a record of its identity's state string.) */
    acl_check_refused_by_redis(px_cmd(a, "DEL %s", VICTIM_STATE),
                               "admin DEL of the state string");
    acl_check_refused_by_redis(px_cmd(a, "SET %s 7:#0:gcra=0|1;", VICTIM_STATE),
                               "admin SET of the state string");
    acl_check_refused_by_redis(
        px_cmd(a, "APPEND %s 7:#0:gcra=0|1;", VICTIM_STATE),
        "admin APPEND to the state string");
    acl_check_refused_by_redis(
        px_cmd(a, "HSET %s user:mallory unlimited", MALLORY_OVR), "admin HSET");
    acl_check_refused_by_redis(px_cmd(a, "FLUSHALL"), "admin FLUSHALL");
    acl_check_refused_by_redis(px_cmd(a, "FLUSHDB"), "admin FLUSHDB");
    if (!acl_cluster) {
        acl_check_refused_by_redis(px_cmd(a, "SWAPDB 0 1"), "admin SWAPDB");
    }
    acl_check_refused_by_redis(px_cmd(a, "FUNCTION LOAD REPLACE %s", lib),
                               "admin FUNCTION LOAD");
    acl_check_refused_by_redis(
        px_cmd(a, "EVAL %s 1 {user:mallory}x %s a b", hset, MALLORY_OVR),
        "admin EVAL");
    acl_bystander(b, 3);

    /* Nothing was written: no override, the victim's TAT as it was, no
     * key more than the list. */
    px_check_int(px_cmd(d, "EXISTS %s", MALLORY_OVR), 0);
    px_check_str(lstate_cmd(dv, "GET %s", VICTIM_KEY), tat);
    cr_assert_eq(acl_dbsize(), keys + 1, "keys written by the attacks");
    /* And mallory is limited as everyone: 3 of 20 admitted. */
    for (i = 0; i < 20; i++) {
        r = px_cmd(c, "LIMITER CHECK user:mallory");
        cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
        admitted += r->element[0]->integer == 0;
        freeReplyObject(r);
    }
    cr_assert_eq(admitted, 3, "mallory admitted %d of 20", admitted);
    acl_bystander(b, 4);
    redisFree(c);
    redisFree(a);
    redisFree(b);
    redisFree(d);
    redisFree(dv);
}

Test(it_acl, attacks_are_refused_by_redis_single, .init = init_single,
     .fini = fini)
{
    acl_attacks();
}

Test(it_acl, attacks_are_refused_by_redis_cluster, .init = init_cluster,
     .fini = fini)
{
    acl_attacks();
}

/* Waits (bounded) for `text` in the proxy's log; asserts it came. */
static void acl_wait_log(const char *text, int count)
{
    int seen = 0, tries;

    for (tries = 0; tries < 100; tries++) {
        size_t len;
        char *log = px_read_file(px_env()->proxy.log, &len);
        const char *p = log;
        seen = 0;
        while (log != NULL && (p = strstr(p, text)) != NULL) {
            seen++;
            p += strlen(text);
        }
        free(log);
        if (seen >= count) {
            return;
        }
        px_sleep_ms(50);
    }
    cr_assert_fail("'%s' logged %d times, want %d", text, seen, count);
}

/* Connections of a Redis user on one node (CLIENT LIST of the default
 * user's direct connection). */
static int acl_conns_of(redisContext *d, const char *user)
{
    redisReply *r = px_cmd(d, "CLIENT LIST");
    char want[64];
    const char *p;
    int n = 0;

    cr_assert_eq(r->type, REDIS_REPLY_STRING);
    snprintf(want, sizeof(want), " user=%s ", user);
    for (p = r->str; (p = strstr(p, want)) != NULL; p += strlen(want)) {
        n++;
    }
    freeReplyObject(r);
    return n;
}

/* The limiter, as its own user, does all its work. */
static void acl_limiter_works(void)
{
    redisContext *c = px_connect(px_env()->proxy.port);
    redisContext *a = px_connect(px_env()->proxy.port);
    redisContext *d = acl_direct("cellgate:{user:carol}#0:gcra");
    redisReply *r;
    int i;

    acl_wait_log("Redis users checked: 'app' cannot touch limiter state, "
                 "'cg-limiter' can run the limiter",
                 acl_cluster ? MAX_MASTERS : 1);
    for (i = 0; i < 3; i++) {
        acl_check(px_cmd(c, "LIMITER CHECK user:carol"), "carol", 0, 2 - i);
    }
    acl_check(px_cmd(c, "LIMITER CHECK user:carol"), "carol refused", 1, 0);
    acl_check(px_cmd(c, "LIMITER PEEK user:carol"), "carol peek", 1, 0);
    /* The refusal cache: its tracker logs in as the limiter too. */
    for (i = 0; i < 10; i++) {
        acl_check(px_cmd(c, "LIMITER CHECK user:carol"), "carol cached", 1, 0);
    }
    cr_assert_gt(px_info_int(c, "limiter_refusal_cache_hits"), 0);
    px_check_status(px_cmd(a, "AUTH admin " ADMIN_PASS), "OK");
    px_check_int(px_cmd(a, "LIMITER RESET user:carol"), 1);
    acl_check(px_cmd(c, "LIMITER CHECK user:carol"), "carol after reset", 0, 2);
    px_check_status(px_cmd(a, "LIMITER OVERRIDE SET user:dave UNLIMITED"),
                    "OK");
    for (i = 0; i < 5; i++) {
        r = px_cmd(c, "LIMITER CHECK user:dave");
        cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
        cr_assert_eq(r->element[0]->integer, 0, "dave limited");
        freeReplyObject(r);
    }
    /* CL.THROTTLE's keys are the client's own, unprefixed. */
    px_check_five(px_cmd(c, "CL.THROTTLE {user:carol}t 0 1 60"), "throttle", 0,
                  1, 0, -1, 60);
    px_check_five(px_cmd(c, "CL.THROTTLE {user:carol}t 0 1 60"),
                  "throttle refused", 1, 1, 0, 60, 60);
    px_check_int(px_cmd(d, "EXISTS {user:carol}t"), 1);
    /* A library flushed under it is loaded again, by the limiter user. */
    px_check_status(px_cmd(d, "FUNCTION FLUSH"), "OK");
    acl_check(px_cmd(c, "LIMITER CHECK user:erin"), "erin", 0, 2);
    /* The proxy's connections: the client user's and the limiter's, none
     * of the default user but this test's own. */
    cr_assert_gt(acl_conns_of(d, "app"), 0);
    cr_assert_gt(acl_conns_of(d, "cg-limiter"), 0);
    cr_assert_eq(acl_conns_of(d, "default"), 1);
    redisFree(c);
    redisFree(a);
    redisFree(d);
}

Test(it_acl, the_limiter_runs_as_its_own_user_single, .init = init_single,
     .fini = fini)
{
    acl_limiter_works();
}

Test(it_acl, the_limiter_runs_as_its_own_user_cluster, .init = init_cluster,
     .fini = fini)
{
    acl_limiter_works();
}

/* The limiter's calls go on its own connections, client traffic on
 * others: a client that mixes them in one pipeline still has each command
 * see the ones it sent before (cellgate waits for the answers of one kind
 * before it sends the other). */
static void acl_order_kept(void)
{
    redisContext *c = px_connect(px_env()->proxy.port);
    redisContext *o = px_connect(px_env()->proxy.port);

    px_check_client_order(c, o, "ord", 10);
    px_check_client_order(c, o, "ord2", 1);
    redisFree(o);
    redisFree(c);
}

Test(it_acl, a_clients_commands_keep_its_order_single, .init = init_single,
     .fini = fini)
{
    acl_order_kept();
}

Test(it_acl, a_clients_commands_keep_its_order_cluster, .init = init_cluster,
     .fini = fini)
{
    acl_order_kept();
}

/* Without the users, the start says limiter state is cellgate's alone to
 * guard (Redis would let client traffic write it). */
static void init_no_users(void)
{
    acl_cluster = 0;
    px_env_prepare();
    px_limits_start(PX_MODE_SINGLE, LIMITS_YAML, NULL);
}

Test(it_acl, a_proxy_without_the_users_warns, .init = init_no_users,
     .fini = fini)
{
    /* Every problem in one line. */
    acl_wait_log("Redis user 'default' may write limiter keys, read limiter "
                 "keys, flush every key (FLUSHALL), swap databases (SWAPDB), "
                 "replace the limiter's functions (FUNCTION LOAD): limiter "
                 "state is guarded by cellgate alone",
                 1);
    acl_wait_log("Redis user", 1);
    cr_assert_eq(px_log_count("Redis user"), 1);
}

/* A client user that can write limiter keys is named in a warning, and
 * the check still passes for the rest. */
static void init_weak_client(void)
{
    char yaml[1024];
    redisContext *d;

    acl_cluster = 0;
    px_env_prepare();
    acl_files(NULL);
    px_redis_start(&px_env()->redis, NULL);
    acl_apply(px_env()->redis.port);
    d = px_redis_connect(&px_env()->redis, NULL);
    px_check_status(px_cmd(d, "ACL SETUSER app ~*"), "OK");
    redisFree(d);
    acl_proxy_yaml(yaml, sizeof(yaml), NULL);
    px_proxy_start_for(&px_env()->proxy, &px_env()->redis, yaml);
}

Test(it_acl, a_client_user_that_reaches_limiter_keys_is_named,
     .init = init_weak_client, .fini = fini)
{
    redisContext *c = px_connect(px_env()->proxy.port);

    acl_wait_log("Redis user 'app' may write limiter keys, read limiter keys: "
                 "limiter state is guarded by cellgate alone",
                 1);
    /* The limiter works all the same. */
    acl_check(px_cmd(c, "LIMITER CHECK user:frank"), "frank", 0, 2);
    redisFree(c);
}

/* A limiter user that may not write or delete an identity's state string
 * (SET, DEL: what the scripts send on it) is named in a warning. */
static void init_weak_limiter(void)
{
    char yaml[1024];
    redisContext *d;

    acl_cluster = 0;
    px_env_prepare();
    acl_files(NULL);
    px_redis_start(&px_env()->redis, NULL);
    acl_apply(px_env()->redis.port);
    d = px_redis_connect(&px_env()->redis, NULL);
    px_check_status(px_cmd(d, "ACL SETUSER cg-limiter -set -del"), "OK");
    redisFree(d);
    acl_proxy_yaml(yaml, sizeof(yaml), NULL);
    px_proxy_start_for(&px_env()->proxy, &px_env()->redis, yaml);
}

Test(it_acl, a_limiter_user_that_cannot_write_its_state_is_named,
     .init = init_weak_limiter, .fini = fini)
{
    acl_wait_log("Redis user 'cg-limiter' may not write limiter keys, delete "
                 "limiter keys, write CL.THROTTLE's keys, which are any key: "
                 "limiter calls will fail",
                 1);
}

/* The glob of the printed client user keeps exactly the prefix's keys
 * out, whatever bytes the prefix has (glob characters, a blank, a quote),
 * as Redis itself decides (ACL DRYRUN). */
static void init_odd_prefix(void)
{
    acl_cluster = 0;
    px_env_prepare();
    acl_files("key_prefix: \"a*[b]?\\\\\\\"-^\"\n");
    px_redis_start(&px_env()->redis, NULL);
    acl_apply(px_env()->redis.port);
}

Test(it_acl, the_client_user_is_denied_the_prefix_and_nothing_else,
     .init = init_odd_prefix, .fini = fini)
{
    /* The prefix is the 10 bytes a*[b]?\"-^ */
    static const char prefix[] = "a*[b]?\\\"-^";
    static const char *const allowed[] = {
        "",
        "a",
        "a*",
        "a*[b]?\\\"-",
        "ab",
        "a*[b]x",
        "A*[b]?\\\"-^",
        "x",
        "a*[b]?x\"-^",
        "a*[b]? \\",
    };
    redisContext *d = px_redis_connect(&px_env()->redis, NULL);
    char key[64];
    size_t i, k;

    for (i = 0; i < sizeof(allowed) / sizeof(allowed[0]); i++) {
        redisReply *r = redisCommand(d, "ACL DRYRUN app SET %b v", allowed[i],
                                     strlen(allowed[i]));
        cr_assert_not_null(r);
        cr_assert_eq(r->type, REDIS_REPLY_STATUS, "key '%s': %s", allowed[i],
                     r->str);
        freeReplyObject(r);
    }
    /* The prefix itself and keys under it. */
    for (k = 0; k <= 3; k++) {
        redisReply *r;
        snprintf(key, sizeof(key), "%s%.*s", prefix, (int)k, "x:y");
        r = redisCommand(d, "ACL DRYRUN app SET %b v", key, strlen(key));
        cr_assert_not_null(r);
        cr_assert_eq(r->type, REDIS_REPLY_STRING,
                     "key '%s' under the prefix allowed", key);
        cr_assert(strstr(r->str, "no permissions") != NULL, "%s", r->str);
        freeReplyObject(r);
    }
    /* The limiter user may touch any key. */
    px_check_status(px_cmd(d, "ACL DRYRUN cg-limiter SET %s v", key), "OK");
    px_check_status(px_cmd(d, "ACL DRYRUN cg-limiter SET x v"), "OK");
    redisFree(d);
}

/* --print-acl needs both users; --check-config wants the limiter's
 * password with its user. */
Test(it_acl, print_acl_names_what_it_needs, .init = px_env_init,
     .fini = px_env_fini)
{
    char path[PX_PATH_MAX];
    const char *argv[] = { PX_CELLGATE_BIN, "--config", path, "--print-acl",
                           NULL };
    const char *check[] = { PX_CELLGATE_BIN, "--config", path, "--check-config",
                            NULL };
    struct px_run r;

    px_write_file(path, sizeof(path), "p.yaml",
                  "upstream: 127.0.0.1:1\nupstream_user: app\n"
                  "upstream_password: x\n");
    px_run(&r, argv);
    cr_assert_eq(r.status, 1);
    cr_assert(strstr(r.err, "--print-acl needs upstream_user, "
                            "upstream_password, limiter_user and "
                            "limiter_password") != NULL,
              "%s", r.err);
    px_run_free(&r);

    /* Redis refuses a key pattern with a blank: no line could keep such a
     * prefix out. */
    px_write_file(path, sizeof(path), "p.yaml",
                  "upstream: 127.0.0.1:1\nupstream_user: app\n"
                  "upstream_password: x\nlimiter_user: l\n"
                  "limiter_password: y\nkey_prefix: \"rate limit:\"\n");
    px_run(&r, argv);
    cr_assert_eq(r.status, 1);
    cr_assert(strstr(r.err, "key_prefix 'rate limit:' has a blank") != NULL,
              "%s", r.err);
    px_run_free(&r);

    px_write_file(path, sizeof(path), "p.yaml",
                  "upstream: 127.0.0.1:1\nlimiter_user: lim\n");
    px_run(&r, check);
    cr_assert_eq(r.status, 1);
    cr_assert(strstr(r.err, "p.yaml:2:1: limiter_user needs "
                            "limiter_password") != NULL,
              "%s", r.err);
    px_run_free(&r);
}
