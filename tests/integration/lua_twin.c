/* Calls of algorithms/limiter.lua for the differential tests (see the
 * header). The script is called exactly as the proxy calls it, except for
 * the explicit clock, with an override hash that is never set. */
#include "tests/integration/lua_twin.h"

#include "tests/integration/fixture.h"
#include "tests/integration/lstate.h"

#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "algorithms/scripts.h"

#define TWIN_ARGC 16 /* EVALSHA sha 2 key ovr mode now cost +6 +m */

/* Most shared parts one library pastes, and the longest part name. */
#define TWIN_PARTS_MAX 32
#define TWIN_PART_NAME 32

int lua_twin_function_form(void)
{
    const char *v = getenv("PX_LUA_FORM");

    return v != NULL && strcmp(v, "function") == 0;
}

int lua_twin_head(const char **v, const char *name, int function)
{
    int gcra = strcmp(name, "gcra") == 0;

    cr_assert(gcra || strcmp(name, "limiter") == 0, "no script %s", name);
    if (function) {
        v[0] = "FCALL";
        v[1] = gcra ? LUA_TWIN_FN_PREFIX "gcra" : LUA_TWIN_FN_PREFIX "limiter";
    } else {
        v[0] = "EVALSHA";
        v[1] = scripts_find(name)->sha1;
    }
    return 2;
}

int lua_twin_limiter_head(const char **v)
{
    return lua_twin_head(v, "limiter", lua_twin_function_form());
}

/* A growing text. */
struct twin_text {
    char *p;
    size_t len, cap;
};

static void twin_text_add(struct twin_text *t, const char *s, size_t n)
{
    if (t->len + n + 1 > t->cap) {
        t->cap = (t->len + n + 1) * 2;
        t->p = realloc(t->p, t->cap);
        cr_assert_not_null(t->p);
    }
    memcpy(t->p + t->len, s, n);
    t->len += n;
    t->p[t->len] = '\0';
}

static void twin_text_str(struct twin_text *t, const char *s)
{
    twin_text_add(t, s, strlen(s));
}

/* The whole file at PX_SOURCE_DIR/<rel>, NUL-ended (caller frees). */
static char *twin_source(const char *rel)
{
    char path[PX_PATH_MAX];
    struct twin_text t = { 0 };
    char buf[4096];
    size_t n;
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", PX_SOURCE_DIR, rel);
    f = fopen(path, "rb");
    cr_assert_not_null(f, "cannot open %s", path);
    twin_text_add(&t, "", 0);
    while ((n = fread(buf, 1, sizeof(buf), f)) > 0) {
        twin_text_add(&t, buf, n);
    }
    fclose(f);
    return t.p;
}

/* What the library has pasted so far. */
struct twin_parts {
    char name[TWIN_PARTS_MAX][TWIN_PART_NAME];
    int n;
};

static void twin_expand(struct twin_text *out, const char *text,
                        struct twin_parts *seen);

/* One load-time line (with its newline): "--#include <part>" is replaced
 * by algorithms/lua/<part>.lua the first time the library names it and
 * dropped after; any other line is kept. */
static void twin_expand_line(struct twin_text *out, const char *line, size_t n,
                             struct twin_parts *seen)
{
    static const char inc[] = "--#include ";
    size_t k = sizeof(inc) - 1, nlen = n;
    char rel[PX_PATH_MAX];

    if (nlen > 0 && line[nlen - 1] == '\n') {
        nlen--;
    }
    if (nlen <= k || memcmp(line, inc, k) != 0 ||
        strspn(line + k, "abcdefghijklmnopqrstuvwxyz_") != nlen - k) {
        twin_text_add(out, line, n);
        return;
    }
    cr_assert_lt(nlen - k, TWIN_PART_NAME, "part name too long");
    for (int i = 0; i < seen->n; i++) {
        if (strlen(seen->name[i]) == nlen - k &&
            memcmp(seen->name[i], line + k, nlen - k) == 0) {
            return;
        }
    }
    cr_assert_lt(seen->n, TWIN_PARTS_MAX, "too many parts");
    memcpy(seen->name[seen->n], line + k, nlen - k);
    seen->name[seen->n][nlen - k] = '\0';
    snprintf(rel, sizeof(rel), "algorithms/lua/%s.lua", seen->name[seen->n]);
    seen->n++;
    char *part = twin_source(rel);
    twin_expand(out, part, seen);
    free(part);
}

static void twin_expand(struct twin_text *out, const char *text,
                        struct twin_parts *seen)
{
    while (*text != '\0') {
        const char *nl = strchr(text, '\n');
        size_t n = nl != NULL ? (size_t)(nl - text) + 1 : strlen(text);
        twin_expand_line(out, text, n, seen);
        text += n;
    }
}

char *lua_twin_library(size_t *len)
{
    static const char *const entry[] = { "gcra", "limiter" };
    enum { NENTRY = sizeof(entry) / sizeof(*entry) };
    struct twin_text out = { 0 }, body[NENTRY];
    struct twin_parts seen = { .n = 0 };
    char rel[PX_PATH_MAX], line[256];

    memset(body, 0, sizeof(body));
    twin_text_str(&out, "#!lua name=" LUA_TWIN_LIBRARY "\n");
    for (size_t e = 0; e < NENTRY; e++) {
        snprintf(rel, sizeof(rel), "algorithms/%s.lua", entry[e]);
        char *text = twin_source(rel);
        const char *at = strstr(text, "\n--#call\n");
        cr_assert_not_null(at, "%s: no --#call line", rel);
        cr_assert_null(strstr(at + 8, "\n--#call\n"), "%s: two --#call", rel);
        /* The load-time part, its newline included. */
        char *head = strndup(text, (size_t)(at - text) + 1);
        cr_assert_not_null(head);
        twin_expand(&out, head, &seen);
        free(head);
        twin_text_str(&body[e], at + 1 + 8);
        free(text);
    }
    for (size_t e = 0; e < NENTRY; e++) {
        snprintf(line, sizeof(line), "local function %s_call(KEYS, ARGV)\n",
                 entry[e]);
        twin_text_str(&out, line);
        twin_text_add(&out, body[e].p, body[e].len);
        twin_text_str(&out, "end\n");
        free(body[e].p);
    }
    for (size_t e = 0; e < NENTRY; e++) {
        snprintf(line, sizeof(line),
                 "redis.register_function{function_name = '" LUA_TWIN_FN_PREFIX
                 "%s', callback = function(keys, args) return %s_call(keys, "
                 "args) end, flags = {'allow-cross-slot-keys'}}\n",
                 entry[e], entry[e]);
        twin_text_str(&out, line);
    }
    *len = out.len;
    return out.p;
}

void lua_twin_load_library(redisContext *c)
{
    size_t len;
    char *lib = lua_twin_library(&len);

    px_check_str(px_cmd(c, "FUNCTION LOAD REPLACE %b", lib, len),
                 LUA_TWIN_LIBRARY);
    free(lib);
}

redisContext *lua_twin_connect(void)
{
    redisContext *c = px_redis_connect(&px_env()->redis, NULL);
    const struct scripts_lua *s = scripts_limiter();

    px_check_str(px_cmd(c, "SCRIPT LOAD %b", s->body, s->len), s->sha1);
    if (lua_twin_function_form()) {
        lua_twin_load_library(c);
    }
    return c;
}

/* An integer reply element, or a decimal bulk string (the script sends
 * durations of 2^53 us and more as text). */
int64_t lua_twin_reply_int(const redisReply *r, const char *ctx)
{
    if (r->type == REDIS_REPLY_INTEGER) {
        return r->integer;
    }
    cr_assert_eq(r->type, REDIS_REPLY_STRING, "%s: element type %d", ctx,
                 r->type);
    char *end;
    long long v = strtoll(r->str, &end, 10);
    cr_assert(end == r->str + r->len && r->len > 0, "%s: '%s' is no integer",
              ctx, r->str);
    return v;
}

/* The checks' WAIT (lua_twin_set_wait): test state, one walk at a time. */
static int64_t lua_twin_wait_us;

void lua_twin_set_wait(int64_t wait_us)
{
    lua_twin_wait_us = wait_us;
}

int64_t lua_twin_wait(void)
{
    return lua_twin_wait_us;
}

void lua_twin_append(redisContext *c, const char *mode, const char *key,
                     const char *algo, const char *const p[4], int64_t now_us,
                     int64_t cost, const char *undo)
{
    char now[24] = "", costs[48];
    const char *argv[TWIN_ARGC];
    int argc = 0;

    if (now_us >= 0) {
        snprintf(now, sizeof(now), "%" PRId64, now_us);
    }
    if (lua_twin_wait_us > 0 && strcmp(mode, "check") == 0) {
        snprintf(costs, sizeof(costs), "%" PRId64 ":%" PRId64, cost,
                 lua_twin_wait_us);
    } else {
        snprintf(costs, sizeof(costs), "%" PRId64, cost);
    }
    argc += lua_twin_limiter_head(argv);
    argv[argc++] = "2";
    argv[argc++] = key;
    argv[argc++] = "lua-twin-test#overrides";
    argv[argc++] = mode;
    argv[argc++] = now;
    argv[argc++] = costs;
    argv[argc++] = algo;
    for (int i = 0; i < 4; i++) {
        argv[argc++] = p[i] != NULL ? p[i] : "";
    }
    argv[argc++] = undo != NULL ? undo : "";
    argv[argc++] = "0";
    /* hiredis copies the arguments into its output buffer. */
    cr_assert_eq(redisAppendCommandArgv(c, argc, argv, NULL), REDIS_OK,
                 "EVALSHA: %s", c->errstr);
}

int lua_twin_parse(const redisReply *r, const char *mode, const char *ctx,
                   struct lua_twin_out *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    if (r->type == REDIS_REPLY_ERROR) {
        snprintf(err, errlen, "%s", r->str);
        return -1;
    }
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "%s %s: reply type %d", mode, ctx,
                 r->type);
    cr_assert_geq(r->elements, 3, "%s %s: elements", mode, ctx);
    out->now_us = r->element[1]->integer * 1000000 + r->element[2]->integer;
    if (strcmp(mode, "refund") == 0) {
        cr_assert_eq(r->elements, 3, "refund %s: elements", ctx);
        return 0;
    }
    cr_assert_eq(r->elements, 4, "%s %s: elements", mode, ctx);
    const redisReply *e = r->element[3];
    cr_assert_eq(e->type, REDIS_REPLY_ARRAY, "%s %s: entry type", mode, ctx);
    if (e->elements == 1) {
        /* gcra's: the stored TAT as read (or nil), of which the caller
         * computes the rest; the limited flag is the call's. */
        cr_assert(e->element[0]->type == REDIS_REPLY_STRING ||
                      e->element[0]->type == REDIS_REPLY_NIL,
                  "%s %s: entry type", mode, ctx);
        out->limited = (int)r->element[0]->integer;
        return 0;
    }
    cr_assert_eq(e->elements, 6, "%s %s: entry elements", mode, ctx);
    out->limited = (int)lua_twin_reply_int(e->element[0], ctx);
    cr_assert_eq(e->element[5]->type, REDIS_REPLY_STRING, "%s: undo type", ctx);
    /* The call's flag is the entry's, but for a WAIT reservation: limited
     * with its undo token (it took its cost), the call admitted. */
    cr_assert(r->element[0]->integer == out->limited ||
                  (r->element[0]->integer == 0 && e->element[5]->len > 0),
              "%s %s: limited", mode, ctx);
    out->limit = lua_twin_reply_int(e->element[1], ctx);
    out->remaining = lua_twin_reply_int(e->element[2], ctx);
    out->retry_us = lua_twin_reply_int(e->element[3], ctx);
    out->reset_us = lua_twin_reply_int(e->element[4], ctx);
    cr_assert_eq(e->element[5]->type, REDIS_REPLY_STRING, "%s: undo type", ctx);
    cr_assert_lt(e->element[5]->len, sizeof(out->undo), "%s: undo length", ctx);
    memcpy(out->undo, e->element[5]->str, e->element[5]->len);
    return 0;
}

int lua_twin_call(redisContext *c, const char *mode, const char *key,
                  const char *algo, const char *const p[4], int64_t now_us,
                  int64_t cost, const char *undo, struct lua_twin_out *out,
                  char *err, size_t errlen)
{
    redisReply *r = NULL;
    int rc;

    lua_twin_append(c, mode, key, algo, p, now_us, cost, undo);
    cr_assert_eq(redisGetReply(c, (void **)&r), REDIS_OK, "EVALSHA: %s",
                 c->errstr);
    cr_assert_not_null(r, "EVALSHA: %s", c->errstr);
    rc = lua_twin_parse(r, mode, algo, out, err, errlen);
    freeReplyObject(r);
    return rc;
}

/* The commands of lua_twin_call_multi() inside MULTI ... EXEC. */
#define TWIN_TXN_ELEMS 4 /* EVALSHA, PTTL, the state read, PERSIST */

void lua_twin_call_multi(redisContext *c, const char *mode, const char *key,
                         const char *algo, const char *const p[4],
                         int64_t now_us, int64_t cost, const char *undo,
                         const char *read_fmt, struct lua_twin_txn *k,
                         const char *ctx)
{
    long long t0 = px_now_ms();
    const redisReply *e;

    memset(k, 0, sizeof(*k));
    redisAppendCommand(c, "MULTI");
    lua_twin_append(c, mode, key, algo, p, now_us, cost, undo);
    lstate_append(c, "PTTL %s", key);
    lstate_append(c, read_fmt, key);
    lstate_append(c, "PERSIST %s", key);
    redisAppendCommand(c, "EXEC");
    px_check_status(px_next(c), "OK");
    for (int i = 0; i < TWIN_TXN_ELEMS; i++) {
        px_check_status(px_next(c), "QUEUED");
    }
    k->exec = px_next(c);
    k->elapsed_ms = px_now_ms() - t0 + 1;
    cr_assert_eq(k->exec->type, REDIS_REPLY_ARRAY, "%s: EXEC", ctx);
    cr_assert_eq(k->exec->elements, TWIN_TXN_ELEMS, "%s: EXEC", ctx);
    k->pttl = k->exec->element[1]->integer;
    k->state = k->exec->element[2];
    e = k->exec->element[0];
    if (lua_twin_parse(e, mode, ctx, &k->out, k->err, sizeof(k->err)) != 0) {
        k->failed = 1;
        return;
    }
    if (strcmp(mode, "refund") != 0) {
        k->entry = e->element[3];
    }
}

int lua_twin_expired(const struct lua_twin_txn *k, int64_t expiry_ms,
                     const char *ctx)
{
    if (k->pttl != -2) {
        return 0;
    }
    cr_assert_leq(expiry_ms, k->elapsed_ms,
                  "%s: key gone after %lld ms, its expiry %" PRId64 " ms", ctx,
                  k->elapsed_ms, expiry_ms);
    return 1;
}

struct lua_twin_out lua_twin_ok(redisContext *c, const char *mode,
                                const char *key, const char *algo,
                                const char *const p[4], int64_t now_us,
                                int64_t cost, const char *undo)
{
    struct lua_twin_out o;
    char err[256];

    cr_assert_eq(lua_twin_call(c, mode, key, algo, p, now_us, cost, undo, &o,
                               err, sizeof(err)),
                 0, "%s %s %" PRId64 ": %s", algo, mode, cost, err);
    return o;
}

int lua_twin_dec(const char *s, int64_t *v)
{
    char *end, back[24];

    if (*s == '\0') {
        return 0;
    }
    *v = strtoll(s, &end, 10);
    snprintf(back, sizeof(back), "%" PRId64, *v);
    return *end == '\0' && strcmp(back, s) == 0;
}

int lua_twin_same_decision(const struct rl_decision *a,
                           const struct rl_decision *b)
{
    return a->limited == b->limited && a->limit == b->limit &&
           a->remaining == b->remaining &&
           a->retry_after_ns == b->retry_after_ns &&
           a->reset_after_ns == b->reset_after_ns;
}

void lua_twin_expect_same_decision(const struct rl_decision *a,
                                   const struct rl_decision *b, const char *ctx)
{
    cr_assert(lua_twin_same_decision(a, b),
              "%s: decisions differ: [%d %" PRId64 " %" PRId64 " %" PRId64
              " %" PRId64 "] vs [%d %" PRId64 " %" PRId64 " %" PRId64
              " %" PRId64 "]",
              ctx, a->limited, a->limit, a->remaining, a->retry_after_ns,
              a->reset_after_ns, b->limited, b->limit, b->remaining,
              b->retry_after_ns, b->reset_after_ns);
}

uint64_t lua_twin_rnd(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * UINT64_C(2685821657736338717);
}

int64_t lua_twin_rnd_in(uint64_t *s, int64_t lo, int64_t hi)
{
    return lo + (int64_t)(lua_twin_rnd(s) % ((uint64_t)(hi - lo) + 1));
}

int64_t lua_twin_pick(uint64_t *s, const int64_t *v, size_t n)
{
    return v[lua_twin_rnd(s) % n];
}

uint64_t lua_twin_seed(const char *suite, const char *env)
{
    const char *val = getenv(env);
    struct timespec ts;
    uint64_t seed;

    clock_gettime(CLOCK_REALTIME, &ts);
    seed = val != NULL
               ? strtoull(val, NULL, 10)
               : ((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec) ^
                     (uint64_t)getpid();
    fprintf(stderr, "%s: %s=%llu\n", suite, env, (unsigned long long)seed);
    return seed;
}

/* floor(ns / 1000), also for the -1 s of "allowed". */
static int64_t twin_floor_us(int64_t ns)
{
    int64_t q = ns / 1000;

    return (ns % 1000 < 0) ? q - 1 : q;
}

void lua_twin_expect(const struct lua_twin_out *o, const struct rl_decision *d,
                     const char *ctx)
{
    cr_assert_eq(o->limited, d->limited, "%s: limited lua %d c %d", ctx,
                 o->limited, d->limited);
    cr_assert_eq(o->limit, d->limit, "%s: limit lua %" PRId64 " c %" PRId64,
                 ctx, o->limit, d->limit);
    cr_assert_eq(o->remaining, d->remaining,
                 "%s: remaining lua %" PRId64 " c %" PRId64, ctx, o->remaining,
                 d->remaining);
    cr_assert_eq(o->retry_us, twin_floor_us(d->retry_after_ns),
                 "%s: retry lua %" PRId64 " us c %" PRId64 " ns", ctx,
                 o->retry_us, d->retry_after_ns);
    cr_assert_eq(o->reset_us, twin_floor_us(d->reset_after_ns),
                 "%s: reset lua %" PRId64 " us c %" PRId64 " ns", ctx,
                 o->reset_us, d->reset_after_ns);
}

long long lua_twin_pttl(redisContext *c, const char *key)
{
    char hash[256];
    const char *field;
    redisReply *r = lstate_split(key, hash, sizeof(hash), &field)
                        ? lstate_cmd(c, "PTTL %s", key)
                        : px_cmd(c, "PTTL %s", key);
    long long v;

    cr_assert_eq(r->type, REDIS_REPLY_INTEGER, "PTTL type");
    v = r->integer;
    freeReplyObject(r);
    return v;
}

/* The latest microsecond the script accepts (2^53 - 1). */
#define TWIN_NOW_MAX INT64_C(9007199254740991)

int64_t lua_twin_rnd_cost(uint64_t *s, int64_t max)
{
    switch (lua_twin_rnd_in(s, 0, 9)) {
    case 0:
        return 0;
    case 1:
        return max;
    case 2:
        return max < TWIN_NOW_MAX ? max + 1 : max;
    case 3:
        return lua_twin_rnd_in(s, 0, TWIN_NOW_MAX);
    case 4:
        return lua_twin_rnd_in(s, 1, max);
    default:
        return lua_twin_rnd_in(s, 1, max < 3 ? max : 3);
    }
}

void lua_twin_rnd_limit(uint64_t *s, int64_t max_max, int64_t max_win,
                        int64_t *max, int64_t *win_ms)
{
    switch (lua_twin_rnd_in(s, 0, 4)) {
    case 0:
        *max = 1;
        break;
    case 1:
        *max = max_max - lua_twin_rnd_in(s, 0, 1);
        break;
    case 2:
        *max = lua_twin_rnd_in(s, 1, INT64_C(1) << lua_twin_rnd_in(s, 10, 52));
        break;
    default:
        *max = lua_twin_rnd_in(s, 1, 20);
        break;
    }
    switch (lua_twin_rnd_in(s, 0, 5)) {
    case 0:
        *win_ms = lua_twin_rnd_in(s, 1, 3);
        break;
    case 1:
        *win_ms = max_win - lua_twin_rnd_in(s, 0, 1);
        break;
    case 2:
        *win_ms = lua_twin_rnd_in(s, 1, max_win);
        break;
    default:
        *win_ms = lua_twin_rnd_in(s, 1, 5) * 1000;
        break;
    }
}

void lua_twin_runs_text(const redisReply *r, size_t n, char *buf, size_t size)
{
    size_t used = 0;

    buf[0] = '\0';
    for (size_t i = 0; i < n && used < size; i++) {
        /* A key not decided has its code in place of its TAT; the others'
         * refusal bits are 48 a word. */
        const redisReply *raw = r->element[3 + i];
        long long flag =
            raw->type == REDIS_REPLY_INTEGER
                ? raw->integer
                : (r->element[3 + n + i / 48]->integer >> (i % 48)) & 1;
        used +=
            (size_t)snprintf(buf + used, size - used, "%c%lld ",
                             raw->type == REDIS_REPLY_STRING ? '+' : '-', flag);
    }
}
