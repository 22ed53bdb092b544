/* LIMITER CHECK|PEEK ... MS and HEADERS through the real binary, embedded,
 * in front of a single Redis and of a 3-master cluster (there each level
 * of the path has its own hash tag, so its own slot as the keys fall):
 *
 * - MS: retry_after and reset_after in milliseconds (rounded up, -1 stays
 *   -1), the other three integers as without it; PEEK too.
 * - HEADERS: the five integers, then RateLimit-Policy (one item per real
 *   level, named by its rule), RateLimit (the level that binds: its
 *   remaining and the seconds to its reset) and, when limited,
 *   Retry-After, as bulk strings; a shadow level is in no header and
 *   never binds; MS and HEADERS together keep the header seconds.
 * - CHECK ... WAIT HEADERS: the held reply carries the headers too.
 * - Bad input (MS or HEADERS twice, an unknown option, MS on RESET): the
 *   Redis-style error, and nothing written (a PEEK COST 0 shows the
 *   identity whole).
 *
 * user:* is a GCRA of 2 at once, one back every 60 s, so no count moves
 * during a test; durations are compared within the time the calls take.
 * w:* lets one through every 100 ms, for the WAIT. */
#include "tests/integration/cluster_fixture.h"
#include "tests/integration/fixture.h"
#include "tests/integration/limiter_support.h"
#include "tests/support/px_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

PX_TEST_SUITE(it_limiter_headers);

static const char headers_tree[] =
    "org:\n"
    "  children:\n"
    "    \"*\":\n"
    "      limits:\n"
    "        - {algorithm: fixed_window, max: 5, window: 1h}\n"
    "      children:\n"
    "        user:\n"
    "          children:\n"
    "            \"*\":\n"
    "              limits: [1, 1, 60]\n"
    "              children:\n"
    "                beta:\n"
    "                  shadow: true\n"
    "                  limits:\n"
    "                    - {algorithm: fixed_window, max: 1, window: 1d}\n"
    "w:\n"
    "  children:\n"
    "    \"*\":\n"
    "      limits: [0, 10, 1]\n";

/* The policy of a path under org:<id>:user:<id> (beta, shadow, left out). */
#define POLICY "\"org:*\";q=5;w=3600, \"org:*:user:*\";q=2;w=120"

static void fini(void)
{
    if (px_mode_now() == PX_MODE_CLUSTER) {
        px_cluster_fini();
    } else {
        px_env_fini();
    }
}

static void init_embedded(void)
{
    px_limits_start(PX_MODE_EMBEDDED, headers_tree, NULL);
}

static void init_single(void)
{
    px_limits_start(PX_MODE_SINGLE, headers_tree, NULL);
}

static void init_cluster(void)
{
    px_limits_start(PX_MODE_CLUSTER, headers_tree, NULL);
}

/* A HEADERS reply: the five integers and up to three header pairs. */
struct hdr_reply {
    long long v[5];
    int npairs;
    char name[3][32];
    char value[3][256];
};

/* Asserts r is an array of five integers and name/value bulk strings,
 * frees it, returns them. */
static struct hdr_reply take_headers(redisReply *r, const char *what)
{
    struct hdr_reply h;
    size_t i;

    memset(&h, 0, sizeof(h));
    cr_assert(r->type == REDIS_REPLY_ARRAY, "%s: type %d (%s)", what, r->type,
              r->type == REDIS_REPLY_ERROR ? r->str : "");
    cr_assert(r->elements >= 5 && r->elements <= 11 && r->elements % 2 == 1,
              "%s: %zu elements", what, r->elements);
    for (i = 0; i < 5; i++) {
        cr_assert(r->element[i]->type == REDIS_REPLY_INTEGER,
                  "%s: element %zu type %d", what, i, r->element[i]->type);
        h.v[i] = r->element[i]->integer;
    }
    for (i = 5; i < r->elements; i += 2) {
        const redisReply *n = r->element[i], *v = r->element[i + 1];
        int k = h.npairs++;
        cr_assert(n->type == REDIS_REPLY_STRING &&
                      v->type == REDIS_REPLY_STRING,
                  "%s: pair %d is not two bulk strings", what, k);
        snprintf(h.name[k], sizeof(h.name[k]), "%s", n->str);
        snprintf(h.value[k], sizeof(h.value[k]), "%s", v->str);
    }
    freeReplyObject(r);
    return h;
}

/* The value of header `name` in h, or NULL. */
static const char *header(const struct hdr_reply *h, const char *name)
{
    for (int k = 0; k < h->npairs; k++) {
        if (strcmp(h->name[k], name) == 0) {
            return h->value[k];
        }
    }
    return NULL;
}

/* Asserts RateLimit is "<name>";r=<r>;t=<t> with t in [tmin, tmax]. */
static void expect_ratelimit(const struct hdr_reply *h, const char *name,
                             long long r, long long tmin, long long tmax,
                             const char *what)
{
    const char *v = header(h, "RateLimit");
    char want[128];
    long long t = -1;
    size_t wl;

    cr_assert(v != NULL, "%s: no RateLimit", what);
    wl = (size_t)snprintf(want, sizeof(want), "\"%s\";r=%lld;t=", name, r);
    cr_assert(strncmp(v, want, wl) == 0, "%s: RateLimit '%s', want '%s...'",
              what, v, want);
    t = atoll(v + wl);
    cr_assert(t >= tmin && t <= tmax, "%s: RateLimit t=%lld not in %lld..%lld",
              what, t, tmin, tmax);
}

/* Asserts that `ms` is the reset_after in seconds of a PEEK of `path`
 * with `cost` (without MS, sent now), in milliseconds: within the second the
 * seconds form rounds, and the time between the two calls. */
static void expect_ms_of(redisContext *c, const char *path, int cost,
                         long long ms, const char *what)
{
    struct px_five f =
        px_take_five(px_cmd(c, "LIMITER PEEK %s COST %d", path, cost), what);

    cr_assert(ms > (f.reset - 2) * 1000 && ms <= f.reset * 1000 + 1000,
              "%s: reset %lld ms, but %lld s", what, ms, f.reset);
}

static void headers_ms_and_bad_input(void)
{
    redisContext *c = px_connect(px_env()->proxy.port);
    struct hdr_reply h;
    struct px_five f;
    const char *ra;

    /* First check: admitted, user:* binds (1 left of 2, whole in 60 s). */
    h = take_headers(px_cmd(c, "LIMITER CHECK org:acme:user:u1 HEADERS"),
                     "check 1");
    cr_assert(h.v[0] == 0 && h.v[1] == 2 && h.v[2] == 1 && h.v[3] == -1,
              "check 1: %lld %lld %lld %lld", h.v[0], h.v[1], h.v[2], h.v[3]);
    cr_assert_eq(h.npairs, 2, "check 1: %d pairs", h.npairs);
    cr_assert_str_eq(h.name[0], "RateLimit-Policy");
    cr_assert_str_eq(h.value[0], POLICY);
    cr_assert_str_eq(h.name[1], "RateLimit");
    expect_ratelimit(&h, "org:*:user:*", 1, 59, 60, "check 1");

    /* Second: admitted, nothing left. */
    h = take_headers(px_cmd(c, "LIMITER CHECK org:acme:user:u1 HEADERS"),
                     "check 2");
    cr_assert(h.v[0] == 0 && h.v[2] == 0 && h.npairs == 2);
    expect_ratelimit(&h, "org:*:user:*", 0, 119, 120, "check 2");

    /* Third: limited, by user:*; Retry-After, seconds rounded up. */
    h = take_headers(px_cmd(c, "LIMITER CHECK org:acme:user:u1 HEADERS"),
                     "check 3");
    cr_assert(h.v[0] == 1 && h.v[2] == 0 && h.v[3] >= 59 && h.v[3] <= 60,
              "check 3: %lld %lld %lld", h.v[0], h.v[2], h.v[3]);
    cr_assert_eq(h.npairs, 3, "check 3: %d pairs", h.npairs);
    cr_assert_str_eq(h.value[0], POLICY);
    expect_ratelimit(&h, "org:*:user:*", 0, 119, 120, "check 3");
    cr_assert_str_eq(h.name[2], "Retry-After");
    ra = header(&h, "Retry-After");
    cr_assert(atoll(ra) >= 59 && atoll(ra) <= 60, "Retry-After '%s'", ra);

    /* MS: the same refusal in milliseconds, the rest unchanged. */
    f = px_take_five(px_cmd(c, "LIMITER PEEK org:acme:user:u1 MS"), "peek ms");
    cr_assert(f.limited == 1 && f.limit == 2 && f.remaining == 0, "peek ms");
    cr_assert(f.retry > 58000 && f.retry <= 60000, "retry %lld ms", f.retry);
    expect_ms_of(c, "org:acme:user:u1", 1, f.reset, "peek ms");
    /* Admitted: -1 stays -1. */
    f = px_take_five(px_cmd(c, "LIMITER CHECK org:acme:user:u2 MS"), "ms ok");
    cr_assert(f.limited == 0 && f.remaining == 1 && f.retry == -1,
              "ms ok: %lld %lld", f.remaining, f.retry);
    expect_ms_of(c, "org:acme:user:u2", 0, f.reset, "ms ok");
    /* Both, in any order with COST: five in ms, header seconds. */
    h = take_headers(px_cmd(c, "LIMITER PEEK org:acme:user:u2 HEADERS COST "
                               "1 MS"),
                     "peek both");
    cr_assert(h.v[0] == 0 && h.v[2] == 0 && h.v[3] == -1,
              "peek both: %lld %lld %lld", h.v[0], h.v[2], h.v[3]);
    expect_ms_of(c, "org:acme:user:u2", 1, h.v[4], "peek both");
    expect_ratelimit(&h, "org:*:user:*", 0, 119, 120, "peek both");

    /* A shadow level: in no header, never binds. beta (1 a day) would
     * refuse its second check; both are admitted, user:* binds. */
    h = take_headers(px_cmd(c, "LIMITER CHECK org:zeta:user:u9:beta HEADERS"),
                     "beta 1");
    cr_assert(h.v[0] == 0 && h.v[2] == 1);
    h = take_headers(px_cmd(c, "LIMITER CHECK org:zeta:user:u9:beta HEADERS"),
                     "beta 2");
    cr_assert(h.v[0] == 0 && h.v[2] == 0 && h.npairs == 2,
              "beta 2: %lld %lld %d", h.v[0], h.v[2], h.npairs);
    cr_assert_str_eq(h.value[0], POLICY);
    expect_ratelimit(&h, "org:*:user:*", 0, 119, 120, "beta 2");

    /* Bad input: each an error, nothing written. */
    px_check_error(px_cmd(c, "LIMITER CHECK org:new:user:n1 MS MS"),
                   "ERR syntax error: MS given more than once");
    px_check_error(px_cmd(c, "LIMITER CHECK org:new:user:n1 HEADERS COST 1 "
                             "headers"),
                   "ERR syntax error: HEADERS given more than once");
    px_check_error(px_cmd(c, "LIMITER PEEK org:new:user:n1 MS SECONDS"),
                   "ERR syntax error");
    px_check_error(px_cmd_admin(c, "LIMITER RESET org:acme:user:u1 MS"),
                   "ERR syntax error");
    f = px_take_five(px_cmd(c, "LIMITER PEEK org:new:user:n1 COST 0"),
                     "after errors");
    cr_assert(f.remaining == 2 && f.reset == 0,
              "n1 written: %lld left, reset %lld", f.remaining, f.reset);
    f = px_take_five(px_cmd(c, "LIMITER PEEK org:acme:user:u1 COST 0"),
                     "after reset ms");
    cr_assert(f.remaining == 0, "a RESET ... MS reset u1");
    redisFree(c);
}

/* CHECK ... WAIT HEADERS: the reply held for the reservation carries the
 * headers (w:* lets one through every 100 ms), and RESP3 gets the same
 * flat array. */
static void headers_wait_and_resp3(void)
{
    redisContext *c = px_connect(px_env()->proxy.port);
    struct hdr_reply h;

    h = take_headers(px_cmd(c, "LIMITER CHECK w:x HEADERS"), "w 1");
    cr_assert(h.v[0] == 0 && h.npairs == 2);
    cr_assert_str_eq(h.value[0], "\"w:*\";q=1;w=1");
    h = take_headers(px_cmd(c, "LIMITER CHECK w:x WAIT 5000 MS HEADERS"),
                     "w wait");
    cr_assert(h.v[0] == 0 && h.v[2] == 0 && h.v[3] == -1 && h.v[4] > 100 &&
                  h.v[4] <= 200,
              "w wait: %lld %lld %lld %lld", h.v[0], h.v[2], h.v[3], h.v[4]);
    cr_assert_eq(h.npairs, 2, "w wait: %d pairs", h.npairs);
    cr_assert_str_eq(h.value[0], "\"w:*\";q=1;w=1");

    redisFree(c);
    {
        static const char reqs[] = "HELLO 3\r\nLIMITER CHECK org:r3:user:u1 "
                                   "HEADERS\r\nQUIT\r\n";
        char want[256], got[4096];
        int fd = px_raw_connect(px_env()->proxy.port, 0), closed;
        size_t n;

        snprintf(want, sizeof(want),
                 "\r\n$16\r\nRateLimit-Policy\r\n$%zu\r\n%s\r\n$9\r\n"
                 "RateLimit\r\n",
                 strlen(POLICY), POLICY);
        cr_assert_eq(px_raw_send(fd, reqs, sizeof(reqs) - 1), 0);
        n = px_raw_read_to_close(fd, got, sizeof(got) - 1, 10000, &closed);
        close(fd);
        got[n] = '\0';
        /* After HELLO's map: the array of nine, the reset (the hour's
         * end) left out. */
        cr_assert(closed &&
                      strstr(got, "*9\r\n:0\r\n:2\r\n:1\r\n:-1\r\n:") != NULL &&
                      strstr(got, want) != NULL,
                  "RESP3: '%s', want '%s'", got, want);
    }
}

Test(it_limiter_headers, ms_headers_and_bad_input_embedded,
     .init = init_embedded, .fini = fini, .timeout = 60)
{
    headers_ms_and_bad_input();
    headers_wait_and_resp3();
}

Test(it_limiter_headers, ms_headers_and_bad_input_single, .init = init_single,
     .fini = fini, .timeout = 60)
{
    headers_ms_and_bad_input();
    headers_wait_and_resp3();
}

Test(it_limiter_headers, ms_headers_and_bad_input_across_cluster_slots,
     .init = init_cluster, .fini = fini, .timeout = 120)
{
    headers_ms_and_bad_input();
    headers_wait_and_resp3();
}
