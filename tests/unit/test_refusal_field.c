/* The refusal cache's reading of LIMITER's hash fields
 * (proxy/limiter/refusal_field.h): which keys live in a hash, a field's
 * expiry and payload, a hash state's pairs. */
#include "tests/support/px_test.h"

#include <string.h>

#include "proxy/limiter/refusal_field.h"

PX_TEST_SUITE(refusal_field);

static size_t hlen(const char *key)
{
    return refusal_field_hash_len(key, strlen(key));
}

Test(refusal_field, the_hash_is_the_key_up_to_its_tag)
{
    cr_assert_eq(hlen("cellgate:{user:42}#0:gcra"),
                 strlen("cellgate:{user:42}"));
    cr_assert_eq(hlen("cellgate:{user:42}:trade#1:fixed_window"),
                 strlen("cellgate:{user:42}"));
    cr_assert_eq(hlen("p:{a{b}:x#12:sliding_window"), strlen("p:{a{b}"));
    cr_assert_eq(hlen("{t}#0:token_bucket"), 3);
    /* Sorted sets keep their keys; no tag, an empty tag, no index. */
    cr_assert_eq(hlen("cellgate:{u}#0:sliding_log"), 0);
    cr_assert_eq(hlen("cellgate:{u}#0:concurrency"), 0);
    cr_assert_eq(hlen("cellgate:u#0:gcra"), 0);
    cr_assert_eq(hlen("cellgate:{}#0:gcra"), 0);
    cr_assert_eq(hlen("cellgate:{u}#:gcra"), 0);
    cr_assert_eq(hlen("cellgate:{u}0:gcra"), 0);
    cr_assert_eq(hlen("cellgate:{u}#0:gcrax"), 0);
    cr_assert_eq(hlen("cellgate:{u}#overrides"), 0);
    cr_assert_eq(hlen("cellgate:{u#0:gcra"), 0);
}

Test(refusal_field, a_value_is_its_expiry_and_payload)
{
    static const char v[] = "1700000000123|1700000001000000000";
    const char *pl;
    size_t n;
    int64_t ms;

    cr_assert_eq(refusal_field_value(v, strlen(v), &ms, &pl, &n), 1);
    cr_assert_eq(ms, INT64_C(1700000000123));
    cr_assert_eq(n, 19);
    cr_assert_eq(memcmp(pl, "1700000001000000000", n), 0);
    cr_assert_eq(refusal_field_value("0|x", 3, &ms, &pl, &n), 1);
    cr_assert_eq(ms, 0);
    cr_assert_eq(refusal_field_value("1|", 2, &ms, &pl, &n), 1);
    cr_assert_eq(n, 0);
    /* No bar, a signed, padded or empty expiry, too large. */
    cr_assert_eq(refusal_field_value("123", 3, &ms, &pl, &n), 0);
    cr_assert_eq(refusal_field_value("-1|x", 4, &ms, &pl, &n), 0);
    cr_assert_eq(refusal_field_value("01|x", 4, &ms, &pl, &n), 0);
    cr_assert_eq(refusal_field_value("|x", 2, &ms, &pl, &n), 0);
    cr_assert_eq(refusal_field_value("9007199254740992|x", 18, &ms, &pl, &n),
                 0);
}

Test(refusal_field, a_payload_is_name_value_pairs)
{
    static const char pl[] = "start=1700000000000000,count=5,prev=";
    const char *p = pl, *end = pl + strlen(pl), *name, *val;
    size_t nl, vl;

    cr_assert_eq(refusal_field_pair(&p, end, &name, &nl, &val, &vl), 1);
    cr_assert(nl == 5 && memcmp(name, "start", 5) == 0);
    cr_assert_eq(refusal_field_int(val, vl), INT64_C(1700000000000000));
    cr_assert_eq(refusal_field_pair(&p, end, &name, &nl, &val, &vl), 1);
    cr_assert(nl == 5 && memcmp(name, "count", 5) == 0 && vl == 1);
    cr_assert_eq(refusal_field_pair(&p, end, &name, &nl, &val, &vl), 1);
    cr_assert(nl == 4 && vl == 0);
    cr_assert_eq(refusal_field_int(val, vl), -1);
    cr_assert_eq(refusal_field_pair(&p, end, &name, &nl, &val, &vl), 0);
    p = "count";
    cr_assert_eq(refusal_field_pair(&p, p + 5, &name, &nl, &val, &vl), -1);
    p = "=5";
    cr_assert_eq(refusal_field_pair(&p, p + 2, &name, &nl, &val, &vl), -1);
}

Test(refusal_field, a_hash_state_reads_its_named_fields)
{
    static const char *const names[] = { "start", "count", NULL };
    static const char pl[] = "count=7,start=1700000000000000,extra=x";
    int64_t f[2], slots[8];

    cr_assert_eq(refusal_field_hash(pl, strlen(pl), names, 2, f), 1);
    cr_assert_eq(f[0], INT64_C(1700000000000000));
    cr_assert_eq(f[1], 7);
    cr_assert_eq(refusal_field_hash("start=1", 7, names, 2, f), 0);
    cr_assert_eq(refusal_field_hash("start=1,count=-1", 16, names, 2, f), 0);
    cr_assert_eq(refusal_field_hash("start=1,count", 13, names, 2, f), 0);
    /* A sliding window: slots, "total" left out, at most max. */
    cr_assert_eq(refusal_field_slots("1000=2,total=5,2000=3", 21, slots, 4), 2);
    cr_assert(slots[0] == 1000 && slots[1] == 2 && slots[2] == 2000 &&
              slots[3] == 3);
    cr_assert_eq(refusal_field_slots("1000=2,2000=3", 13, NULL, 1), 0);
    cr_assert_eq(refusal_field_slots("total=5", 7, NULL, 4), 0);
    cr_assert_eq(refusal_field_slots("x=5", 3, NULL, 4), 0);
}
