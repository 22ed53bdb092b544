/* Fuzz target: the client request reader (parser/resp.c).
 *
 * The first byte picks the reader's limits (small ones, so the fuzzer
 * reaches every "too big" refusal) and how the rest is cut into feeds. The
 * bytes are read twice, fed whole and fed in those cuts: a request split
 * anywhere must read exactly as it does in one piece, the same commands and
 * the same final verdict (and error text). Each command must hold together
 * (its argument spans inside its raw bytes), and its raw form, read again by
 * a fresh reader, must give back the same command: the proxy forwards raw,
 * so what Redis reads from it is what the proxy decided on. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parser/resp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Most commands compared between the two readings of one input. */
#define FZ_MAX_CMDS 256

/* What one reading produced: owned commands, then the verdict. */
struct fz_run {
    struct resp_cmd *cmd[FZ_MAX_CMDS];
    size_t n;
    int rc;         /* RESP_AGAIN or RESP_EPROTO at the end */
    char err[160];  /* resp_reader_error() when rc is RESP_EPROTO */
    size_t pending; /* resp_reader_pending() at the end */
};

static void fz_fail(const char *what)
{
    fprintf(stderr, "fuzz_resp_reader: %s\n", what);
    abort();
}

static void fz_check_cmd(const struct resp_cmd *c)
{
    int i;

    if (c->argc < 1) {
        fz_fail("a command without arguments");
    }
    for (i = 0; i < c->argc; i++) {
        if (c->argv[i].off > c->raw_len ||
            c->argv[i].len > c->raw_len - c->argv[i].off) {
            fz_fail("an argument outside the raw bytes");
        }
    }
}

static int fz_same_cmd(const struct resp_cmd *a, const struct resp_cmd *b)
{
    int i;

    if (a->argc != b->argc || a->raw_len != b->raw_len ||
        memcmp(a->raw, b->raw, a->raw_len) != 0) {
        return 0;
    }
    for (i = 0; i < a->argc; i++) {
        if (a->argv[i].off != b->argv[i].off ||
            a->argv[i].len != b->argv[i].len) {
            return 0;
        }
    }
    return 1;
}

/* Reads c->raw with a fresh reader of default limits: one command, the
 * same one, and nothing left. */
static void fz_reread(const struct resp_cmd *c)
{
    struct resp_reader *rd = resp_reader_new(NULL);
    struct resp_cmd *again = NULL;
    int rc;

    if (rd == NULL) {
        return;
    }
    if (resp_reader_feed(rd, c->raw, c->raw_len) != RESP_OK) {
        resp_reader_free(rd);
        return;
    }
    rc = resp_reader_next(rd, &again);
    if (rc != RESP_OK || !fz_same_cmd(c, again)) {
        fz_fail("a command's raw form reads as another command");
    }
    resp_cmd_free(again);
    if (resp_reader_next(rd, &again) != RESP_AGAIN ||
        resp_reader_pending(rd) != 0) {
        fz_fail("a command's raw form has bytes after the command");
    }
    resp_reader_free(rd);
}

/* Drains every complete command into `r`. */
static void fz_drain(struct resp_reader *rd, struct fz_run *r)
{
    struct resp_cmd *c;
    int rc;

    while ((rc = resp_reader_next(rd, &c)) == RESP_OK) {
        fz_check_cmd(c);
        if (r->n < FZ_MAX_CMDS) {
            r->cmd[r->n++] = c;
        } else {
            resp_cmd_free(c);
        }
    }
    if (rc != RESP_AGAIN && rc != RESP_EPROTO) {
        fz_fail("resp_reader_next returned an unknown code");
    }
    r->rc = rc;
}

/* Reads p[0..n) fed in pieces of `step` bytes (0: whole). */
static int fz_read(const struct resp_limits *lim, const uint8_t *p, size_t n,
                   size_t step, struct fz_run *r)
{
    struct resp_reader *rd = resp_reader_new(lim);
    size_t pos = 0;

    memset(r, 0, sizeof(*r));
    if (rd == NULL) {
        return -1;
    }
    r->rc = RESP_AGAIN;
    do {
        size_t k = step == 0 || n - pos < step ? n - pos : step;

        if (r->rc == RESP_EPROTO) {
            break; /* sticky: nothing more is read */
        }
        if (resp_reader_feed(rd, (const char *)p + pos, k) != RESP_OK) {
            resp_reader_free(rd);
            return -1;
        }
        pos += k;
        fz_drain(rd, r);
    } while (pos < n);
    if (r->rc == RESP_EPROTO) {
        snprintf(r->err, sizeof(r->err), "%s", resp_reader_error(rd));
    }
    r->pending = resp_reader_pending(rd);
    resp_reader_free(rd);
    return 0;
}

static void fz_free_run(struct fz_run *r)
{
    size_t i;

    for (i = 0; i < r->n; i++) {
        resp_cmd_free(r->cmd[i]);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const unsigned long long small[4] = { 8, 64, 1024, 1ULL << 20 };
    struct resp_limits lim;
    struct fz_run whole, cut;
    size_t i;

    if (size < 1) {
        return 0;
    }
    lim.max_bulk = small[data[0] & 3];
    lim.max_elements = small[(data[0] >> 2) & 3];
    lim.max_inline = small[(data[0] >> 4) & 3];
    if (fz_read(&lim, data + 1, size - 1, 0, &whole) != 0) {
        return 0;
    }
    if (fz_read(&lim, data + 1, size - 1, 1 + (data[0] >> 6) * 5, &cut) != 0) {
        fz_free_run(&whole);
        return 0;
    }
    if (whole.n != cut.n || whole.rc != cut.rc ||
        strcmp(whole.err, cut.err) != 0) {
        fz_fail("the input cut in pieces reads otherwise than whole");
    }
    if (whole.rc == RESP_AGAIN && whole.pending != cut.pending) {
        fz_fail("the input cut in pieces leaves other bytes pending");
    }
    for (i = 0; i < whole.n; i++) {
        if (!fz_same_cmd(whole.cmd[i], cut.cmd[i])) {
            fz_fail("a command read otherwise when the input is cut");
        }
        fz_reread(whole.cmd[i]);
    }
    fz_free_run(&whole);
    fz_free_run(&cut);
    return 0;
}
