/* Concurrency: max holders admitted and the next refused (retry to the
 * earliest lease end, reset to the last), a renewal taking no second
 * slot, leases running out, RELEASE, peeks with and without a token, the
 * bounds of the parameters, tokens and states, and the limits.yaml row
 * (defaults, rendering).
 *
 * Time is a parameter: every test steps `now` explicitly, and a tiny
 * in-memory store applies the writes the model asks for. */
#include "tests/support/limits_test.h"
#include "tests/support/px_test.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/concurrency.h"
#include "algorithms/rl.h"
#include "conf/limits.h"

PX_TEST_SUITE(concurrency);

#define S  RL_NS_PER_SEC
#define MS RL_NS_PER_MS

/* A realistic clock: 2023-11-14T22:13:20Z in nanoseconds. */
#define T0 INT64_C(1700000000000000000)

#define CAP 16

/* The one key of a test, as a store holds it (tokens are the tests'
 * string literals, so the holders may point at them). */
struct mem {
    struct concurrency_holder h[CAP];
    size_t n;
};

/* Decides `tok` at now with cost, applying the write to m. */
static struct concurrency_result take(struct mem *m,
                                      const struct concurrency_params *p,
                                      const char *tok, int64_t now,
                                      int64_t cost)
{
    struct concurrency_holder next[CAP];
    struct concurrency_result r;
    const char *err = NULL;

    cr_assert_eq(concurrency_decide(p, m->h, m->n, tok, tok ? strlen(tok) : 0,
                                    now, cost, next, CAP, &r, &err),
                 CONCURRENCY_OK, "%s", err ? err : "");
    if (r.write == CONCURRENCY_WRITE_SET) {
        memcpy(m->h, next, r.next_n * sizeof(next[0]));
        m->n = r.next_n;
    }
    return r;
}

/* Releases `tok` at now, applying the write; returns took. */
static int release(struct mem *m, const struct concurrency_params *p,
                   const char *tok, int64_t now)
{
    struct concurrency_holder next[CAP];
    struct concurrency_result r;
    const char *err = NULL;

    cr_assert_eq(concurrency_release(p, m->h, m->n, tok, strlen(tok), now, next,
                                     CAP, &r, &err),
                 CONCURRENCY_OK, "%s", err ? err : "");
    if (r.write == CONCURRENCY_WRITE_SET) {
        memcpy(m->h, next, r.next_n * sizeof(next[0]));
        m->n = r.next_n;
    } else if (r.write == CONCURRENCY_WRITE_DEL) {
        m->n = 0;
    }
    return r.took;
}

static struct concurrency_params params(int64_t max, int64_t lease_ms)
{
    struct concurrency_params p;
    const char *err = NULL;

    cr_assert_eq(concurrency_params_init(&p, max, lease_ms, &err),
                 CONCURRENCY_OK);
    return p;
}

Test(concurrency, max_holders_then_refused_until_the_earliest_lease_ends)
{
    struct concurrency_params p = params(2, 10000);
    struct mem m = { 0 };
    struct concurrency_result r;

    r = take(&m, &p, "a", T0, 1);
    cr_assert_eq(r.d.limited, 0);
    cr_assert_eq(r.d.limit, 2);
    cr_assert_eq(r.d.remaining, 1);
    cr_assert_eq(r.d.retry_after_ns, -S);
    cr_assert_eq(r.d.reset_after_ns, 10 * S);
    cr_assert_eq(r.expiry_ms, 10000);
    cr_assert_eq(r.took, 1);
    r = take(&m, &p, "b", T0 + 3 * S, 5); /* one slot, whatever the cost */
    cr_assert_eq(r.d.remaining, 0);
    cr_assert_eq(r.d.reset_after_ns, 10 * S);
    r = take(&m, &p, "c", T0 + 4 * S, 1);
    cr_assert_eq(r.d.limited, 1);
    cr_assert_eq(r.d.remaining, 0);
    cr_assert_eq(r.write, CONCURRENCY_WRITE_NONE);
    cr_assert_eq(r.d.retry_after_ns, 6 * S, "a's lease ends at T0 + 10 s");
    cr_assert_eq(r.d.reset_after_ns, 9 * S, "b's at T0 + 13 s");
    cr_assert_eq(m.n, 2);
}

Test(concurrency, a_renewal_takes_no_second_slot)
{
    struct concurrency_params p = params(2, 10000);
    struct mem m = { 0 };
    struct concurrency_result r;

    take(&m, &p, "a", T0, 1);
    take(&m, &p, "b", T0 + S, 1);
    r = take(&m, &p, "a", T0 + 5 * S, 1);
    cr_assert_eq(r.d.limited, 0, "a holds a slot: renewed, even when full");
    cr_assert_eq(r.took, 2);
    cr_assert_eq(r.d.remaining, 0);
    cr_assert_eq(m.n, 2);
    cr_assert_eq(r.d.reset_after_ns, 10 * S, "a's lease moved to T0 + 15 s");
    r = take(&m, &p, "c", T0 + 12 * S, 1);
    cr_assert_eq(r.d.limited, 0, "b's lease ran out at T0 + 11 s");
    cr_assert_eq(m.n, 2, "b dropped, c added");
    cr_assert_eq(r.d.reset_after_ns, 10 * S);
}

Test(concurrency, a_lease_running_out_frees_its_slot)
{
    struct concurrency_params p = params(1, 200);
    struct mem m = { 0 };

    take(&m, &p, "a", T0, 1);
    cr_assert_eq(take(&m, &p, "b", T0 + 199 * MS, 1).d.limited, 1);
    cr_assert_eq(take(&m, &p, "b", T0 + 200 * MS, 1).d.limited, 0,
                 "live while the lease end is after now");
    cr_assert_eq(m.n, 1);
    cr_assert_eq(release(&m, &p, "a", T0 + 201 * MS), 0, "a's slot is gone");
}

Test(concurrency, release_frees_only_a_live_slot)
{
    struct concurrency_params p = params(3, 1000);
    struct mem m = { 0 };
    struct concurrency_holder next[CAP];
    struct concurrency_result r;
    const char *err = NULL;

    take(&m, &p, "a", T0, 1);
    take(&m, &p, "b", T0, 1);
    cr_assert_eq(release(&m, &p, "a", T0 + MS), 1);
    cr_assert_eq(m.n, 1);
    cr_assert_eq(release(&m, &p, "a", T0 + MS), 0, "released already");
    cr_assert_eq(release(&m, &p, "zz", T0 + MS), 0, "never held one");
    cr_assert_eq(
        concurrency_release(&p, m.h, m.n, "b", 1, T0 + MS, next, CAP, &r, &err),
        CONCURRENCY_OK);
    cr_assert_eq(r.write, CONCURRENCY_WRITE_DEL, "the last holder went");
    cr_assert_eq(r.d.remaining, 3);
    cr_assert_eq(r.d.reset_after_ns, 0);
}

Test(concurrency, peeks_take_nothing)
{
    struct concurrency_params p = params(2, 1000);
    struct mem m = { 0 };
    struct concurrency_result r;

    take(&m, &p, "a", T0, 1);
    take(&m, &p, "b", T0, 1);
    r = take(&m, &p, "a", T0 + MS, 0);
    cr_assert_eq(r.write, CONCURRENCY_WRITE_NONE);
    cr_assert_eq(r.d.limited, 0, "cost 0: the state, a's slot counted");
    cr_assert_eq(r.d.remaining, 0);
    r = take(&m, &p, NULL, T0 + MS, 1);
    cr_assert_eq(r.write, CONCURRENCY_WRITE_NONE, "no token: nothing taken");
    cr_assert_eq(r.d.limited, 1, "what a new holder would get");
    r = take(&m, &p, NULL, T0 + 2 * S, 1);
    cr_assert_eq(r.d.limited, 0);
    cr_assert_eq(r.d.remaining, 1);
    cr_assert_eq(m.n, 2, "still the stored two");
    /* max lowered under live holders: cost 0 shows it refused. */
    p = params(1, 1000);
    cr_assert_eq(take(&m, &p, NULL, T0 + MS, 0).d.limited, 1);
    cr_assert_eq(take(&m, &p, "a", T0 + MS, 1).d.limited, 0, "a renews");
}

Test(concurrency, bounds_of_parameters_tokens_and_states)
{
    struct concurrency_params p;
    struct concurrency_holder next[CAP], bad = { "x", 1, -1 };
    struct concurrency_result r;
    const char *err = NULL;
    char big[CONCURRENCY_MAX_TOKEN + 1];

    cr_assert_eq(concurrency_params_init(&p, 0, 1, &err), CONCURRENCY_EARGS);
    cr_assert_str_eq(err, CONCURRENCY_ERR_MAX);
    cr_assert_eq(concurrency_params_init(&p, 100001, 1, &err),
                 CONCURRENCY_EARGS);
    cr_assert_eq(concurrency_params_init(&p, 1, 0, &err), CONCURRENCY_EARGS);
    cr_assert_str_eq(err, CONCURRENCY_ERR_LEASE);
    cr_assert_eq(concurrency_params_init(&p, 1, 86400001, &err),
                 CONCURRENCY_EARGS);
    p = params(100000, 86400000);
    memset(big, 'x', sizeof(big));
    cr_assert_eq(concurrency_decide(&p, NULL, 0, big, sizeof(big), T0, 1, next,
                                    CAP, &r, &err),
                 CONCURRENCY_EARGS);
    cr_assert_str_eq(err, CONCURRENCY_ERR_TOKEN);
    cr_assert_eq(concurrency_decide(&p, NULL, 0, big, sizeof(big) - 1, T0, 1,
                                    next, CAP, &r, &err),
                 CONCURRENCY_OK, "512 bytes is fine");
    cr_assert_eq(
        concurrency_decide(&p, &bad, 1, "a", 1, T0, 1, next, CAP, &r, &err),
        CONCURRENCY_ESTATE);
    cr_assert_eq(
        concurrency_decide(&p, NULL, 0, "a", 1, -1, 1, next, CAP, &r, &err),
        CONCURRENCY_EARGS);
    cr_assert_eq(
        concurrency_decide(&p, NULL, 0, "a", 1, T0, 1, next, 0, &r, &err),
        CONCURRENCY_EARGS, "no room for the new holder");
}

Test(concurrency, limits_yaml_row)
{
    struct limits_tree *t = limits_test_load_ok(
        "api:\n  limits:\n    - {algorithm: concurrency, max: 10}\n"
        "    - {algorithm: concurrency, max: 3, lease: 1.5s}\n");
    struct limits_levels *lv = malloc(LIMITS_LEVELS_BYTES);
    char buf[128];

    limits_test_resolve(t, "api", lv);
    cr_assert_eq(lv->level[0].limits[0].algo, LIMITS_CONCURRENCY);
    cr_assert_eq(lv->level[0].limits[0].u.concurrency.lease_ms, 60000,
                 "the default lease");
    limits_format(&lv->level[0].limits[0], buf, sizeof(buf));
    cr_assert_str_eq(buf, "concurrency(max=10,lease=60s)");
    limits_format(&lv->level[0].limits[1], buf, sizeof(buf));
    cr_assert_str_eq(buf, "concurrency(max=3,lease=1.5s)");
    free(lv);
    limits_free(t);
}
