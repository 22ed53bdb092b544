/* Replies and key states compared whole, for the tests that run one
 * batch two ways and hold the two to the same answer and the same
 * database (test_lua_each.c: mode "each" against "shapes";
 * test_lua_keys.c: override pairs by hand against the `keys` form).
 * Failures are criterion assertions showing both sides as text. */
#ifndef PX_TESTS_REPLIES_H
#define PX_TESTS_REPLIES_H

#include <stddef.h>

#include <hiredis/hiredis.h>

/* Whether two replies are the same, element by element. */
int replies_eq(const redisReply *a, const redisReply *b);

/* Appends reply r to the NUL-ended text in out as one line (truncated to
 * outlen): integers, nil, 'strings', -'errors', [ arrays ]. */
void replies_fmt(const redisReply *r, char *out, size_t outlen);

/* Asserts a and b the same (ctx names the place). */
void replies_expect_eq(const redisReply *a, const redisReply *b,
                       const char *ctx);

/* Asserts that r is an array (a batch's reply), showing an error reply's
 * text otherwise. */
void replies_expect_array(const redisReply *r, const char *ctx);

/* Asserts that e (a reply or one element) is the error `text`. */
void replies_expect_error(const redisReply *e, const char *text,
                          const char *ctx);

/* A key as a test compares it: its type and value (a hash's fields
 * sorted, a sorted set's members and scores in order) and its PTTL. */
struct replies_state {
    char text[4096];
    long long pttl;
};

/* Reads key's state through c. */
void replies_state_read(redisContext *c, const char *key,
                        struct replies_state *k);

/* Asserts two states of `key` the same, their PTTLs within slack_ms. */
void replies_state_expect_eq(const struct replies_state *a,
                             const struct replies_state *b, long long slack_ms,
                             const char *key);

#endif
