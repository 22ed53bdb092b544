/* Fuzz target: resp_value_parse (parser/resp_value.c).
 *
 * Whatever the bytes, a parsed tree must lie inside them: every value's
 * raw span within its parent's, strings within their value, an aggregate's
 * elements back to back after its header line. A value must parse the same
 * from exactly its own bytes, and every proper prefix of it must be
 * incomplete (RESP_AGAIN), never another value or an error. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parser/resp.h"
#include "parser/resp_value.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fz_fail(const char *what)
{
    fprintf(stderr, "fuzz_resp_value: %s\n", what);
    abort();
}

/* Checks `v` lies in [lo, hi) and its parts in it. */
static void fz_walk(const struct resp_value *v, const char *lo, const char *hi)
{
    const char *at;
    size_t k;

    if (v->raw < lo || v->raw_len < 3 || v->raw_len > (size_t)(hi - v->raw)) {
        fz_fail("a value outside its parent");
    }
    if (v->raw[0] != v->type || v->raw[v->raw_len - 2] != '\r' ||
        v->raw[v->raw_len - 1] != '\n') {
        fz_fail("a value's bytes are not its type byte to its CRLF");
    }
    if (v->str != NULL && (v->str < v->raw + 1 || v->len > v->raw_len - 3 ||
                           v->str + v->len > v->raw + v->raw_len - 2)) {
        fz_fail("a string outside its value");
    }
    if (v->n > 0 && v->elem == NULL) {
        fz_fail("elements without their array");
    }
    if (v->n == 0) {
        return;
    }
    /* The elements follow the header line, back to back, to the end. */
    at = memchr(v->raw, '\n', v->raw_len);
    if (at == NULL) {
        fz_fail("an aggregate without a header line");
    }
    at++;
    for (k = 0; k < v->n; k++) {
        if (v->elem[k].raw != at) {
            fz_fail("an element not right after the one before");
        }
        fz_walk(&v->elem[k], v->raw, v->raw + v->raw_len);
        at += v->elem[k].raw_len;
    }
    if (at != v->raw + v->raw_len) {
        fz_fail("an aggregate longer than its elements");
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *p = (const char *)data;
    struct resp_value v, w;
    size_t used = 0, again = 0, k;
    int rc;

    rc = resp_value_parse(p, size, &v, &used);
    if (rc != RESP_OK) {
        if (rc != RESP_AGAIN && rc != RESP_EPROTO && rc != RESP_ENOMEM) {
            fz_fail("an unknown return code");
        }
        return 0;
    }
    if (used == 0 || used > size || v.raw != p || v.raw_len != used) {
        fz_fail("the value's length is not what it used");
    }
    fz_walk(&v, p, p + used);
    if (resp_value_parse(p, used, &w, &again) != RESP_OK || again != used) {
        fz_fail("the value alone parses otherwise");
    }
    resp_value_free(&w);
    /* Every proper prefix is incomplete (a few of them: this is O(n^2)). */
    for (k = used - 1; k + 64 >= used && k > 0; k--) {
        rc = resp_value_parse(p, k, &w, &again);
        if (rc != RESP_AGAIN) {
            fprintf(stderr, "prefix of %zu of %zu bytes: %d\n", k, used, rc);
            fz_fail("a proper prefix of a value is not incomplete");
        }
    }
    for (k = 0; k < used; k += 1 + used / 16) {
        if (resp_value_parse(p, k, &w, &again) != RESP_AGAIN) {
            fz_fail("a proper prefix of a value is not incomplete");
        }
    }
    resp_value_free(&v);
    return 0;
}
