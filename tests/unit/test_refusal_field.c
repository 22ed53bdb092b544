/* The refusal cache's reading of LIMITER's state strings
 * (proxy/limiter/refusal_field.h): which keys live in a string, a record, its
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
    cr_assert_eq(hlen("cellgate:{user:42}:trade#1:gcra"),
                 strlen("cellgate:{user:42}"));
    cr_assert_eq(hlen("p:{a{b}:x#12:gcra"), strlen("p:{a{b}"));
    cr_assert_eq(hlen("{t}#0:gcra"), 3);
    /* Hash states and sorted sets keep their keys; no tag, an empty tag,
     * no index. */
    cr_assert_eq(hlen("cellgate:{user:42}:trade#1:fixed_window"), 0);
    cr_assert_eq(hlen("{t}#0:token_bucket"), 0);
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
    static const char t[] = "1700000001000123456";
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
    /* A TAT alone expires at its ms. */
    cr_assert_eq(refusal_field_value(t, strlen(t), &ms, &pl, &n), 1);
    cr_assert_eq(ms, INT64_C(1700000001000));
    cr_assert(pl == t && n == 19);
    cr_assert_eq(refusal_field_value("1700000001000x23456", 19, &ms, &pl, &n),
                 0);
    cr_assert_eq(refusal_field_value("0700000001000123456", 19, &ms, &pl, &n),
                 0);
    /* No bar and too short a TAT, a signed, padded or empty expiry, too
     * large. */
    cr_assert_eq(refusal_field_value("123", 3, &ms, &pl, &n), 0);
    cr_assert_eq(refusal_field_value("-1|x", 4, &ms, &pl, &n), 0);
    cr_assert_eq(refusal_field_value("01|x", 4, &ms, &pl, &n), 0);
    cr_assert_eq(refusal_field_value("|x", 2, &ms, &pl, &n), 0);
    cr_assert_eq(refusal_field_value("9007199254740992|x", 18, &ms, &pl, &n),
                 0);
}

/* refusal_field_record on a NUL-ended string: 1, 0 or -1, and the value
 * found into out (as a NUL-ended copy, "" when none). */
static int rec(const char *s, const char *field, char *out, size_t outlen)
{
    const char *v = NULL;
    size_t vl = 0;
    int r = refusal_field_record(s, strlen(s), field, strlen(field), &v, &vl);

    out[0] = '\0';
    if (r == 1) {
        cr_assert(v >= s && v + vl <= s + strlen(s));
        cr_assert_lt(vl, outlen);
        memcpy(out, v, vl);
        out[vl] = '\0';
    }
    return r;
}

Test(refusal_field, a_state_string_is_records_found_by_field)
{
    static const char s[] = "7:#0:gcra=1796010925449|1796010925449961000;"
                            "13::trade#0:gcra=1796010745449|17960107454;"
                            "17::x#1:fixed_window=0|start=1,count=2;";
    char v[128];

    cr_assert_eq(rec(s, "#0:gcra", v, sizeof(v)), 1);
    cr_assert_str_eq(v, "1796010925449|1796010925449961000");
    cr_assert_eq(rec(s, ":trade#0:gcra", v, sizeof(v)), 1);
    cr_assert_str_eq(v, "1796010745449|17960107454");
    cr_assert_eq(rec(s, ":x#1:fixed_window", v, sizeof(v)), 1);
    cr_assert_str_eq(v, "0|start=1,count=2");
    /* Absent: another field, one that ends or starts another's, a
     * record's value taken for a field. */
    cr_assert_eq(rec(s, "#1:gcra", v, sizeof(v)), 0);
    cr_assert_eq(rec(s, "0:gcra", v, sizeof(v)), 0);
    cr_assert_eq(rec(s, "#0:gc", v, sizeof(v)), 0);
    cr_assert_eq(rec(s, ":trade#0:gcra=", v, sizeof(v)), 0);
    cr_assert_eq(rec(s, "1796010925449", v, sizeof(v)), 0);
    cr_assert_eq(rec("", "#0:gcra", v, sizeof(v)), 0);
    /* A field may hold any byte: its length delimits it. */
    cr_assert_eq(rec("3:a;b=1|x;5:=;:=x=0|y;", "=;:=", v, sizeof(v)), 0);
    cr_assert_eq(rec("3:a;b=1|x;4:=;:==0|y;", "=;:=", v, sizeof(v)), 1);
    cr_assert_str_eq(v, "0|y");
    cr_assert_eq(rec("3:a;b=1|x;4:=;:==0|y;", "a;b", v, sizeof(v)), 1);
    cr_assert_str_eq(v, "1|x");
    cr_assert_eq(rec("0:=;", "", v, sizeof(v)), 1);
    cr_assert_str_eq(v, "");
}

Test(refusal_field, a_malformed_state_string_holds_nothing)
{
    static const char *const bad[] = {
        "07:#0:gcra=1|2;",              /* L with a leading zero */
        "8:#0:gcra=1|2;",               /* L past its field */
        "99:#0:gcra=1|2;",              /* L past the end */
        "1234567890:x=1|2;",            /* L of 10 digits */
        "7:#0:gcra=1|2",                /* a value with no ";" */
        "7:#0:gcra=1|2;2:ab=1|2",       /* the last one's */
        "7:#0:gcra1|2;",                /* no "=" */
        ":#0:gcra=1|2;",                /* no L */
        "7#0:gcra=1|2;",                /* no ":" */
        "7:#0:gcra=1|2;;",              /* a stray byte after a record */
        "7:#0:gcra=1|2;7:#0:gcra=3|4;", /* a field twice */
        "7:",
    };
    char v[64];

    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
        int r = rec(bad[i], "#0:gcra", v, sizeof(v));
        if (r != -1) {
            cr_assert_fail("\"%s\" gives %d", bad[i], r);
        }
    }
    /* Malformed after the record sought, or before it. */
    cr_assert_eq(rec("7:#0:gcra=1|2;2:ab", "#0:gcra", v, sizeof(v)), -1);
    cr_assert_eq(rec("2:ab=1;7:#0:gcra=1|2;x", "#0:gcra", v, sizeof(v)), -1);
}
