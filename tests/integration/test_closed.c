/* Closed by default: a limited client cannot lift its own limits nor lock
 * another identity out, whatever the configuration.
 *
 * - With no admin_password (the default install), LIMITER OVERRIDE, RESET
 *   and RELOAD answer NOPERM to everyone, saying how to enable them; the
 *   attacker's own path stays limited and a bystander's replies are
 *   exactly the limits'. With one, only `AUTH admin` may run them, and
 *   LIMITER RULES shows the file's overrides (they name identities) to
 *   admins only.
 * - Refused AUTHs are counted (INFO acl_access_denied_auth, the metrics)
 *   and logged at most once a second.
 * - A WAIT is capped to limiter_wait_max_ms: however many are held, none
 *   reserves further ahead, and a bystander of the same identity is not
 *   held out for longer.
 * - A COST beyond what the scripts carry exactly (2^53 - 1) gets one
 *   answer, the same error, whatever the algorithm and the refusal cache.
 * Single Redis, a 3-master cluster and embedded, where it applies. */
#include "tests/support/px_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/integration/fixture.h"
#include "tests/integration/limiter_support.h"

PX_TEST_SUITE(it_closed);

/* Three an hour per user (gcra, no refill within a test), a token bucket
 * and a fixed window of three, and a file override that names an
 * identity. */
static const char closed_tree[] =
    "user:\n"
    "  children:\n"
    "    \"*\":\n"
    "      limits: [2, 3, 3600]\n" PX_LIMITS_STAR(
        "tb", "{algorithm: token_bucket, capacity: 3, refill_per_sec: 0.001}")
        PX_LIMITS_STAR("fw", "{algorithm: fixed_window, max: 3, window: 1d}")
            PX_LIMITS_STAR(
                "sl",
                "{algorithm: sliding_log, max: 3, window: 1h}") "overrides:\n"
                                                                "  user:ops:\n"
                                                                "    unlimited: true\n";

#define E_NO_ADMIN(sub)                                                        \
    "NOPERM LIMITER " sub " needs AUTH admin, and no admin_password is set: "  \
    "set admin_password in proxy.yaml to administer the limiter over the "     \
    "network (SIGHUP reloads the limits file)"

static void init_single_open(void)
{
    px_limits_start(PX_MODE_SINGLE, closed_tree, PX_NO_ADMIN);
}

static void init_cluster_open(void)
{
    px_limits_start(PX_MODE_CLUSTER, closed_tree, PX_NO_ADMIN);
}

static void init_embedded_open(void)
{
    px_limits_start(PX_MODE_EMBEDDED, closed_tree, PX_NO_ADMIN);
}

static void init_single(void)
{
    px_limits_start(PX_MODE_SINGLE, closed_tree, NULL);
}

static void init_embedded(void)
{
    px_limits_start(PX_MODE_EMBEDDED, closed_tree, NULL);
}

/* Runs `n` checks of `path` on `c`; returns how many were admitted. */
static int admitted_of(redisContext *c, const char *path, int n)
{
    int k, ok = 0;

    for (k = 0; k < n; k++) {
        struct px_five f =
            px_take_five(px_cmd(c, "LIMITER CHECK %s", path), path);
        ok += f.limited == 0;
    }
    return ok;
}

/* Every administration an attacker of the review tried, as an ordinary
 * client of a proxy with no admin password: each is refused with the text
 * that says how to enable it, changes nothing, and the attacker's own path
 * and a bystander's get exactly their limits. */
static void attack_without_admin(void)
{
    redisContext *evil = px_connect(px_env()->proxy.port);
    redisContext *by = px_connect(px_env()->proxy.port);
    int k, got = 0;
    redisReply *r;

    /* The bystander uses one of its three. */
    px_check_five(px_cmd(by, "LIMITER CHECK user:victim"), "victim first", 0, 3,
                  2, -1, 1200);
    /* Lift its own limit, lock the victim out, reset, reload. */
    px_check_error(px_cmd(evil, "LIMITER OVERRIDE SET user:evil UNLIMITED"),
                   E_NO_ADMIN("OVERRIDE"));
    px_check_error(
        px_cmd(evil, "LIMITER OVERRIDE SET user:victim FACTOR 1000000"),
        E_NO_ADMIN("OVERRIDE"));
    px_check_error(px_cmd(evil, "LIMITER OVERRIDE DEL user:victim"),
                   E_NO_ADMIN("OVERRIDE"));
    px_check_error(px_cmd(evil, "LIMITER OVERRIDE GET user:ops"),
                   E_NO_ADMIN("OVERRIDE"));
    px_check_error(px_cmd(evil, "limiter reload"), E_NO_ADMIN("RELOAD"));
    /* RESET after each refusal admitted 14,812 of a limit of 9 before. */
    for (k = 0; k < 20; k++) {
        got += admitted_of(evil, "user:evil", 1);
        px_check_error(px_cmd(evil, "LIMITER RESET user:evil"),
                       E_NO_ADMIN("RESET"));
    }
    cr_assert_eq(got, 3, "the attacker got %d of its limit of 3", got);
    /* No password makes anyone an admin. */
    r = px_cmd(evil, "AUTH admin anything");
    cr_assert_eq(r->type, REDIS_REPLY_ERROR);
    cr_assert_str_eq(r->str, "WRONGPASS invalid username-password pair or "
                             "user is disabled.");
    freeReplyObject(r);
    px_check_error(px_cmd(evil, "LIMITER RESET user:evil"),
                   E_NO_ADMIN("RESET"));
    /* The bystander: exactly its own limit, untouched. */
    px_check_five(px_cmd(by, "LIMITER CHECK user:victim"), "victim second", 0,
                  3, 1, -1, 2400);
    px_check_five(px_cmd(by, "LIMITER CHECK user:victim"), "victim third", 0, 3,
                  0, -1, 3600);
    r = px_cmd(by, "LIMITER CHECK user:victim");
    cr_assert_eq(px_take_five(r, "victim fourth").limited, 1);
    redisFree(evil);
    redisFree(by);
}

Test(it_closed, no_admin_password_no_administration_single,
     .init = init_single_open, .fini = px_env_fini, .timeout = 60)
{
    attack_without_admin();
}

Test(it_closed, no_admin_password_no_administration_cluster,
     .init = init_cluster_open, .fini = px_env_fini, .timeout = 120)
{
    attack_without_admin();
}

Test(it_closed, no_admin_password_no_administration_embedded,
     .init = init_embedded_open, .fini = px_env_fini, .timeout = 60)
{
    attack_without_admin();
}

/* The file's overrides name identities (user:ops is unlimited): LIMITER
 * RULES shows them to an admin only; the rest of the tree to everyone. */
Test(it_closed, rules_show_overrides_to_admins_only, .init = init_single,
     .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = px_connect(px_env()->proxy.port);
    char *text;

    text = px_lines_text(px_cmd(c, "LIMITER RULES"));
    cr_assert_not_null(strstr(text, "user:*  gcra(max_burst=2,count=3,"), "%s",
                       text);
    cr_assert_null(strstr(text, "override"), "shown: %s", text);
    cr_assert_null(strstr(text, "user:ops"), "shown: %s", text);
    free(text);
    px_check_error(px_cmd(c, "LIMITER OVERRIDE GET user:ops"),
                   "NOPERM LIMITER OVERRIDE needs AUTH admin");
    text = px_lines_text(px_cmd_admin(c, "LIMITER RULES"));
    cr_assert_not_null(strstr(text, "override user:ops  unlimited\n"), "%s",
                       text);
    free(text);
    redisFree(c);
}

/* An admin's RESET and OVERRIDE work, and only for that connection. */
Test(it_closed, only_the_admin_connection_administers, .init = init_embedded,
     .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = px_connect(px_env()->proxy.port);
    redisContext *adm = px_connect(px_env()->proxy.port);

    cr_assert_eq(admitted_of(c, "user:u", 5), 3);
    px_check_error(px_cmd(c, "LIMITER RESET user:u"),
                   "NOPERM LIMITER RESET needs AUTH admin");
    px_check_status(px_cmd(adm, "AUTH admin " PX_ADMIN_PASSWORD), "OK");
    px_check_int(px_cmd(adm, "LIMITER RESET user:u"), 1);
    cr_assert_eq(admitted_of(c, "user:u", 5), 3);
    px_check_status(px_cmd(adm, "LIMITER OVERRIDE SET user:u UNLIMITED"), "OK");
    cr_assert_eq(admitted_of(c, "user:u", 5), 5);
    px_check_error(px_cmd(c, "LIMITER OVERRIDE DEL user:u"),
                   "NOPERM LIMITER OVERRIDE needs AUTH admin");
    redisFree(c);
    redisFree(adm);
}

/* 300 wrong passwords (AUTH and HELLO AUTH) on one connection: each is
 * counted, the log has at most a line a second of them, each line giving
 * the count since the previous one, and a bystander is served. */
Test(it_closed, refused_auth_is_counted_and_logged_at_most_once_a_second,
     .init = init_single, .fini = px_env_fini, .timeout = 60)
{
    redisContext *evil = px_connect(px_env()->proxy.port);
    redisContext *by = px_connect(px_env()->proxy.port);
    long long start = px_now_ms(), secs;
    int k, lines = 0;
    char *log, *p;

    for (k = 0; k < 300; k++) {
        redisReply *r = k % 3 == 0
                            ? px_cmd(evil, "HELLO 2 AUTH admin guess%d", k)
                            : px_cmd(evil, "AUTH admin guess%d", k);
        cr_assert_eq(r->type, REDIS_REPLY_ERROR, "guess %d accepted", k);
        freeReplyObject(r);
    }
    secs = (px_now_ms() - start) / 1000;
    px_check_status(px_cmd(by, "SET by:k v"), "OK");
    px_check_str(px_cmd(by, "GET by:k"), "v");
    cr_assert_eq(px_info_int(by, "acl_access_denied_auth"), 300);
    px_check_status(px_cmd(by, "AUTH admin " PX_ADMIN_PASSWORD), "OK");
    cr_assert_eq(px_info_int(by, "acl_access_denied_auth"), 300);
    log = px_read_file(px_env()->proxy.log, NULL);
    cr_assert_not_null(log);
    for (p = strstr(log, "AUTH refused for user 'admin'"); p != NULL;
         p = strstr(p + 1, "AUTH refused for user 'admin'")) {
        lines++;
    }
    free(log);
    cr_assert_geq(lines, 1, "no refused AUTH logged");
    /* One line at once, then one per second at most. */
    cr_assert_leq(lines, secs + 2, "%d lines in %lld s", lines, secs);
    redisFree(evil);
    redisFree(by);
}

/* ---------------- WAIT is capped ---------------- */

/* One every 2 s, no burst: the n-th waiter of a burst would be due 2n s
 * later. */
static const char wait_tree[] = "api:\n"
                                "  children:\n"
                                "    \"*\":\n"
                                "      limits: [0, 1, 2]\n";

static void init_wait_single(void)
{
    px_limits_start(PX_MODE_SINGLE, wait_tree, "limiter_wait_max_ms: 3000\n");
}

static void init_wait_embedded(void)
{
    px_limits_start(PX_MODE_EMBEDDED, wait_tree, "limiter_wait_max_ms: 3000\n");
}

/* Six clients each ask WAIT of an hour for the same identity: only the one
 * due within limiter_wait_max_ms (2 s of 3) is held and admitted; the
 * others are refused at once as without WAIT (before: all six reserved,
 * 12 s of the identity's capacity). The identity is then free again 2 s
 * on, as a PEEK shows: nothing was reserved beyond the cap. */
static void wait_is_capped(void)
{
    enum { N = 6 };
    redisContext *w[N];
    redisContext *by = px_connect(px_env()->proxy.port);
    int k, admitted = 0;

    px_check_five(px_cmd(by, "LIMITER CHECK api:v"), "first", 0, 1, 0, -1, 2);
    for (k = 0; k < N; k++) {
        w[k] = px_connect(px_env()->proxy.port);
        redisAppendCommand(w[k], "LIMITER CHECK api:v WAIT 3600000");
        px_flush(w[k]);
    }
    for (k = 0; k < N; k++) {
        struct px_five f = px_take_five(px_next(w[k]), "waiter");
        if (f.limited == 0) {
            admitted++;
        } else {
            /* Refused as without WAIT: retry within the schedule. */
            cr_assert_geq(f.retry, 1);
            cr_assert_leq(f.retry, 4);
        }
        redisFree(w[k]);
    }
    cr_assert_eq(admitted, 1, "%d waiters reserved", admitted);
    /* The bystander of the same identity: the one reservation is the
     * whole schedule, so it is admitted within 2 s of the reserved one. */
    struct px_five f = px_take_five(px_cmd(by, "LIMITER PEEK api:v"), "peek");
    cr_assert_eq(f.limited, 1);
    cr_assert_leq(f.retry, 2, "reserved %lld s ahead", f.retry);
    redisFree(by);
}

Test(it_closed, wait_is_capped_to_limiter_wait_max_ms_single,
     .init = init_wait_single, .fini = px_env_fini, .timeout = 60)
{
    wait_is_capped();
}

Test(it_closed, wait_is_capped_to_limiter_wait_max_ms_embedded,
     .init = init_wait_embedded, .fini = px_env_fini, .timeout = 60)
{
    wait_is_capped();
}

/* ---------------- One answer for a huge COST ---------------- */

#define E_RANGE "ERR value is not an integer or out of range"

/* For every algorithm, on a fresh key and on one the refusal cache holds
 * (refused: the cache answers it), a COST above 2^53 - 1 is the same
 * error, and 2^53 - 1 itself is a refusal on both; a bystander's key is
 * untouched. */
static void huge_cost(void)
{
    static const char *const paths[] = { "user:h", "tb:h", "fw:h", "sl:h" };
    redisContext *c = px_connect(px_env()->proxy.port);
    redisContext *by = px_connect(px_env()->proxy.port);
    size_t i;
    int round;

    px_check_five(px_cmd(by, "LIMITER CHECK user:by"), "by", 0, 3, 2, -1, 1200);
    for (round = 0; round < 2; round++) {
        for (i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
            px_check_error(
                px_cmd(c, "LIMITER CHECK %s COST 9007199254740992", paths[i]),
                E_RANGE);
            px_check_error(
                px_cmd(c, "LIMITER PEEK %s COST 9223372036854775807", paths[i]),
                E_RANGE);
            if (strcmp(paths[i], "user:h") != 0) {
                struct px_five f = px_take_five(
                    px_cmd(c, "LIMITER CHECK %s COST 9007199254740991",
                           paths[i]),
                    paths[i]);
                cr_assert_eq(f.limited, 1, "%s", paths[i]);
                cr_assert_eq(f.retry, -1, "%s", paths[i]);
            }
            /* Then use it up, so the next round finds it refused (and
             * the refusal cache, where there is one, holding it). */
            (void)admitted_of(c, paths[i], 4);
        }
    }
    px_check_five(px_cmd(by, "LIMITER CHECK user:by"), "by", 0, 3, 1, -1, 2400);
    redisFree(c);
    redisFree(by);
}

Test(it_closed, a_huge_cost_has_one_answer_single, .init = init_single,
     .fini = px_env_fini, .timeout = 60)
{
    huge_cost();
}

Test(it_closed, a_huge_cost_has_one_answer_embedded, .init = init_embedded,
     .fini = px_env_fini, .timeout = 60)
{
    huge_cost();
}
