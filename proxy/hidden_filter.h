/* Keeping the limiter's key names out of ordinary clients' sight: the
 * decisions, as pure functions over a command's words and a reply's bytes
 * (no loop, no connection, no global), unit-tested in
 * tests/unit/test_hidden_filter.c. hidden.c applies them to requests.
 *
 * Redis's ACL does not filter what KEYS, SCAN and RANDOMKEY return, nor
 * which keys CLIENT TRACKING BCAST broadcasts, and a limiter key's name is
 * an identity (login:10.1.2.3), so a client that is not admin gets these
 * replies, and its invalidation messages, without the keys under
 * key_prefix. */
#ifndef PX_PROXY_HIDDEN_FILTER_H
#define PX_PROXY_HIDDEN_FILTER_H

#include <stddef.h>

#include "parser/buf.h"

struct resp_cmd;
struct resp_value;

/* How many times a RANDOMKEY that drew a limiter key is asked again
 * before the client gets a null reply, as if the keyspace were empty. */
#define HIDDEN_RANDOMKEY_TRIES 16

/* The commands whose replies name keys the client did not name. */
enum hidden_kind {
    HIDDEN_NONE,      /* anything else */
    HIDDEN_KEYS,      /* KEYS, CLUSTER GETKEYSINSLOT: an array of keys */
    HIDDEN_SCAN,      /* SCAN: [cursor, array of keys] */
    HIDDEN_RANDOMKEY, /* RANDOMKEY: one key, or null */
};

/* Why a command of an ordinary client is refused, or HIDDEN_ALLOWED. */
enum hidden_refusal {
    HIDDEN_ALLOWED,
    HIDDEN_IN_MULTI, /* KEYS, SCAN or RANDOMKEY queued in a transaction,
                        whose EXEC reply is not filtered */
};

/* What becomes of a frame Redis sends a client unasked (a push, a
 * message) once the limiter's keys are taken out of it. */
enum hidden_push {
    HIDDEN_PUSH_AS_IS,   /* not an invalidation, or none of its keys is
                            the limiter's: relayed as it is */
    HIDDEN_PUSH_TRIMMED, /* an invalidation of some limiter keys: the rest
                            of it was appended to `out` */
    HIDDEN_PUSH_DROPPED  /* an invalidation of limiter keys only: nothing
                            reaches the client */
};

/* 1 when `key` (len bytes) is under `prefix` (a limiter key), else 0 (also
 * for a NULL key or prefix). */
int hidden_filter_key(const char *key, size_t len, const char *prefix);

/* Which of the commands above `cmd` is. */
enum hidden_kind hidden_filter_kind(const struct resp_cmd *cmd);

/* Whether an ordinary client may send `cmd` (inside MULTI when in_multi). */
enum hidden_refusal hidden_filter_refusal(const struct resp_cmd *cmd,
                                          int in_multi);

/* Appends the array or RESP3 set `v` to `out` without its elements under
 * `prefix` (NULL: with all of them), the header's type kept. */
void hidden_filter_list(const struct resp_value *v, const char *prefix,
                        struct buf *out);

/* Appends to `out` the reply of a `kind` command (HIDDEN_KEYS or
 * HIDDEN_SCAN) without the keys under `prefix`; any other reply (an
 * error, an unexpected shape) is appended as it is. The elements kept are
 * copied byte for byte, so the reply stays in the protocol it came in. */
void hidden_filter_reply(enum hidden_kind kind, const char *frame, size_t len,
                         const char *prefix, struct buf *out);

/* The invalidation frame[0..len) without its keys under `prefix`: a RESP3
 * `invalidate` push, or the `message` of __redis__:invalidate a RESP2
 * redirect target reads (the two shapes Redis sends, with BCAST or not).
 * Anything else, a flush's null list included, is HIDDEN_PUSH_AS_IS, and
 * `out` is left alone unless HIDDEN_PUSH_TRIMMED. */
enum hidden_push hidden_filter_invalidation(const char *frame, size_t len,
                                            const char *prefix,
                                            struct buf *out);

/* 1 when a RANDOMKEY reply names a key under `prefix`, else 0. */
int hidden_filter_drawn(const char *frame, size_t len, const char *prefix);

#endif /* PX_PROXY_HIDDEN_FILTER_H */
