/* LIMITER PEEK <path> [COST n] through the real binary, in its three modes
 * (embedded, single Redis, cluster of 3 masters): PEEK answers exactly what
 * the CHECK of the same path and cost would answer at that instant, and
 * writes nothing.
 *
 * - Every algorithm: PEEK then CHECK, again and again, until refused and a
 *   few calls after, with costs 1, 2, 0 and one over the limit: the pair
 *   agree every time.
 * - N PEEKs then a CHECK answer as the CHECK alone (a twin identity with
 *   the same history); in the Redis modes every limiter key on every
 *   master (its DUMP and its PEXPIRETIME) is the same before and after
 *   the PEEKs, and no key appears.
 * - COST n: admitted when n fit, refused when not (never: retry -1 when n
 *   is over a limit), on one level and on several (one slot, and a shared
 *   level in another slot), where a refused PEEK, like a refused CHECK,
 *   shows the admitting levels' state without this request.
 * - Bad input (COST -1, abc, missing, huge; WAIT, a CHECK-only option):
 *   Redis-style errors, nothing written, and another client's CHECKs over
 *   the same upstream connections keep their exact replies.
 *
 * Rates are slow (a token per 1000 s, windows of an hour or a day), so the
 * counts never move during a test; only the durations do, as time passes
 * between two calls: the later reply's retry_after and reset_after may be
 * below the earlier one's by the rounding edge (1 s) plus the whole
 * seconds measured between the calls, never above. Nothing asserts how
 * fast anything is. */
#include "tests/support/px_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/integration/cluster_fixture.h"
#include "tests/integration/fixture.h"
#include "tests/integration/limiter_support.h"
#include "tests/integration/lstate.h"

PX_TEST_SUITE(it_limiter_peek);

/* One identity node per algorithm, each with a limit of 3; acct:*:trade,
 * two levels in one slot; team:*, a shared level (its own slot) above
 * the identity's; rl:*, gcra at both levels across slots. */
static const char peek_yaml[] =
    "gc:\n"
    "  children:\n"
    "    \"*\":\n"
    "      limits: [2, 1, 1000]\n" PX_ALGOS_YAML "acct:\n"
    "  children:\n"
    "    \"*\":\n"
    "      limits:\n"
    "        - {algorithm: fixed_window, max: 5, window: 1d}\n"
    "      children:\n"
    "        trade:\n"
    "          limits:\n"
    "            - {algorithm: token_bucket, capacity: 3, "
    "refill_per_sec: 0.001}\n"
    "team:\n"
    "  limits:\n"
    "    - {algorithm: fixed_window, max: 10, window: 1d}\n"
    "  children:\n"
    "    \"*\":\n"
    "      limits:\n"
    "        - {algorithm: token_bucket, capacity: 3, refill_per_sec: 0.001}\n"
    "rl:\n"
    "  limits: [9, 1, 1000]\n"
    "  children:\n"
    "    \"*\":\n"
    "      limits: [2, 1, 1000]\n";

/* The identity nodes of the algorithms: path base, and the algorithm's
 * name in its key ("cellgate:{<base>:<id>}#0:<name>"). */
static const struct {
    const char *base;
    const char *name;
} algos[] = {
    { "gc", "gcra" },
    { "tb", "token_bucket" },
    { "lb", "leaky_bucket" },
    { "fw", "fixed_window" },
    { "sw", "sliding_window" },
    { "sl", "sliding_log" },
    { "sc", "sliding_counter" },
};
#define NALGOS (sizeof(algos) / sizeof(algos[0]))

#define LIMIT     3   /* every algorithm's limit */
#define PATH_LEN  64  /* room for every path the tests build */
#define KEY_MAX   160 /* room for every key the tests build */
#define WHAT_MAX  256 /* room for a failure message's call name */
#define E_NOT_INT "ERR value is not an integer or out of range"
#define E_SYNTAX  "ERR syntax error"

static void init_embedded(void)
{
    px_limits_start(PX_MODE_EMBEDDED, peek_yaml, NULL);
}

static void init_single(void)
{
    px_limits_start(PX_MODE_SINGLE, peek_yaml, NULL);
}

static void init_cluster(void)
{
    px_limits_start(PX_MODE_CLUSTER, peek_yaml, NULL);
}

/* ---------------- Replies ---------------- */

/* A limiter reply: five integers, or an error text. */
struct answer {
    int error;          /* 1: text holds the error */
    char text[256];     /* the error, cut */
    struct px_five f;   /* the five integers */
    long long taken_ms; /* px_now_ms() when the call was sent */
};

static struct answer take_answer(redisReply *r, const char *what)
{
    struct answer a;

    memset(&a, 0, sizeof(a));
    if (r->type == REDIS_REPLY_ERROR) {
        a.error = 1;
        snprintf(a.text, sizeof(a.text), "%s", r->str);
        freeReplyObject(r);
        return a;
    }
    a.f = px_take_five(r, what);
    return a;
}

/* Whether a later duration may also exceed the earlier one. */
enum px_order {
    SAME_STATE, /* one state read twice: durations only shrink */
    TWIN_STATE, /* twins written moments apart: either may be ahead */
};

/* Asserts that `later`, a reply taken dt_ms after `earlier`, is the same
 * answer: the same error, or the same limited, limit and remaining, and
 * durations no further apart than the rounding edge (1 s) plus the whole
 * seconds that passed, and (SAME_STATE) never above the earlier ones. */
static void assert_agree(const struct answer *earlier,
                         const struct answer *later, long long dt_ms,
                         enum px_order order, const char *what)
{
    long long slack = 1 + dt_ms / 1000;
    long long up = order == SAME_STATE ? 0 : slack;
    const struct px_five *a = &earlier->f, *b = &later->f;

    cr_assert_eq(earlier->error, later->error,
                 "%s: one is an error (\"%s\" / \"%s\"), not both", what,
                 earlier->text, later->text);
    if (earlier->error) {
        cr_assert_str_eq(earlier->text, later->text, "%s", what);
        return;
    }
    cr_assert(a->limited == b->limited && a->limit == b->limit &&
                  a->remaining == b->remaining,
              "%s: [%lld, %lld, %lld, %lld, %lld] then [%lld, %lld, %lld, "
              "%lld, %lld]",
              what, a->limited, a->limit, a->remaining, a->retry, a->reset,
              b->limited, b->limit, b->remaining, b->retry, b->reset);
    if (a->retry < 0) {
        cr_assert_eq(b->retry, a->retry, "%s: retry_after %lld then %lld", what,
                     a->retry, b->retry);
    } else {
        cr_assert(b->retry <= a->retry + up && b->retry >= a->retry - slack &&
                      b->retry >= 0,
                  "%s: retry_after %lld then %lld, %lld ms apart", what,
                  a->retry, b->retry, dt_ms);
    }
    cr_assert(b->reset <= a->reset + up && b->reset >= a->reset - slack &&
                  b->reset >= 0,
              "%s: reset_after %lld then %lld, %lld ms apart", what, a->reset,
              b->reset, dt_ms);
}

/* LIMITER PEEK <path> COST <cost>, then LIMITER CHECK with the same: asserts
 * they agree and returns the CHECK's answer. */
static struct answer peek_then_check(redisContext *c, const char *path,
                                     long long cost, const char *what)
{
    struct answer p, k;
    long long t0 = px_now_ms(), dt;
    char w[WHAT_MAX];

    snprintf(w, sizeof(w), "%s: PEEK %s COST %lld", what, path, cost);
    p = take_answer(px_cmd(c, "LIMITER PEEK %s COST %lld", path, cost), w);
    snprintf(w, sizeof(w), "%s: CHECK %s COST %lld", what, path, cost);
    k = take_answer(px_cmd(c, "LIMITER CHECK %s COST %lld", path, cost), w);
    dt = px_now_ms() - t0;
    snprintf(w, sizeof(w), "%s: PEEK then CHECK %s COST %lld", what, path,
             cost);
    assert_agree(&p, &k, dt, SAME_STATE, w);
    return k;
}

/* Asserts an answer is five integers with this limited flag and remaining,
 * and (when retry_never) retry_after -1. */
static void expect(const struct answer *a, const char *what, long long limited,
                   long long limit, long long remaining, int retry_never)
{
    cr_assert_eq(a->error, 0, "%s: error \"%s\"", what, a->text);
    cr_assert(
        a->f.limited == limited && a->f.limit == limit &&
            a->f.remaining == remaining && (!retry_never || a->f.retry == -1) &&
            (limited || a->f.retry == -1),
        "%s: got [%lld, %lld, %lld, %lld, %lld], want [%lld, %lld, "
        "%lld, %s, _]",
        what, a->f.limited, a->f.limit, a->f.remaining, a->f.retry, a->f.reset,
        limited, limit, remaining, retry_never || !limited ? "-1" : "_");
}

/* ---------------- Stored state (Redis modes) ---------------- */

/* Every limiter key on every master, each with its DUMP and PEXPIRETIME,
 * as one text sorted by key (the caller frees it); NULL in embedded mode. */
static char *snapshot(void)
{
    struct px_cluster *cl = px_cluster();
    int masters = px_mode_now() == PX_MODE_CLUSTER ? cl->nmasters : 1;
    char **lines = NULL;
    size_t n = 0, total = 1;
    char *out;

    if (px_mode_now() == PX_MODE_EMBEDDED) {
        return NULL;
    }
    for (int m = 0; m < masters; m++) {
        redisContext *d = px_mode_now() == PX_MODE_CLUSTER
                              ? px_cluster_connect(cl, m)
                              : px_redis_connect(&px_env()->redis, NULL);
        redisReply *keys = px_cmd(d, "KEYS cellgate:*");

        cr_assert_eq(keys->type, REDIS_REPLY_ARRAY);
        lines = realloc(lines, (n + keys->elements + 1) * sizeof(*lines));
        cr_assert_not_null(lines);
        for (size_t k = 0; k < keys->elements; k++) {
            const char *key = keys->element[k]->str;
            size_t klen = keys->element[k]->len;
            redisReply *dump = px_cmd(d, "DUMP %b", key, klen);
            redisReply *exp = lstate_cmd(d, "PEXPIRETIME %.*s", (int)klen, key);
            size_t len;
            char *line;

            cr_assert_eq(dump->type, REDIS_REPLY_STRING, "DUMP %s", key);
            cr_assert_eq(exp->type, REDIS_REPLY_INTEGER, "PEXPIRETIME %s", key);
            len = klen + 2 * dump->len + 64;
            line = malloc(len);
            cr_assert_not_null(line);
            size_t used = (size_t)snprintf(line, len, "%.*s pexpiretime=%lld ",
                                           (int)klen, key, exp->integer);
            for (size_t b = 0; b < dump->len; b++) {
                used += (size_t)snprintf(line + used, len - used, "%02x",
                                         (unsigned char)dump->str[b]);
            }
            lines[n++] = line;
            total += used + 1;
            freeReplyObject(dump);
            freeReplyObject(exp);
        }
        freeReplyObject(keys);
        redisFree(d);
    }
    for (size_t i = 1; i < n; i++) {
        for (size_t j = i; j > 0 && strcmp(lines[j - 1], lines[j]) > 0; j--) {
            char *t = lines[j];
            lines[j] = lines[j - 1];
            lines[j - 1] = t;
        }
    }
    out = malloc(total);
    cr_assert_not_null(out);
    out[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        strcat(out, lines[i]);
        strcat(out, "\n");
        free(lines[i]);
    }
    free(lines);
    return out;
}

/* Asserts the stored state is still `before` (a snapshot), then frees it. */
static void assert_unchanged(char *before, const char *what)
{
    char *after = snapshot();

    if (before != NULL) {
        cr_assert_not_null(after);
        cr_assert_str_eq(after, before, "%s wrote to the store", what);
    }
    free(after);
    free(before);
}

/* ---------------- Every algorithm ---------------- */

/* PEEK then CHECK on <base>:<id>, COST 1, until refused and three calls
 * after; then a fresh id with COST 2 (the second does not fit); then COST
 * 0 and COST 4 (over the limit: never), each pair agreeing. */
static void pairs_agree(redisContext *c, const char *base, const char *id)
{
    char path[PATH_LEN], what[WHAT_MAX];
    struct answer k;

    snprintf(path, sizeof(path), "%s:%s", base, id);
    for (int i = 0; i < LIMIT + 3; i++) {
        snprintf(what, sizeof(what), "%s cost 1, call %d", path, i + 1);
        k = peek_then_check(c, path, 1, what);
        if (i < LIMIT) {
            expect(&k, what, 0, LIMIT, LIMIT - 1 - i, 0);
        } else {
            cr_assert_eq(k.f.limited, 1, "%s: admitted", what);
        }
    }
    snprintf(what, sizeof(what), "%s cost 0, exhausted", path);
    peek_then_check(c, path, 0, what);
    snprintf(what, sizeof(what), "%s cost 4, exhausted", path);
    k = peek_then_check(c, path, LIMIT + 1, what);
    cr_assert(k.f.limited == 1 && k.f.retry == -1, "%s: [%lld, .., %lld, ..]",
              what, k.f.limited, k.f.retry);
    px_check_int(px_cmd_admin(c, "LIMITER RESET %s", path), 1);

    snprintf(path, sizeof(path), "%s:%s2", base, id);
    snprintf(what, sizeof(what), "%s cost 4, new", path);
    k = peek_then_check(c, path, LIMIT + 1, what);
    expect(&k, what, 1, LIMIT, LIMIT, 1);
    snprintf(what, sizeof(what), "%s cost 0, new", path);
    k = peek_then_check(c, path, 0, what);
    expect(&k, what, 0, LIMIT, LIMIT, 1);
    for (int i = 0; i < 4; i++) {
        snprintf(what, sizeof(what), "%s cost 2, call %d", path, i + 1);
        k = peek_then_check(c, path, 2, what);
        if (i == 0) {
            expect(&k, what, 0, LIMIT, 1, 0);
        } else {
            cr_assert_eq(k.f.limited, 1, "%s: admitted", what);
        }
        snprintf(what, sizeof(what), "%s cost 1 after cost 2, call %d", path,
                 i + 1);
        peek_then_check(c, path, 1, what);
    }
    snprintf(what, sizeof(what), "%s cost 0 at the end", path);
    peek_then_check(c, path, 0, what);
    px_check_int(px_cmd_admin(c, "LIMITER RESET %s", path), 1);
}

/* Identity a gets PEEKs (of the step's cost, 0 and over the limit) before
 * each CHECK, its twin b the CHECKs alone: a's answers are b's, and the
 * PEEKs leave every stored key as it was. */
static void peeks_change_nothing(redisContext *c, const char *base)
{
    static const long long costs[] = { 1, 2, 1, 1, 0, 2, 1 };
    char pa[PATH_LEN], pb[PATH_LEN], what[WHAT_MAX];

    snprintf(pa, sizeof(pa), "%s:peeker", base);
    snprintf(pb, sizeof(pb), "%s:plain", base);
    long long t0 = px_now_ms();

    for (size_t s = 0; s < sizeof(costs) / sizeof(costs[0]); s++) {
        long long cost = costs[s];
        struct answer a, b;
        char *before = snapshot();

        for (int n = 0; n < 3; n++) {
            long long q = n == 0 ? cost : n == 1 ? 0 : LIMIT + 1;
            snprintf(what, sizeof(what), "%s step %zu peek %d", pa, s, n);
            take_answer(px_cmd(c, "LIMITER PEEK %s COST %lld", pa, q), what);
        }
        snprintf(what, sizeof(what), "%s step %zu: PEEKs", pa, s);
        assert_unchanged(before, what);
        snprintf(what, sizeof(what), "%s step %zu", pa, s);
        a = take_answer(px_cmd(c, "LIMITER CHECK %s COST %lld", pa, cost),
                        what);
        snprintf(what, sizeof(what), "%s step %zu", pb, s);
        b = take_answer(px_cmd(c, "LIMITER CHECK %s COST %lld", pb, cost),
                        what);
        snprintf(what, sizeof(what),
                 "%s step %zu cost %lld: after PEEKs, and without", base, s,
                 cost);
        /* The twins' states are as far apart in time as their calls
         * since the first step. */
        assert_agree(&a, &b, px_now_ms() - t0, TWIN_STATE, what);
    }
    px_check_int(px_cmd_admin(c, "LIMITER RESET %s", pa), 1);
    px_check_int(px_cmd_admin(c, "LIMITER RESET %s", pb), 1);
}

/* In the Redis modes, a PEEK on a new path creates no key, and on an
 * exhausted one touches neither the value nor the expiry. */
static void peek_keys_untouched(redisContext *c, const char *base)
{
    char path[PATH_LEN], key[KEY_MAX], what[WHAT_MAX];
    const char *name = NULL;
    char *before;

    for (size_t a = 0; a < NALGOS; a++) {
        if (strcmp(algos[a].base, base) == 0) {
            name = algos[a].name;
        }
    }
    cr_assert_not_null(name);
    snprintf(path, sizeof(path), "%s:untouched", base);
    snprintf(key, sizeof(key), "cellgate:{%s}#0:%s", path, name);
    px_check_absent(key, strlen(key), "before");
    for (long long q = 0; q <= LIMIT + 1; q++) {
        take_answer(px_cmd(c, "LIMITER PEEK %s COST %lld", path, q), path);
    }
    px_check_absent(key, strlen(key), "PEEKs on a new path");
    for (int i = 0; i < LIMIT; i++) {
        take_answer(px_cmd(c, "LIMITER CHECK %s", path), path);
    }
    before = snapshot();
    for (long long q = 0; q <= LIMIT + 1; q++) {
        take_answer(px_cmd(c, "LIMITER PEEK %s COST %lld", path, q), path);
    }
    snprintf(what, sizeof(what), "PEEKs of exhausted %s", path);
    assert_unchanged(before, what);
    px_check_int(px_cmd_admin(c, "LIMITER RESET %s", path), 1);
}

static void every_algorithm(redisContext *c)
{
    for (size_t a = 0; a < NALGOS; a++) {
        pairs_agree(c, algos[a].base, "u");
        peeks_change_nothing(c, algos[a].base);
        peek_keys_untouched(c, algos[a].base);
    }
}

/* ---------------- COST n, and several levels ---------------- */

/* PEEK <path> COST <cost> is `want` (five integers but retry_after and
 * reset_after, checked by the CHECK that follows), writes nothing, and the
 * CHECK that follows agrees. Returns the CHECK's answer. */
static struct answer peek_cost(redisContext *c, const char *path,
                               long long cost, long long limited,
                               long long limit, long long remaining,
                               int retry_never, const char *what)
{
    char *before = snapshot();
    struct answer p =
        take_answer(px_cmd(c, "LIMITER PEEK %s COST %lld", path, cost), what);

    assert_unchanged(before, what);
    expect(&p, what, limited, limit, remaining, retry_never);
    return peek_then_check(c, path, cost, what);
}

/* One level: n fit (admitted), then n do not (refused, or never). */
static void cost_one_level(redisContext *c)
{
    /* A token bucket of 3. */
    peek_cost(c, "tb:cost", 2, 0, 3, 1, 0, "tb cost 2 of 3");
    peek_cost(c, "tb:cost", 2, 1, 3, 1, 0, "tb cost 2 of 1");
    peek_cost(c, "tb:cost", 1, 0, 3, 0, 0, "tb cost 1 of 1");
    peek_cost(c, "tb:cost", 4, 1, 3, 0, 1, "tb cost 4, never");
    peek_cost(c, "tb:cost", 0, 0, 3, 0, 1, "tb cost 0 of 0");
    px_check_int(px_cmd_admin(c, "LIMITER RESET tb:cost"), 1);
    /* gcra, 3 at once: COST 3 fits a new key, 4 never does. */
    peek_cost(c, "gc:cost", 4, 1, 3, 3, 1, "gcra cost 4, never");
    peek_cost(c, "gc:cost", 3, 0, 3, 0, 0, "gcra cost 3 of 3");
    peek_cost(c, "gc:cost", 1, 1, 3, 0, 0, "gcra cost 1 of 0");
    px_check_int(px_cmd_admin(c, "LIMITER RESET gc:cost"), 1);
}

/* acct:<id> (fixed window of 5) and acct:<id>:trade (token bucket of 3),
 * one slot. A refused PEEK shows the levels that would admit without its
 * cost, as the refused CHECK does. */
static void cost_two_levels(redisContext *c)
{
    /* New: 4 is over trade's 3 (never); acct shows its 5 untouched, so
     * the least remaining is trade's 3. */
    peek_cost(c, "acct:x:trade", 4, 1, 3, 3, 1, "two levels, cost 4 new");
    /* 3 fit both: trade 0 left, acct 2. */
    peek_cost(c, "acct:x:trade", 3, 0, 3, 0, 0, "two levels, cost 3");
    /* Trade refuses 1 (its 0 left shown); acct would admit. */
    peek_cost(c, "acct:x:trade", 1, 1, 3, 0, 0, "two levels, trade refuses");
    /* The acct level alone: 3 do not fit its 2, 2 do. */
    peek_cost(c, "acct:x", 3, 1, 5, 2, 0, "acct alone, cost 3 of 2");
    peek_cost(c, "acct:x", 2, 0, 5, 0, 0, "acct alone, cost 2 of 2");
    px_check_int(px_cmd_admin(c, "LIMITER RESET acct:x:trade"), 2);

    /* acct refuses, trade would admit: acct has 2 left, COST 3 fits
     * trade's 3. Trade is shown without the cost (3, not 0), so the reply
     * is acct's 2 of 5. */
    peek_cost(c, "acct:y", 3, 0, 5, 2, 0, "acct cost 3");
    peek_cost(c, "acct:y:trade", 3, 1, 5, 2, 0, "two levels, acct refuses");
    /* 2 fit both: acct 0 left (of 5), trade 1. */
    peek_cost(c, "acct:y:trade", 2, 0, 5, 0, 0, "two levels, cost 2");
    px_check_int(px_cmd_admin(c, "LIMITER RESET acct:y:trade"), 2);
}

/* rl (gcra, 10 at once, shared in its own slot) above rl:<id> (gcra, 3
 * at once): a PEEK refused by one slot shows the other as it is. */
static void cost_across_slots_gcra(redisContext *c)
{
    char id[32], path[PATH_LEN], path2[PATH_LEN];

    px_ident_off("cellgate:{rl:", "a", "cellgate:{rl}", id, sizeof(id));
    snprintf(path, sizeof(path), "rl:%s", id);
    snprintf(path2, sizeof(path2), "rl:%s2", id);
    peek_cost(c, path, 4, 1, 3, 3, 1, "rl, cost 4 over the identity's 3");
    peek_cost(c, path, 3, 0, 3, 0, 0, "rl, cost 3");
    /* The identity refuses; rl's 7 left are shown untaken. */
    peek_cost(c, path, 1, 1, 3, 0, 0, "rl, identity refuses");
    /* Another identity takes rl down to 1: rl refuses COST 3, the new
     * identity (3 left) would admit, so the reply is rl's 1 of 10. */
    peek_cost(c, path2, 3, 0, 3, 0, 0, "rl, second identity");
    peek_cost(c, "rl:z", 3, 0, 3, 0, 0, "rl, third identity");
    peek_cost(c, "rl:w", 3, 1, 10, 1, 0, "rl refuses, identity admits");
    px_check_int(px_cmd_admin(c, "LIMITER RESET %s", path), 2);
    px_check_int(px_cmd_admin(c, "LIMITER RESET %s", path2), 1);
    px_check_int(px_cmd_admin(c, "LIMITER RESET rl:z"), 1);
    px_check_int(px_cmd_admin(c, "LIMITER RESET rl:w"), 0);
}

/* team (fixed window of 10, shared, its own slot) above team:<id> (token
 * bucket of 3): the shared level admits COST 4 with 4 left while the
 * identity can never pass it. The refused reply shows team without the
 * cost (4 left), so the least remaining is the identity's 3 of 3.
 *
 * In the Redis modes the slot that admitted answers with its cost taken,
 * and the store gives it back for the reply (lua_wire_group_decode's
 * `admitted`): it must do so for a PEEK's slot that admitted as it does
 * for a CHECK's (with sr.limited == 0, not c->admitted[g], which only
 * CHECKs set, for their refunds), else this PEEK shows team's 0 left of
 * 10 where the CHECK shows the identity's 3 of 3. */
static void cost_across_slots(redisContext *c)
{
    char id[32], path[PATH_LEN];

    px_ident_off("cellgate:{team:", "a", "cellgate:{team}", id, sizeof(id));
    snprintf(path, sizeof(path), "team:%s", id);
    peek_cost(c, "team:t1", 3, 0, 3, 0, 0, "team, first identity");
    peek_cost(c, "team:t2", 3, 0, 3, 0, 0, "team, second identity");
    peek_cost(c, path, 4, 1, 3, 3, 1, "team admits, identity never");
    peek_cost(c, path, 3, 0, 3, 0, 0, "team, this identity");
    peek_cost(c, path, 1, 1, 3, 0, 0, "team, identity refuses");
    px_check_int(px_cmd_admin(c, "LIMITER RESET %s", path), 2);
    px_check_int(px_cmd_admin(c, "LIMITER RESET team:t1"), 1);
    px_check_int(px_cmd_admin(c, "LIMITER RESET team:t2"), 1);
}

/* ---------------- Bad input ---------------- */

/* Splits `line` on spaces into at most 8 words. Returns how many. */
static int words_of(char *line, const char *argv[8], size_t lens[8])
{
    int n = 0;

    for (char *w = strtok(line, " "); w != NULL && n < 8;
         w = strtok(NULL, " ")) {
        argv[n] = w;
        lens[n++] = strlen(w);
    }
    return n;
}

/* Sends the words of `line` as one command and returns its reply. */
static redisReply *cmd_line(redisContext *c, const char *line)
{
    char buf[WHAT_MAX];
    const char *argv[8];
    size_t lens[8];
    int n;
    redisReply *r;

    snprintf(buf, sizeof(buf), "%s", line);
    n = words_of(buf, argv, lens);
    r = redisCommandArgv(c, n, argv, lens);
    cr_assert_not_null(r, "%s: no reply (%s)", line, c->errstr);
    return r;
}

/* Queues the words of `line` as one command. */
static void append_line(redisContext *c, const char *line)
{
    char buf[WHAT_MAX];
    const char *argv[8];
    size_t lens[8];
    int n;

    snprintf(buf, sizeof(buf), "%s", line);
    n = words_of(buf, argv, lens);
    cr_assert_eq(redisAppendCommandArgv(c, n, argv, lens), REDIS_OK);
}

/* Each bad PEEK gets its error, pipelined between another client's CHECKs
 * of one path (3 fit, then refused), which keep their exact replies; and
 * nothing is written. */
static void bad_input(redisContext *c)
{
    static const struct {
        const char *args; /* after "LIMITER PEEK fw:bad" */
        const char *err;
    } bad[] = {
        { "COST -1", E_NOT_INT },
        { "COST abc", E_NOT_INT },
        { "COST 1.5", E_NOT_INT },
        { "COST 99999999999999999999", E_NOT_INT },
        { "COST", E_SYNTAX },
        { "WAIT 100", E_SYNTAX },
        { "COST 1 WAIT 100", E_SYNTAX },
        { "WAIT", E_SYNTAX },
        { "COST 1 FOO", E_SYNTAX },
    };
    redisContext *other = px_connect(px_env()->proxy.port);
    char *before;
    char what[128];

    before = snapshot();
    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
        snprintf(what, sizeof(what), "LIMITER PEEK fw:bad %s", bad[k].args);
        px_check_error(cmd_line(c, what), bad[k].err);
    }
    /* The same on gcra, where WAIT is a CHECK option. */
    px_check_error(px_cmd(c, "LIMITER PEEK gc:bad WAIT 100"), E_SYNTAX);
    px_check_error(px_cmd(c, "LIMITER PEEK gc:bad COST -1"), E_NOT_INT);
    assert_unchanged(before, "bad PEEKs");

    /* Interleaved with another client's CHECKs (pipelined on both). */
    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
        snprintf(what, sizeof(what), "LIMITER PEEK fw:good %s", bad[k].args);
        append_line(c, what);
        cr_assert_eq(redisAppendCommand(other, "LIMITER CHECK fw:good"),
                     REDIS_OK);
        cr_assert_eq(redisAppendCommand(c, "LIMITER PEEK fw:good"), REDIS_OK);
    }
    px_flush(c);
    px_flush(other);
    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
        struct answer a;
        px_check_error(px_next(c), bad[k].err);
        snprintf(what, sizeof(what), "other client's CHECK %zu", k + 1);
        a = take_answer(px_next(other), what);
        if (k < LIMIT) {
            expect(&a, what, 0, LIMIT, LIMIT - 1 - (long long)k, 0);
        } else {
            expect(&a, what, 1, LIMIT, 0, 0);
        }
        /* A good PEEK in c's pipeline: a fixed window of 3, consumed by
         * `other` alone, sees a count between 0 and 3. */
        a = take_answer(px_next(c), "good PEEK between");
        cr_assert_eq(a.error, 0, "good PEEK: \"%s\"", a.text);
        cr_assert(a.f.limit == LIMIT && a.f.remaining >= 0 &&
                      a.f.remaining <= LIMIT - 1,
                  "good PEEK: limit %lld remaining %lld", a.f.limit,
                  a.f.remaining);
    }
    peek_then_check(c, "fw:good", 1, "after the pipeline");
    px_check_int(px_cmd_admin(c, "LIMITER RESET fw:good"), 1);
    redisFree(other);
}

/* A cost that overflows a model's arithmetic: PEEK gets what CHECK gets
 * (an error, or a refusal that can never pass), and writes nothing. */
static void huge_costs(redisContext *c)
{
    static const char *const costs[] = { "9223372036854775807",
                                         "4611686018427387904", "1000000000" };
    char path[PATH_LEN], what[WHAT_MAX];

    for (size_t a = 0; a < NALGOS; a++) {
        snprintf(path, sizeof(path), "%s:huge", algos[a].base);
        for (size_t k = 0; k < sizeof(costs) / sizeof(costs[0]); k++) {
            char *before = snapshot();
            struct answer p, ch;
            long long t0 = px_now_ms();

            snprintf(what, sizeof(what), "PEEK %s COST %s", path, costs[k]);
            p = take_answer(
                px_cmd(c, "LIMITER PEEK %s COST %s", path, costs[k]), what);
            assert_unchanged(before, what);
            ch = take_answer(
                px_cmd(c, "LIMITER CHECK %s COST %s", path, costs[k]), what);
            assert_agree(&p, &ch, px_now_ms() - t0, SAME_STATE, what);
            cr_assert(p.error || (p.f.limited == 1 && p.f.retry == -1),
                      "%s: [%lld, %lld, %lld, %lld, %lld]", what, p.f.limited,
                      p.f.limit, p.f.remaining, p.f.retry, p.f.reset);
        }
        px_check_int(px_cmd_admin(c, "LIMITER RESET %s", path), 0);
    }
}

/* ---------------- Tests ---------------- */

static void run_every_algorithm(void)
{
    redisContext *c = px_connect(px_env()->proxy.port);

    every_algorithm(c);
    redisFree(c);
}

static void run_cost_and_levels(void)
{
    redisContext *c = px_connect(px_env()->proxy.port);

    cost_one_level(c);
    cost_two_levels(c);
    cost_across_slots_gcra(c);
    redisFree(c);
}

static void run_bad_input(void)
{
    redisContext *c = px_connect(px_env()->proxy.port);

    bad_input(c);
    huge_costs(c);
    redisFree(c);
}

static void run_across_slots(void)
{
    redisContext *c = px_connect(px_env()->proxy.port);

    cost_across_slots(c);
    redisFree(c);
}

Test(it_limiter_peek, peek_is_the_check_for_every_algorithm_embedded,
     .init = init_embedded, .fini = px_env_fini, .timeout = 60)
{
    run_every_algorithm();
}

Test(it_limiter_peek, peek_is_the_check_for_every_algorithm_single,
     .init = init_single, .fini = px_env_fini, .timeout = 60)
{
    run_every_algorithm();
}

Test(it_limiter_peek, peek_is_the_check_for_every_algorithm_cluster,
     .init = init_cluster, .fini = px_cluster_fini, .timeout = 120)
{
    run_every_algorithm();
}

Test(it_limiter_peek, peek_cost_n_on_one_and_several_levels_embedded,
     .init = init_embedded, .fini = px_env_fini, .timeout = 60)
{
    run_cost_and_levels();
}

Test(it_limiter_peek, peek_cost_n_on_one_and_several_levels_single,
     .init = init_single, .fini = px_env_fini, .timeout = 60)
{
    run_cost_and_levels();
}

Test(it_limiter_peek, peek_cost_n_on_one_and_several_levels_cluster,
     .init = init_cluster, .fini = px_cluster_fini, .timeout = 120)
{
    run_cost_and_levels();
}

Test(it_limiter_peek, bad_peek_input_is_refused_beside_good_checks_embedded,
     .init = init_embedded, .fini = px_env_fini, .timeout = 60)
{
    run_bad_input();
}

Test(it_limiter_peek, bad_peek_input_is_refused_beside_good_checks_single,
     .init = init_single, .fini = px_env_fini, .timeout = 60)
{
    run_bad_input();
}

Test(it_limiter_peek, bad_peek_input_is_refused_beside_good_checks_cluster,
     .init = init_cluster, .fini = px_cluster_fini, .timeout = 120)
{
    run_bad_input();
}

Test(it_limiter_peek, peek_across_slots_shows_the_admitting_slot_embedded,
     .init = init_embedded, .fini = px_env_fini, .timeout = 60)
{
    run_across_slots();
}

Test(it_limiter_peek, peek_across_slots_shows_the_admitting_slot_single,
     .init = init_single, .fini = px_env_fini, .timeout = 60)
{
    run_across_slots();
}

Test(it_limiter_peek, peek_across_slots_shows_the_admitting_slot_cluster,
     .init = init_cluster, .fini = px_cluster_fini, .timeout = 120)
{
    run_across_slots();
}
