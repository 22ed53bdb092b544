/* Differential fuzz target: the reply framer (parser/resp_framer.c) and
 * resp_value_parse (parser/resp_value.c) must read the same bytes the same
 * way. The proxy frames upstream replies with the first and parses some
 * frames with the second; if they disagreed on where a reply ends, the
 * proxy would answer a client with part of a reply, or two.
 *
 * The rules, for the first value of the bytes:
 *   - the value parser accepts a value of `used` bytes: the framer's first
 *     frame is exactly `used` bytes, of the same type;
 *   - the framer finds a first frame of `len` bytes: the value parser, given
 *     those bytes or all of them, accepts a value of exactly `len` bytes,
 *     or refuses it (RESP_EPROTO) for one of the reasons below;
 *   - the framer refuses the bytes before any frame: the value parser does
 *     not accept them (it may wait for a line's CRLF before it can tell);
 *   - the framer waits for more: the value parser waits too, or refuses
 *     for one of the reasons below.
 * The value parser is stricter than the framer, and only, on what the
 * framer need not look at (resp_value.c): an integer's digits, a boolean's
 * byte, nesting deeper than its cap, and attributes (`|`), which it does
 * not read. Inputs that could hold one of those (a ':', '#' or '|' where a
 * type byte can be, or more than 100 aggregate headers) may see such a
 * refusal; every other input must see both parsers agree exactly. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parser/resp.h"
#include "parser/resp_value.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fz_fail(const char *what, int frc, size_t flen, int vrc,
                    size_t used)
{
    fprintf(stderr,
            "fuzz_reply_diff: %s (framer %d, %zu bytes; value %d, %zu "
            "bytes)\n",
            what, frc, flen, vrc, used);
    abort();
}

/* True when the value parser may refuse what the framer accepts: a type
 * byte (the first byte, or one right after a '\n') of an integer, a
 * boolean or an attribute, or more aggregate headers than its depth cap. */
static int fz_may_be_stricter(const uint8_t *p, size_t n)
{
    size_t k, aggregates = 0;

    for (k = 0; k < n; k++) {
        if ((k == 0 || p[k - 1] == '\n') &&
            (p[k] == ':' || p[k] == '#' || p[k] == '|')) {
            return 1;
        }
        aggregates += p[k] == '*' || p[k] == '%' || p[k] == '~' || p[k] == '>';
    }
    return aggregates > 100;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *p = (const char *)data;
    struct resp_framer *fr = resp_framer_new();
    struct resp_value v;
    size_t flen = 0, used = 0, used2 = 0;
    char ftype = 0;
    int frc, vrc, vrc2;
    int loose = fz_may_be_stricter(data, size);

    if (fr == NULL) {
        return 0;
    }
    (void)resp_framer_feed(fr, p, size);
    frc = resp_framer_next_typed(fr, &flen, &ftype);
    resp_framer_free(fr);

    vrc = resp_value_parse(p, size, &v, &used);
    if (vrc == RESP_ENOMEM) {
        return 0;
    }
    if (vrc == RESP_OK) {
        int same = frc == RESP_OK && flen == used && ftype == v.type;
        resp_value_free(&v);
        if (!same) {
            fz_fail("the value parser accepts what the framer does not frame",
                    frc, flen, vrc, used);
        }
        return 0;
    }
    if (frc == RESP_OK) {
        /* A frame the value parser did not accept from all the bytes; from
         * the frame's bytes alone it must decide the same. */
        vrc2 = resp_value_parse(p, flen, &v, &used2);
        if (vrc2 == RESP_OK) {
            resp_value_free(&v);
        }
        if (vrc2 != vrc) {
            fz_fail("the value parser reads past the framer's frame", frc, flen,
                    vrc2, used2);
        }
        if (vrc != RESP_EPROTO || !loose) {
            fz_fail("the value parser refuses or waits on a whole frame", frc,
                    flen, vrc, used);
        }
        return 0;
    }
    if (frc == RESP_AGAIN && vrc == RESP_EPROTO && !loose) {
        fz_fail("the value parser refuses what the framer waits on", frc, flen,
                vrc, used);
    }
    return 0;
}
