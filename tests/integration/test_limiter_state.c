/* LIMITER's state format through the proxy (docs/limiter.md, "State"):
 * the gcra levels of every path under one hash tag live in one string, a
 * record "<L>:<field>=<value>;" per level whose value, a TAT, expires with
 * itself, the string expiring with its longest-lived record; a level of
 * another algorithm keeps its own key; and the upgrade from the previous
 * release's per-level keys never forgets a limit (limiter_read_old_keys).
 * The tests read Redis directly: this is the one place that knows the
 * format's bytes (the others go through lstate.h). */
#include "tests/integration/cluster_fixture.h"
#include "tests/integration/fixture.h"
#include "tests/integration/limiter_support.h"
#include "tests/support/px_test.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

PX_TEST_SUITE(it_limiter_state);

#define HOUR_MS INT64_C(3600000)
#define DAY_MS  INT64_C(86400000)

/* user:<id> shares a gcra level (2 at once, then 1 a minute) with its
 * trade path's (3 at once, then 3 an hour: INC 20 minutes); its day and
 * sec paths, under the same tag, 1 a day and 10 a second; its win path a
 * fixed window (3 an hour), which keeps a key of its own. tenant:<t> (100
 * a second) has users below a second "*" (1 a minute, their trade 2 at
 * once): the tenant's level is a record of its string, the users' levels
 * keys of their own. */
static const char state_yaml[] =
    "user:\n"
    "  children:\n"
    "    \"*\":\n"
    "      limits: [1, 1, 60]\n"
    "      children:\n"
    "        trade:\n"
    "          limits: [2, 3, 3600]\n"
    "        day:\n"
    "          limits: [0, 1, 86400]\n"
    "        sec:\n"
    "          limits: [9, 10, 1]\n"
    "        win:\n"
    "          limits:\n"
    "            - {algorithm: fixed_window, max: 3, window: 1h}\n"
    "tenant:\n"
    "  children:\n"
    "    \"*\":\n"
    "      limits: [99, 100, 1]\n"
    "      children:\n"
    "        user:\n"
    "          children:\n"
    "            \"*\":\n"
    "              limits: [0, 1, 60]\n"
    "              children:\n"
    "                trade:\n"
    "                  limits: [1, 2, 60]\n";

static void init_single(void)
{
    px_limits_start(PX_MODE_SINGLE, state_yaml, NULL);
}

static void init_single_new_only(void)
{
    px_limits_start(PX_MODE_SINGLE, state_yaml, "limiter_read_old_keys: no\n");
}

static void init_cluster(void)
{
    px_limits_start(PX_MODE_CLUSTER, state_yaml, NULL);
}

/* The node's clock in ms. */
static int64_t node_ms(redisContext *d)
{
    redisReply *r = px_cmd(d, "TIME");
    int64_t ms;

    cr_assert(r->type == REDIS_REPLY_ARRAY && r->elements == 2);
    ms = atoll(r->element[0]->str) * 1000 + atoll(r->element[1]->str) / 1000;
    freeReplyObject(r);
    return ms;
}

/* Asserts a check's reply says limited and remaining (the durations
 * depend on the clock). */
static void expect_check(redisContext *c, const char *path, long long limited,
                         long long remaining)
{
    struct px_five f = px_take_five(px_cmd(c, "LIMITER CHECK %s", path), path);

    cr_assert(f.limited == limited && f.remaining == remaining,
              "%s: limited %lld remaining %lld, want %lld %lld", path,
              f.limited, f.remaining, limited, remaining);
}

/* The direct connection to the node of identity `id`'s state string. */
static redisContext *node_of(const char *id)
{
    char key[128];
    redisContext *d;

    snprintf(key, sizeof(key), "cellgate:{user:%s}", id);
    d = px_direct_for(key, strlen(key));
    cr_assert_not_null(d);
    return d;
}

/* Room for a record's value. */
#define STATE_VALUE_MAX 256

/* The state string of user:<id>, as its records: how many there are, and
 * the value of the one of `field` (NULL: none asked) into value ("" when
 * absent). Asserts the string is records exactly as the format says:
 * "<L>:<field>=<value>;", L in decimal without a leading zero, a value
 * without ";", no field twice. A missing string has none. */
static int state_records(redisContext *d, const char *id, const char *field,
                         char value[STATE_VALUE_MAX])
{
    redisReply *r = px_cmd(d, "GET cellgate:{user:%s}", id);
    const char *p, *end;
    char seen[16][128];
    int n = 0;

    if (value != NULL) {
        value[0] = '\0';
    }
    if (r->type == REDIS_REPLY_NIL) {
        freeReplyObject(r);
        return 0;
    }
    cr_assert_eq(r->type, REDIS_REPLY_STRING, "user:%s: a string", id);
    cr_assert_gt(r->len, 0, "user:%s: an empty string is kept", id);
    for (p = r->str, end = r->str + r->len; p < end; n++) {
        char *colon;
        const char *semi;
        unsigned long l = strtoul(p, &colon, 10);

        cr_assert(*p >= '1' && *p <= '9' && colon < end && *colon == ':' &&
                      l < sizeof(seen[0]) && l < (size_t)(end - colon - 1) &&
                      colon[1 + l] == '=',
                  "user:%s: a malformed record at %zu of %s", id,
                  (size_t)(p - r->str), r->str);
        semi = memchr(colon + 2 + l, ';', (size_t)(end - colon - 2 - l));
        cr_assert_not_null(semi, "user:%s: a value without ';': %s", id,
                           r->str);
        cr_assert_lt(n, 16);
        memcpy(seen[n], colon + 1, l);
        seen[n][l] = '\0';
        for (int i = 0; i < n; i++) {
            cr_assert_str_neq(seen[i], seen[n], "user:%s: %s twice", id,
                              seen[n]);
        }
        if (field != NULL && strcmp(seen[n], field) == 0) {
            size_t vl = (size_t)(semi - colon - 2 - l);
            cr_assert_lt(vl, STATE_VALUE_MAX);
            memcpy(value, colon + 2 + l, vl);
            value[vl] = '\0';
        }
        p = semi + 1;
    }
    freeReplyObject(r);
    return n;
}

/* The record "<L>:<field>=<value>;" of `field`, into out. */
static void state_record(char *out, size_t outlen, const char *field,
                         const char *value)
{
    int n = snprintf(out, outlen, "%zu:%s=%s;", strlen(field), field, value);

    cr_assert(n > 0 && (size_t)n < outlen);
}

/* Plants the previous release's per-level keys of user:<id>:trade, as it
 * wrote them, each its TAT expiring at the TAT, one call left at each:
 * the user level's a minute ahead, the trade level's 40 minutes. */
static void plant_old_keys(redisContext *d, const char *id)
{
    int64_t now = node_ms(d);

    px_check_status(
        px_cmd(d, "SET cellgate:{user:%s}#0:gcra %" PRId64 "000000 PX 60000",
               id, now + 60000),
        "OK");
    px_check_status(px_cmd(d,
                           "SET cellgate:{user:%s}:trade#0:gcra %" PRId64
                           "000000 PX 2400000",
                           id, now + 2400000),
                    "OK");
}

/* Asserts the state string of user:<id> holds exactly `n` records and,
 * with n > 0, the two of its trade path. */
static void expect_state(redisContext *d, const char *id, int n)
{
    char v[STATE_VALUE_MAX];

    cr_assert_eq(state_records(d, id, NULL, NULL), n, "user:%s: records", id);
    if (n > 0) {
        state_records(d, id, "#0:gcra", v);
        cr_assert_neq(v[0], '\0', "user:%s: no user record", id);
        state_records(d, id, ":trade#0:gcra", v);
        cr_assert_neq(v[0], '\0', "user:%s: no trade record", id);
    }
}

/* An upgrade: the identity's old keys count. Its first check takes the
 * last call both levels had (a fresh state would leave 1), moving them
 * into the hash (the old keys go); the next is refused. */
Test(it_limiter_state, an_upgrade_never_forgets_a_limit, .init = init_single,
     .fini = px_env_fini, .timeout = 30)
{
    redisContext *c = px_connect(px_env()->proxy.port), *d = node_of("old");

    plant_old_keys(d, "old");
    expect_check(c, "user:old:trade", 0, 0);
    expect_state(d, "old", 2);
    px_check_int(px_cmd(d, "EXISTS cellgate:{user:old}#0:gcra "
                           "cellgate:{user:old}:trade#0:gcra"),
                 0);
    expect_check(c, "user:old:trade", 1, 0);
    /* A refused check of an identity whose old keys are still there (the
     * states stay where they are until a check writes). */
    plant_old_keys(d, "rf");
    px_check_status(
        px_cmd(d, "SET cellgate:{user:rf}#0:gcra %" PRId64 "000000 PX 120000",
               node_ms(d) + 120000),
        "OK");
    expect_check(c, "user:rf:trade", 1, 0);
    px_check_int(px_cmd(d, "EXISTS cellgate:{user:rf}#0:gcra"), 1);
    redisFree(d);
    redisFree(c);
}

/* limiter_read_old_keys: no: the old keys are neither read nor deleted. */
Test(it_limiter_state, without_the_lookup_old_keys_are_ignored,
     .init = init_single_new_only, .fini = px_env_fini, .timeout = 30)
{
    redisContext *c = px_connect(px_env()->proxy.port), *d = node_of("new");

    plant_old_keys(d, "new");
    expect_check(c, "user:new:trade", 0, 1);
    expect_state(d, "new", 2);
    px_check_int(px_cmd(d, "EXISTS cellgate:{user:new}#0:gcra "
                           "cellgate:{user:new}:trade#0:gcra"),
                 2);
    redisFree(d);
    redisFree(c);
}

/* The record of `field` in user:<id>'s string: a TAT of 19 digits, and
 * its ms (its expiry). */
static int64_t tat_ms(redisContext *d, const char *id, const char *field)
{
    char v[STATE_VALUE_MAX];

    state_records(d, id, field, v);
    cr_assert(strlen(v) == 19 && strspn(v, "0123456789") == 19,
              "user:%s %s: %s", id, field, v);
    return atoll(v) / 1000000;
}

/* The string's expiry (PEXPIRETIME) of user:<id>. */
static long long string_expiry(redisContext *d, const char *id)
{
    redisReply *r = px_cmd(d, "PEXPIRETIME cellgate:{user:%s}", id);
    long long at;

    cr_assert_eq(r->type, REDIS_REPLY_INTEGER);
    at = r->integer;
    freeReplyObject(r);
    return at;
}

/* A check of two levels leaves one key, the identity's state string,
 * with a record each, its TAT alone (19 digits, expiring at its ms); the
 * string expires with its latest record. A level of another algorithm (a
 * fixed window) keeps its key beside it. */
static void two_levels_one_string(const char *id)
{
    redisContext *c = px_connect(px_env()->proxy.port), *d = node_of(id);
    int64_t before = node_ms(d), user, trade;
    char pattern[64], path[64], v[STATE_VALUE_MAX];
    redisReply *r;

    snprintf(path, sizeof(path), "user:%s:trade", id);
    expect_check(c, path, 0, 1);
    snprintf(pattern, sizeof(pattern), "*{user:%s}*", id);
    r = px_cmd(d, "KEYS %s", pattern);
    cr_assert(r->type == REDIS_REPLY_ARRAY && r->elements == 1,
              "%zu keys of the identity", r->elements);
    snprintf(path, sizeof(path), "cellgate:{user:%s}", id);
    cr_assert_str_eq(r->element[0]->str, path);
    freeReplyObject(r);
    expect_state(d, id, 2);
    /* 2 at once, 1 a minute: a minute ahead; 3 at once, 3 an hour: 20
     * minutes ahead. */
    user = tat_ms(d, id, "#0:gcra");
    trade = tat_ms(d, id, ":trade#0:gcra");
    cr_assert(user >= before + 59000 && user <= node_ms(d) + 60000,
              "user's TAT at %" PRId64 ", checked at %" PRId64, user, before);
    cr_assert(trade >= before + 1199000 && trade <= node_ms(d) + 1200000,
              "trade's TAT at %" PRId64 ", checked at %" PRId64, trade, before);
    cr_assert_eq(string_expiry(d, id), trade,
                 "the string expires with its latest record");
    /* The fixed window (under the user level's last call): a hash of its
     * own; the string's records as they were. */
    snprintf(path, sizeof(path), "user:%s:win", id);
    expect_check(c, path, 0, 0);
    r = px_cmd(d, "TYPE cellgate:{user:%s}:win#0:fixed_window", id);
    cr_assert(r->type == REDIS_REPLY_STATUS && strcmp(r->str, "hash") == 0,
              "the window's key is a %s", r->str);
    freeReplyObject(r);
    cr_assert_eq(state_records(d, id, ":win#0:fixed_window", v), 2);
    cr_assert_eq(v[0], '\0', "a window record in the string");
    redisFree(d);
    redisFree(c);
}

Test(it_limiter_state, two_levels_are_one_string_single, .init = init_single,
     .fini = px_env_fini, .timeout = 30)
{
    two_levels_one_string("bob");
}

Test(it_limiter_state, two_levels_are_one_string_cluster, .init = init_cluster,
     .fini = px_env_fini, .timeout = 60)
{
    two_levels_one_string("bob");
}

/* A record past its expire_at reads as absent even while its string
 * lives: a trade level planted with no call left, but expired, admits as a
 * fresh one (2 left); alive, it refuses. (The "<expire_at>|<TAT>" form:
 * a record whose expiry is not its TAT's.) */
Test(it_limiter_state, an_expired_record_reads_as_fresh, .init = init_single,
     .fini = px_env_fini, .timeout = 30)
{
    redisContext *c = px_connect(px_env()->proxy.port), *d = node_of("exp");
    int64_t now = node_ms(d);
    char v[STATE_VALUE_MAX], rec[STATE_VALUE_MAX];

    snprintf(v, sizeof(v), "%" PRId64 "|%" PRId64 "000000", now - 1000,
             now + 3600000);
    state_record(rec, sizeof(rec), ":trade#0:gcra", v);
    px_check_status(px_cmd(d, "SET cellgate:{user:exp} %s PX 3600000", rec),
                    "OK");
    expect_check(c, "user:exp:trade", 0, 1);
    /* The same state alive refuses. */
    px_check_int(px_cmd(d, "DEL cellgate:{user:exp}"), 1);
    snprintf(v, sizeof(v), "%" PRId64 "|%" PRId64 "000000", now + 3600000,
             now + 3600000);
    state_record(rec, sizeof(rec), ":trade#0:gcra", v);
    px_check_status(px_cmd(d, "SET cellgate:{user:exp} %s PX 3600000", rec),
                    "OK");
    expect_check(c, "user:exp:trade", 1, 0);
    redisFree(d);
    redisFree(c);
}

/* A short-lived record never shortens the string: a day's record (1 a
 * day), then many checks of 10 a second under the same tag (another path,
 * so their groups never read the day's record): the string still expires
 * at the day's TAT. */
Test(it_limiter_state, the_string_lives_as_long_as_its_longest_record,
     .init = init_single, .fini = px_env_fini, .timeout = 30)
{
    redisContext *c = px_connect(px_env()->proxy.port), *d = node_of("ttl");
    int64_t day;

    expect_check(c, "user:ttl:day", 0, 0);
    for (int i = 0; i < 30; i++) {
        redisAppendCommand(c, "LIMITER CHECK user:ttl:sec");
    }
    for (int i = 0; i < 30; i++) {
        freeReplyObject(px_next(c));
    }
    tat_ms(d, "ttl", ":sec#0:gcra");
    day = tat_ms(d, "ttl", ":day#0:gcra");
    cr_assert_gt(day, node_ms(d) + 3600000, "the day ends within an hour");
    cr_assert_eq(string_expiry(d, "ttl"), day,
                 "the string expires with its daily record");
    redisFree(d);
    redisFree(c);
}

/* The key of a level of tenant:acme's users, and its state: a TAT alone
 * (19 digits) expiring within the level's minute. */
static void expect_own_key(redisContext *d, const char *rest)
{
    redisReply *r = px_cmd(d, "GET cellgate:{tenant:acme}%s#0:gcra", rest);

    cr_assert(r->type == REDIS_REPLY_STRING && r->len == 19 &&
                  strspn(r->str, "0123456789") == 19,
              "%s: no TAT at a key of its own", rest);
    freeReplyObject(r);
    r = px_cmd(d, "PTTL cellgate:{tenant:acme}%s#0:gcra", rest);
    cr_assert(r->type == REDIS_REPLY_INTEGER && r->integer > 0 &&
                  r->integer <= 60000,
              "%s: PTTL %lld", rest, r->integer);
    freeReplyObject(r);
}

/* A second "*" below the identity's: the users of one tenant never share
 * a string. Twenty users leave the tenant's string its one record, and a
 * key each; a user's own state refuses it alone; its trade path keeps a
 * key too; RESET deletes the path's record and key. */
static void sub_identities_keep_keys(void)
{
    const char *tag = "cellgate:{tenant:acme}";
    redisContext *c = px_connect(px_env()->proxy.port),
                 *d = px_direct_for(tag, strlen(tag));
    char path[64];
    redisReply *r;

    cr_assert_not_null(d);
    for (int i = 0; i < 20; i++) {
        snprintf(path, sizeof(path), "tenant:acme:user:u%d", i);
        expect_check(c, path, 0, 0);
    }
    expect_check(c, "tenant:acme:user:u3", 1, 0);
    expect_check(c, "tenant:acme:user:u30:trade", 0, 0);
    r = px_cmd(d, "GET %s", tag);
    cr_assert(r->type == REDIS_REPLY_STRING && r->len == 30 &&
                  strncmp(r->str, "7:#0:gcra=", 10) == 0 &&
                  strspn(r->str + 10, "0123456789") == 19 && r->str[29] == ';',
              "the tenant's string holds more than its record: %s",
              r->type == REDIS_REPLY_STRING ? r->str : "(none)");
    freeReplyObject(r);
    for (int i = 0; i < 20; i++) {
        snprintf(path, sizeof(path), ":user:u%d", i);
        expect_own_key(d, path);
    }
    expect_own_key(d, ":user:u30");
    expect_own_key(d, ":user:u30:trade");
    r = px_cmd(d, "KEYS *{tenant:acme}*");
    cr_assert(r->type == REDIS_REPLY_ARRAY && r->elements == 23,
              "%zu keys of the tenant", r->elements);
    freeReplyObject(r);
    /* The tenant's record and u3's key. */
    px_check_int(px_cmd_admin(c, "LIMITER RESET tenant:acme:user:u3"), 2);
    px_check_int(px_cmd(d, "EXISTS cellgate:{tenant:acme}:user:u3#0:gcra"), 0);
    expect_check(c, "tenant:acme:user:u3", 0, 0);
    redisFree(d);
    redisFree(c);
}

Test(it_limiter_state, a_second_wildcard_keeps_keys_of_its_own_single,
     .init = init_single, .fini = px_env_fini, .timeout = 30)
{
    sub_identities_keep_keys();
}

Test(it_limiter_state, a_second_wildcard_keeps_keys_of_its_own_cluster,
     .init = init_cluster, .fini = px_env_fini, .timeout = 60)
{
    sub_identities_keep_keys();
}
