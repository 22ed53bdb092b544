/* Shadow levels (limits.yaml `shadow: true`, proxy.yaml `limiter_shadow`)
 * through the real binary, embedded, in front of a single Redis and of a
 * 3-master cluster: a shadow level decides and keeps its state but never
 * refuses.
 *
 * - A shadow limit of 3 hammered 20 times: all admitted, INFO
 *   limiter_shadow_limited counts the 17 it would have refused, and its
 *   state holds 3, not 20.
 * - A real level beside a shadow one answers exactly as a reference proxy
 *   (another key prefix, or another process) whose tree lacks the shadow
 *   level; the shadow level takes its cost only while it and the real level
 *   admit. A shared real level in another slot (cluster) that refuses gets
 *   the shadow level's cost given back.
 * - LIMITER RELOAD turns shadow off (the kept state now refuses) and on.
 * - The global switch makes every level shadow; LIMITER RULES shows
 *   `shadow`; --check-config refuses `shadow: maybe`.
 *
 * Windows are a day and GCRA refills one per 1000 s, so no count moves
 * during a test; only durations (whole seconds) may differ by the rounding
 * edge between two proxies' replies. State is read back through the proxy
 * (PEEK COST 0 after a reload without shadow) in every mode, and straight
 * from its node in the Redis modes. */
#include "tests/integration/cluster_fixture.h"
#include "tests/integration/fixture.h"
#include "tests/integration/limiter_support.h"
#include "tests/integration/lstate.h"
#include "tests/support/px_test.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

PX_TEST_SUITE(it_limiter_shadow);

/* sh:*: a shadow window of 3 alone. mix:*: a real window of 5, and below
 * it, a shadow GCRA of 2 at once (mix:<id>:new). gs: a real window of 4
 * shared by every identity (its own slot), above a shadow GCRA of 2 per
 * identity (a GCRA refund takes INC back whatever was taken: a refund of
 * a level that took nothing would show). Windows are a day. */
static const char shadow_tree[] =
    "sh:\n"
    "  children:\n"
    "    \"*\":\n"
    "      shadow: true\n"
    "      limits:\n"
    "        - {algorithm: fixed_window, max: 3, window: 1d}\n"
    "mix:\n"
    "  children:\n"
    "    \"*\":\n"
    "      limits:\n"
    "        - {algorithm: fixed_window, max: 5, window: 1d}\n"
    "      children:\n"
    "        new:\n"
    "          shadow: true\n"
    "          limits: [1, 1, 1000]\n"
    "gs:\n"
    "  limits:\n"
    "    - {algorithm: fixed_window, max: 4, window: 1d}\n"
    "  children:\n"
    "    \"*\":\n"
    "      shadow: true\n"
    "      limits: [1, 1, 1000]\n";

/* The same tree without its shadow levels: what the real levels alone
 * answer. */
static const char ref_tree[] =
    "mix:\n"
    "  children:\n"
    "    \"*\":\n"
    "      limits:\n"
    "        - {algorithm: fixed_window, max: 5, window: 1d}\n"
    "      children:\n"
    "        new:\n"
    "gs:\n"
    "  limits:\n"
    "    - {algorithm: fixed_window, max: 4, window: 1d}\n"
    "  children:\n"
    "    \"*\":\n";

/* The shadow levels made real, alone: PEEK COST 0 shows their state (the
 * keys are the same: a key names its path, index and algorithm). */
static const char probe_tree[] =
    "sh:\n"
    "  children:\n"
    "    \"*\":\n"
    "      limits:\n"
    "        - {algorithm: fixed_window, max: 3, window: 1d}\n"
    "mix:\n"
    "  children:\n"
    "    \"*\":\n"
    "      children:\n"
    "        new:\n"
    "          limits: [1, 1, 1000]\n"
    "gs:\n"
    "  children:\n"
    "    \"*\":\n"
    "      limits: [1, 1, 1000]\n";

/* The real window of mix:* alone: its state after the global switch. */
static const char probe_mix_tree[] =
    "mix:\n"
    "  children:\n"
    "    \"*\":\n"
    "      limits:\n"
    "        - {algorithm: fixed_window, max: 5, window: 1d}\n";

static const char shadow_rules[] =
    "gs  fixed_window(max=4,window=86400s)\n"
    "gs:*  gcra(max_burst=1,count=1,period=1000s)  shadow\n"
    "mix:*  fixed_window(max=5,window=86400s)\n"
    "mix:*:new  gcra(max_burst=1,count=1,period=1000s)  shadow\n"
    "sh:*  fixed_window(max=3,window=86400s)  shadow\n";

static struct px_child ref; /* the reference proxy */
static char ref_limits[PX_PATH_MAX];

static void fini(void)
{
    if (ref.pid > 0) {
        px_proxy_stop(&ref, SIGKILL);
    }
    if (px_mode_now() == PX_MODE_CLUSTER) {
        px_cluster_fini();
    } else {
        px_env_fini();
    }
}

/* The test's proxy on shadow_tree (with `more` proxy.yaml lines), and the
 * reference proxy on ref_tree with keys under "ref:". */
static void start(enum px_mode mode, const char *more)
{
    static const char ref_more[] = "key_prefix: \"ref:\"\n";
    char yaml[PX_PATH_MAX + 64];

    px_limits_start(mode, shadow_tree, more);
    px_write_file(ref_limits, sizeof(ref_limits), "ref_limits.yaml", ref_tree);
    snprintf(yaml, sizeof(yaml), "limits_file: %s\n%s", ref_limits, ref_more);
    switch (mode) {
    case PX_MODE_EMBEDDED: {
        const char *args[] = { "--limits", ref_limits, NULL };
        px_proxy_start(&ref, NULL, args);
        break;
    }
    case PX_MODE_SINGLE:
        px_proxy_start_for(&ref, &px_env()->redis, yaml);
        break;
    case PX_MODE_CLUSTER:
        px_cluster_proxy_start(&ref, px_cluster(), yaml);
        break;
    }
}

static void init_embedded(void)
{
    start(PX_MODE_EMBEDDED, NULL);
}

static void init_single(void)
{
    start(PX_MODE_SINGLE, NULL);
}

static void init_cluster(void)
{
    start(PX_MODE_CLUSTER, NULL);
}

/* Rewrites the limits file (the path px_limits_start used) and reloads. */
static void reload(redisContext *c, const char *yaml)
{
    char path[PX_PATH_MAX];

    px_write_file(path, sizeof(path), "limits.yaml", yaml);
    px_check_status(px_cmd_admin(c, "LIMITER RELOAD"), "OK");
}

/* The count of a fixed window's key straight from its node (0 when the key
 * is missing); -1 in embedded mode. */
static long long window_count(const char *key)
{
    redisContext *d = px_direct_for(key, strlen(key));
    redisReply *r;
    long long n;

    if (d == NULL) {
        return -1;
    }
    r = lstate_cmd(d, "HGET %s count", key);
    n = r->type == REDIS_REPLY_STRING ? atoll(r->str) : 0;
    cr_assert(r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_NIL,
              "%s: reply type %d", key, r->type);
    freeReplyObject(r);
    redisFree(d);
    return n;
}

/* Asserts the two replies are the same: flags and counts exactly, the
 * durations within the 1 s a second boundary between the calls moves
 * them. */
static void expect_same(struct px_five a, struct px_five b, const char *what)
{
    cr_assert_eq(a.limited, b.limited, "%s: limited %lld vs %lld", what,
                 a.limited, b.limited);
    cr_assert_eq(a.limit, b.limit, "%s: limit", what);
    cr_assert_eq(a.remaining, b.remaining, "%s: remaining %lld vs %lld", what,
                 a.remaining, b.remaining);
    cr_assert_leq(llabs(a.retry - b.retry), 1, "%s: retry %lld vs %lld", what,
                  a.retry, b.retry);
    cr_assert_leq(llabs(a.reset - b.reset), 1, "%s: reset %lld vs %lld", what,
                  a.reset, b.reset);
}

/* n CHECKs of `path` on c and on the reference r: the same replies, whose
 * remaining counts down from `first` and which are refused from then on. */
static void same_as_reference(redisContext *c, redisContext *r,
                              const char *path, int n, long long first)
{
    for (int i = 0; i < n; i++) {
        char what[160];
        struct px_five a, b;
        long long want = first - i;

        snprintf(what, sizeof(what), "%s check %d", path, i + 1);
        a = px_take_five(px_cmd(c, "LIMITER CHECK %s", path), what);
        b = px_take_five(px_cmd(r, "LIMITER CHECK %s", path), what);
        expect_same(a, b, what);
        cr_assert_eq(a.limited, want < 0, "%s: limited %lld", what, a.limited);
        cr_assert_eq(a.remaining, want < 0 ? 0 : want, "%s: remaining %lld",
                     what, a.remaining);
    }
}

/* PEEK COST 0 of `path`: its remaining. */
static long long peek_remaining(redisContext *c, const char *path)
{
    struct px_five f =
        px_take_five(px_cmd(c, "LIMITER PEEK %s COST 0", path), path);

    cr_assert_eq(f.limited, 0, "%s: peek limited", path);
    return f.remaining;
}

static void shadow_never_refuses_and_keeps_exact_state(void)
{
    redisContext *c = px_connect(px_env()->proxy.port);
    redisContext *r = px_connect(ref.port);
    char a[64], b[64], pa[80], pb[80];
    long long n;

    /* A shadow limit of 3, alone, hammered 20 times. */
    for (int i = 0; i < 20; i++) {
        struct px_five f =
            px_take_five(px_cmd(c, "LIMITER CHECK sh:alex"), "sh:alex");
        cr_assert_eq(f.limited, 0, "check %d refused", i + 1);
        cr_assert_eq(f.limit, 3);
        cr_assert_eq(f.remaining, i < 3 ? 2 - i : 0, "check %d: remaining %lld",
                     i + 1, f.remaining);
        cr_assert_eq(f.retry, -1);
    }
    cr_assert_eq(px_info_int(c, "limiter_shadow_limited"), 17);
    n = window_count("cellgate:{sh:alex}#0:fixed_window");
    cr_assert(n == 3 || n == -1, "sh:alex counted %lld, want 3", n);

    /* A real level (5) with a shadow level (2) below it: the replies of the
     * real level alone; the shadow level refuses checks 3 to 8. */
    same_as_reference(c, r, "mix:alex:new", 8, 4);
    cr_assert_eq(px_info_int(c, "limiter_shadow_limited"), 17 + 6);
    n = window_count("cellgate:{mix:alex}#0:fixed_window");
    cr_assert(n == 5 || n == -1, "mix:alex counted %lld, want 5", n);

    /* A shared real level (4) in its own slot above a shadow GCRA (2):
     * identity a takes the shared level's 4, its shadow level refuses
     * checks 3 to 6 (so, having taken nothing, it is not refunded when the
     * shared level refuses 5 and 6); identity b is refused by the shared
     * level, so its shadow level, which admitted, takes nothing (given
     * back across the slots). The probe below reads both. */
    px_ident_off("gs:", "a", "gs", a, sizeof(a));
    px_ident_off("gs:", "b", "gs", b, sizeof(b));
    snprintf(pa, sizeof(pa), "gs:%s", a);
    snprintf(pb, sizeof(pb), "gs:%s", b);
    same_as_reference(c, r, pa, 6, 3);
    cr_assert_eq(px_info_int(c, "limiter_shadow_limited"), 23 + 4);
    same_as_reference(c, r, pb, 1, -1);
    cr_assert_eq(px_info_int(c, "limiter_shadow_limited"), 27,
                 "b's shadow level admitted");
    /* Shadow off (a reload): the state the shadow levels kept decides. */
    reload(c, probe_tree);
    cr_assert_eq(peek_remaining(c, "sh:alex"), 0);
    cr_assert_eq(peek_remaining(c, "mix:alex:new"), 0);
    cr_assert_eq(peek_remaining(c, pa), 0);
    cr_assert_eq(peek_remaining(c, pb), 2, "b's shadow level took nothing");
    cr_assert_eq(
        px_take_five(px_cmd(c, "LIMITER CHECK sh:alex"), "off").limited, 1);
    cr_assert_eq(
        px_take_five(px_cmd(c, "LIMITER CHECK %s", pb), "off").remaining, 1);
    cr_assert_eq(px_info_int(c, "limiter_shadow_limited"), 27);

    /* And on again. */
    reload(c, shadow_tree);
    cr_assert_eq(px_take_five(px_cmd(c, "LIMITER CHECK sh:alex"), "on").limited,
                 0);
    cr_assert_eq(px_info_int(c, "limiter_shadow_limited"), 28);
    {
        char *rules = px_lines_text(px_cmd(c, "LIMITER RULES"));
        cr_assert_str_eq(rules, shadow_rules);
        free(rules);
    }
    redisFree(c);
    redisFree(r);
}

Test(it_limiter_shadow, shadow_levels_never_refuse_embedded,
     .init = init_embedded, .fini = fini, .timeout = 60)
{
    shadow_never_refuses_and_keeps_exact_state();
}

Test(it_limiter_shadow, shadow_levels_never_refuse_single, .init = init_single,
     .fini = fini, .timeout = 60)
{
    shadow_never_refuses_and_keeps_exact_state();
}

Test(it_limiter_shadow, shadow_levels_never_refuse_across_cluster_slots,
     .init = init_cluster, .fini = fini, .timeout = 120)
{
    shadow_never_refuses_and_keeps_exact_state();
}

/* ---------------- The global switch ---------------- */

static void global_switch(void)
{
    redisContext *c = px_connect(px_env()->proxy.port);
    char *rules;

    /* mix:alex:new: both levels shadow now. Checks 1-2 take both; 3-5
     * take the window alone (the GCRA refuses); 6-8 take nothing. */
    for (int i = 0; i < 8; i++) {
        struct px_five f = px_take_five(px_cmd(c, "LIMITER CHECK mix:alex:new"),
                                        "mix:alex:new");
        cr_assert_eq(f.limited, 0, "check %d refused", i + 1);
        cr_assert_eq(f.retry, -1);
    }
    cr_assert_eq(px_info_int(c, "limiter_shadow_limited"), 6);
    rules = px_lines_text(px_cmd(c, "LIMITER RULES"));
    cr_assert_str_eq(
        rules, "gs  fixed_window(max=4,window=86400s)  shadow\n"
               "gs:*  gcra(max_burst=1,count=1,period=1000s)  shadow\n"
               "mix:*  fixed_window(max=5,window=86400s)  shadow\n"
               "mix:*:new  gcra(max_burst=1,count=1,period=1000s)  shadow\n"
               "sh:*  fixed_window(max=3,window=86400s)  shadow\n");
    free(rules);
    reload(c, probe_tree);
    cr_assert_eq(peek_remaining(c, "mix:alex:new"), 0);
    /* The window took checks 1-5 though the GCRA refused 3-5. */
    reload(c, probe_mix_tree);
    cr_assert_eq(peek_remaining(c, "mix:alex"), 0);
    redisFree(c);
}

static void init_global_embedded(void)
{
    start(PX_MODE_EMBEDDED, "limiter_shadow: yes\n");
}

static void init_global_single(void)
{
    start(PX_MODE_SINGLE, "limiter_shadow: yes\n");
}

Test(it_limiter_shadow, the_global_switch_shadows_every_level_embedded,
     .init = init_global_embedded, .fini = fini, .timeout = 60)
{
    global_switch();
}

Test(it_limiter_shadow, the_global_switch_shadows_every_level_single,
     .init = init_global_single, .fini = fini, .timeout = 60)
{
    global_switch();
    cr_assert_eq(window_count("cellgate:{mix:alex}#0:fixed_window"), 5);
}

/* ---------------- --check-config ---------------- */

Test(it_limiter_shadow, check_config_refuses_a_shadow_that_is_no_boolean,
     .fini = px_env_fini, .timeout = 60)
{
    char limits[PX_PATH_MAX], conf[PX_PATH_MAX];
    struct px_run res;

    px_write_file(limits, sizeof(limits), "limits.yaml",
                  "user:\n"
                  "  children:\n"
                  "    \"*\":\n"
                  "      limits: [1, 1, 1]\n"
                  "      shadow: maybe\n");
    {
        const char *argv[] = { PX_CELLGATE_BIN, "--check-config", "--limits",
                               limits, NULL };
        px_run(&res, argv);
    }
    cr_assert_eq(res.status, 1, "exit %d, stderr: %s", res.status, res.err);
    px_check_location(res.err, limits, 5);
    cr_assert_not_null(strstr(res.err, ":5:15: user:*: shadow: expected true "
                                       "or false, got \"maybe\""),
                       "stderr: %s", res.err);
    px_run_free(&res);

    px_write_file(conf, sizeof(conf), "proxy.yaml", "limiter_shadow: maybe\n");
    {
        const char *argv[] = { PX_CELLGATE_BIN, "--config", conf,
                               "--check-config", NULL };
        px_run(&res, argv);
    }
    cr_assert_eq(res.status, 1, "exit %d, stderr: %s", res.status, res.err);
    px_check_location(res.err, conf, 1);
    px_run_free(&res);
}

/* ---------------- The refusal cache ---------------- */

/* rc:<id>: a real GCRA of one per 3 s; rc:<id>:x below it, a shadow GCRA
 * of one per 1000 s. */
static const char cache_tree[] = "rc:\n"
                                 "  children:\n"
                                 "    \"*\":\n"
                                 "      limits: [0, 1, 3]\n"
                                 "      children:\n"
                                 "        x:\n"
                                 "          shadow: true\n"
                                 "          limits: [0, 1, 1000]\n";

static void init_cache(void)
{
    px_limits_start(PX_MODE_SINGLE, cache_tree, NULL);
}

Test(it_limiter_shadow, a_group_with_a_shadow_level_is_never_cached,
     .init = init_cache, .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = px_connect(px_env()->proxy.port);
    struct px_five f;
    int i;

    /* Both admit; then both refuse, again and again: refusals the cache
     * would learn (in a few milliseconds: it-refusal's tests) for a group
     * of gcra levels without a shadow one. */
    f = px_take_five(px_cmd(c, "LIMITER CHECK rc:alex:x"), "1");
    cr_assert_eq(f.limited, 0);
    for (i = 0; i < 100; i++) {
        f = px_take_five(px_cmd(c, "LIMITER CHECK rc:alex:x"), "refused");
        cr_assert_eq(f.limited, 1, "check %d: the real level admitted", i);
        px_sleep_ms(5);
    }
    cr_assert_eq(px_info_int(c, "limiter_refusal_cache_keys"), 0);
    cr_assert_eq(px_info_int(c, "limiter_refusal_cache_hits"), 0);
    /* Once the real level has its token back (3 s, however long the sleep
     * overruns: the shadow level stays empty for 1000 s), only the shadow
     * level refuses: admitted. */
    px_sleep_ms(3100);
    f = px_take_five(px_cmd(c, "LIMITER CHECK rc:alex:x"), "after");
    cr_assert_eq(f.limited, 0, "refused by the shadow level alone");
    cr_assert_eq(px_info_int(c, "limiter_shadow_limited"), 101);
    redisFree(c);
}
