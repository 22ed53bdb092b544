/* Replies and key states compared whole (see replies.h). */
#include "tests/integration/replies.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/integration/fixture.h"
#include "tests/integration/lstate.h"
#include "tests/integration/lua_twin.h"
#include "tests/support/px_test.h"

int replies_eq(const redisReply *a, const redisReply *b)
{
    if (a->type != b->type) {
        return 0;
    }
    switch (a->type) {
    case REDIS_REPLY_INTEGER:
        return a->integer == b->integer;
    case REDIS_REPLY_NIL:
        return 1;
    case REDIS_REPLY_ARRAY:
        if (a->elements != b->elements) {
            return 0;
        }
        for (size_t i = 0; i < a->elements; i++) {
            if (!replies_eq(a->element[i], b->element[i])) {
                return 0;
            }
        }
        return 1;
    default:
        return a->len == b->len && memcmp(a->str, b->str, a->len) == 0;
    }
}

void replies_fmt(const redisReply *r, char *out, size_t outlen)
{
    size_t used = strlen(out);

    if (used + 32 >= outlen) {
        return;
    }
    switch (r->type) {
    case REDIS_REPLY_INTEGER:
        snprintf(out + used, outlen - used, "%lld ", r->integer);
        break;
    case REDIS_REPLY_NIL:
        snprintf(out + used, outlen - used, "nil ");
        break;
    case REDIS_REPLY_ARRAY:
        snprintf(out + used, outlen - used, "[ ");
        for (size_t i = 0; i < r->elements; i++) {
            replies_fmt(r->element[i], out, outlen);
        }
        used = strlen(out);
        snprintf(out + used, outlen - used, "] ");
        break;
    case REDIS_REPLY_ERROR:
        snprintf(out + used, outlen - used, "-'%s' ", r->str);
        break;
    default:
        snprintf(out + used, outlen - used, "'%.*s' ", (int)r->len, r->str);
        break;
    }
}

void replies_expect_eq(const redisReply *a, const redisReply *b,
                       const char *ctx)
{
    static char sa[8192], sb[8192];

    if (!replies_eq(a, b)) {
        sa[0] = sb[0] = '\0';
        replies_fmt(a, sa, sizeof(sa));
        replies_fmt(b, sb, sizeof(sb));
        cr_assert_fail("%s: replies differ:\n  %s\n  %s", ctx, sa, sb);
    }
}

void replies_expect_array(const redisReply *r, const char *ctx)
{
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "%s: type %d (%s)", ctx, r->type,
                 r->type == REDIS_REPLY_ERROR ? r->str : "");
}

void replies_expect_error(const redisReply *e, const char *text,
                          const char *ctx)
{
    char s[2048] = "";

    replies_fmt(e, s, sizeof(s));
    cr_assert_eq(e->type, REDIS_REPLY_ERROR, "%s: not an error: %s", ctx, s);
    cr_assert_str_eq(e->str, text, "%s", ctx);
}

/* Comparison of two strings through pointers, for qsort. */
static int replies_cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Appends " f=v" for each field of the HGETALL reply v, sorted. */
static void replies_hash_text(const redisReply *v, char *out, size_t outlen)
{
    size_t n = v->elements / 2, used;
    char **pair = calloc(n + 1, sizeof(*pair));

    cr_assert_not_null(pair);
    for (size_t i = 0; i < n; i++) {
        size_t len = v->element[2 * i]->len + v->element[2 * i + 1]->len + 2;
        pair[i] = malloc(len);
        cr_assert_not_null(pair[i]);
        snprintf(pair[i], len, "%s=%s", v->element[2 * i]->str,
                 v->element[2 * i + 1]->str);
    }
    qsort(pair, n, sizeof(*pair), replies_cmp_str);
    for (size_t i = 0; i < n; i++) {
        used = strlen(out);
        snprintf(out + used, outlen - used, " %s", pair[i]);
        free(pair[i]);
    }
    free(pair);
}

void replies_state_read(redisContext *c, const char *key,
                        struct replies_state *k)
{
    redisReply *t = lstate_cmd(c, "TYPE %s", key);
    redisReply *v = NULL;
    size_t used;

    snprintf(k->text, sizeof(k->text), "%s:", t->str);
    if (strcmp(t->str, "string") == 0) {
        v = lstate_cmd(c, "GET %s", key);
        used = strlen(k->text);
        snprintf(k->text + used, sizeof(k->text) - used, "%s", v->str);
    } else if (strcmp(t->str, "hash") == 0) {
        v = lstate_cmd(c, "HGETALL %s", key);
        replies_hash_text(v, k->text, sizeof(k->text));
    } else if (strcmp(t->str, "zset") == 0) {
        v = px_cmd(c, "ZRANGE %s 0 -1 WITHSCORES", key);
        for (size_t i = 0; i < v->elements; i++) {
            used = strlen(k->text);
            snprintf(k->text + used, sizeof(k->text) - used, " %s",
                     v->element[i]->str);
        }
    }
    if (v != NULL) {
        freeReplyObject(v);
    }
    freeReplyObject(t);
    k->pttl = lua_twin_pttl(c, key); /* through lstate */
}

void replies_state_expect_eq(const struct replies_state *a,
                             const struct replies_state *b, long long slack_ms,
                             const char *key)
{
    cr_assert_str_eq(a->text, b->text, "%s: state", key);
    cr_assert_eq(a->pttl < 0, b->pttl < 0, "%s: expiry %lld vs %lld", key,
                 a->pttl, b->pttl);
    if (a->pttl >= 0) {
        long long d = a->pttl - b->pttl;
        cr_assert(d <= slack_ms && d >= -slack_ms,
                  "%s: PTTL %lld vs %lld (slack %lld)", key, a->pttl, b->pttl,
                  slack_ms);
    }
}
