/* A reply, parsed: a small tree of spans over the bytes of one complete
 * frame. Used by the proxy's control plane (CLUSTER SLOTS, COMMAND, script
 * replies) and by reply merging, never on the plain forwarding path, where
 * replies travel as opaque frames.
 *
 * Every string points into the caller's bytes, which must outlive the tree.
 * The tree owns only its element arrays. */
#ifndef PX_PARSER_RESP_VALUE_H
#define PX_PARSER_RESP_VALUE_H

#include <stddef.h>

struct resp_value {
    char type;               /* RESP type byte: + - : $ * _ , # ( ! = ~ % > */
    int null;                /* $-1, *-1 or _ */
    long long integer;       /* value of ':' (and '#': 1 or 0) */
    const char *str;         /* borrowed payload of strings, errors, lines */
    size_t len;              /* bytes in str */
    const char *raw;         /* borrowed: the value's whole wire form */
    size_t raw_len;          /* bytes in raw */
    size_t n;                /* elements (maps: keys and values, 2 per pair) */
    struct resp_value *elem; /* owned array of n elements */
};

/* Parses the first value of p[0..n). RESP_OK fills `*out` (free it with
 * resp_value_free) and `*used` with its length; RESP_AGAIN means the value
 * is incomplete; RESP_EPROTO means it is not RESP; RESP_ENOMEM. On any
 * result but RESP_OK, `*out` holds nothing to free. */
int resp_value_parse(const char *p, size_t n, struct resp_value *out,
                     size_t *used);

/* Frees the element arrays of `v` (not `v` itself). */
void resp_value_free(struct resp_value *v);

/* True when `v` is a string-like value equal to the lower-case `word`,
 * compared without regard to ASCII case. */
int resp_value_is(const struct resp_value *v, const char *word);

#endif /* PX_PARSER_RESP_VALUE_H */
