/* Fuzz target: the HTTP request head parser (parser/http_req.c).
 *
 * It is stateless and re-reads the whole buffer after each read, so its
 * verdicts over the prefixes of one input must never go back: a prefix of
 * a refused input is refused or still possible, a prefix of a complete head
 * is still possible (or the same head, once it is all there), and what it
 * reports lies inside the bytes. Each prefix is parsed from an exact-size
 * heap copy, so ASan sees any read past its end. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parser/http_req.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fz_fail(const char *what, size_t at)
{
    fprintf(stderr, "fuzz_http_req: %s (prefix of %zu bytes)\n", what, at);
    abort();
}

static enum http_req_status fz_parse(const uint8_t *data, size_t n,
                                     struct http_req *r)
{
    char *copy = malloc(n ? n : 1);
    enum http_req_status st;

    if (copy == NULL) {
        abort();
    }
    memcpy(copy, data, n);
    memset(r, 0, sizeof(*r));
    st = http_req_parse(copy, n, r);
    if (st == HTTP_REQ_DONE) {
        /* Its spans, as offsets: the copy goes away. */
        if (r->head_len == 0 || r->head_len > n || r->method < copy ||
            r->method_len == 0 || r->method + r->method_len > copy + n ||
            r->target < copy || r->target_len == 0 ||
            r->target + r->target_len > copy + r->head_len) {
            fz_fail("a head outside its bytes", n);
        }
        r->method = (const char *)data + (r->method - copy);
        r->target = (const char *)data + (r->target - copy);
        (void)http_req_path_is(r->target, r->target_len, "/metrics");
    }
    free(copy);
    return st;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct http_req full, part;
    enum http_req_status st = fz_parse(data, size, &full), pst;
    size_t k, step = 1 + size / 64;

    if (st != HTTP_REQ_BAD && st != HTTP_REQ_MORE && st != HTTP_REQ_DONE) {
        fz_fail("an unknown status", size);
    }
    for (k = 0; k < size; k += step) {
        pst = fz_parse(data, k, &part);
        if (pst == HTTP_REQ_BAD && st != HTTP_REQ_BAD) {
            fz_fail("a refused prefix of an input not refused", k);
        }
        if (pst == HTTP_REQ_DONE &&
            (st != HTTP_REQ_DONE || part.head_len != full.head_len ||
             part.method != full.method || part.target != full.target ||
             part.method_len != full.method_len ||
             part.target_len != full.target_len || part.major != full.major ||
             part.minor != full.minor)) {
            fz_fail("a prefix is another complete head", k);
        }
        if (st == HTTP_REQ_DONE && k < full.head_len && pst != HTTP_REQ_MORE) {
            fz_fail("a prefix of a complete head is not still possible", k);
        }
    }
    return 0;
}
