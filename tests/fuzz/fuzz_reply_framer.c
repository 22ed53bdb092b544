/* Fuzz target: the reply framer (parser/resp_framer.c).
 *
 * The bytes are framed twice, fed whole and fed in pieces whose sizes the
 * first byte picks: a reply split anywhere must frame exactly as it does
 * in one piece (the same lengths, the same types, the same verdict), the
 * frames must lie inside the bytes fed, and a refusal must stay. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parser/resp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Most frames compared between the two framings of one input. */
#define FZ_MAX_FRAMES 4096

/* What one framing produced. */
struct fz_run {
    size_t len[FZ_MAX_FRAMES];
    char type[FZ_MAX_FRAMES];
    size_t n;
    size_t total; /* bytes in all frames */
    int rc;       /* RESP_AGAIN or RESP_EPROTO at the end */
};

static void fz_fail(const char *what)
{
    fprintf(stderr, "fuzz_reply_framer: %s\n", what);
    abort();
}

static void fz_drain(struct resp_framer *fr, struct fz_run *r, size_t fed)
{
    size_t len;
    char type;
    int rc;

    while ((rc = resp_framer_next_typed(fr, &len, &type)) == RESP_OK) {
        if (len == 0 || len > fed - r->total) {
            fz_fail("a frame outside the bytes fed");
        }
        if (strchr("+-:_,#($!=*~>%", type) == NULL || type == '\0') {
            fz_fail("a frame of no RESP type");
        }
        if (r->n < FZ_MAX_FRAMES) {
            r->len[r->n] = len;
            r->type[r->n] = type;
            r->n++;
        }
        r->total += len;
    }
    if (rc != RESP_AGAIN && rc != RESP_EPROTO) {
        fz_fail("resp_framer_next returned an unknown code");
    }
    r->rc = rc;
}

/* Frames p[0..n) fed in pieces of `step` bytes (0: whole). */
static int fz_frame(const uint8_t *p, size_t n, size_t step, struct fz_run *r)
{
    struct resp_framer *fr = resp_framer_new();
    size_t pos = 0, len;

    memset(r, 0, sizeof(*r));
    if (fr == NULL) {
        return -1;
    }
    do {
        size_t k = step == 0 || n - pos < step ? n - pos : step;
        int rc = resp_framer_feed(fr, (const char *)p + pos, k);

        if (rc != RESP_OK && !(rc == RESP_EPROTO && r->rc == RESP_EPROTO)) {
            fz_fail("resp_framer_feed refused bytes before any error");
        }
        pos += k;
        fz_drain(fr, r, pos);
    } while (pos < n);
    if (r->rc == RESP_EPROTO &&
        (resp_framer_feed(fr, "+OK\r\n", 5) != RESP_EPROTO ||
         resp_framer_next(fr, &len) != RESP_EPROTO)) {
        fz_fail("a refused stream took more bytes");
    }
    resp_framer_free(fr);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct fz_run whole, cut; /* large: not on the stack */
    size_t step;

    if (size < 1) {
        return 0;
    }
    step = 1 + (data[0] & 15);
    if (fz_frame(data + 1, size - 1, 0, &whole) != 0 ||
        fz_frame(data + 1, size - 1, step, &cut) != 0) {
        return 0;
    }
    if (whole.n != cut.n || whole.total != cut.total || whole.rc != cut.rc ||
        memcmp(whole.len, cut.len, whole.n * sizeof(whole.len[0])) != 0 ||
        memcmp(whole.type, cut.type, whole.n) != 0) {
        fz_fail("the input cut in pieces frames otherwise than whole");
    }
    if (whole.rc == RESP_AGAIN && whole.total > size - 1) {
        fz_fail("frames longer than the input");
    }
    return 0;
}
