/* The HTTP request head parser: known heads, then a fuzz run (random
 * bytes, mutated and truncated valid heads), each input parsed at every
 * prefix from an exact-size heap copy (ASan sees any read past the end)
 * and fed in random splits: never a crash, the verdict never goes back
 * (BAD stays BAD, DONE stays DONE with the same head), and nothing
 * accepted that an independent check of the grammar refuses. */
#include "tests/support/px_test.h"

#include <stdlib.h>
#include <string.h>

#include "parser/http_req.h"

PX_TEST_SUITE(http_req);

static enum http_req_status parse_str(const char *s, struct http_req *r)
{
    return http_req_parse(s, strlen(s), r);
}

Test(http_req, scrape_request)
{
    static const char req[] = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                              "User-Agent: Prometheus/2.45\r\nAccept: */*\r\n"
                              "\r\nleftover";
    struct http_req r;

    cr_assert_eq(parse_str(req, &r), HTTP_REQ_DONE);
    cr_assert_eq(r.method_len, 3);
    cr_assert_eq(memcmp(r.method, "GET", 3), 0);
    cr_assert_eq(r.target_len, 8);
    cr_assert(http_req_path_is(r.target, r.target_len, "/metrics"));
    cr_assert_eq(r.major, 1);
    cr_assert_eq(r.minor, 1);
    cr_assert_eq(r.head_len, sizeof(req) - 1 - strlen("leftover"));
}

Test(http_req, no_headers_and_query)
{
    struct http_req r;

    cr_assert_eq(parse_str("GET /metrics?x=1 HTTP/1.0\r\n\r\n", &r),
                 HTTP_REQ_DONE);
    cr_assert(http_req_path_is(r.target, r.target_len, "/metrics"));
    cr_assert_eq(r.minor, 0);
    cr_assert_eq(parse_str("POST /metricsx HTTP/1.1\r\n\r\n", &r),
                 HTTP_REQ_DONE);
    cr_assert_not(http_req_path_is(r.target, r.target_len, "/metrics"));
}

Test(http_req, incomplete)
{
    static const char *const more[] = {
        "",
        "G",
        "GET",
        "GET ",
        "GET /metrics",
        "GET /metrics HTTP/1",
        "GET /metrics HTTP/1.1\r",
        "GET /metrics HTTP/1.1\r\n",
        "GET /metrics HTTP/1.1\r\nHost",
        "GET /metrics HTTP/1.1\r\nHost: x\r\n",
        "GET /metrics HTTP/1.1\r\nHost: x\r\n\r",
    };
    struct http_req r;
    size_t k;

    for (k = 0; k < sizeof(more) / sizeof(more[0]); k++) {
        cr_assert_eq(parse_str(more[k], &r), HTTP_REQ_MORE, "'%s'", more[k]);
    }
}

Test(http_req, refused)
{
    static const char *const bad[] = {
        " GET",                                  /* empty method */
        "G(T /",                                 /* not a token */
        "GET  /metrics",                         /* empty target */
        "GET /met\x01rics",                      /* control byte */
        "GET /metrics HTTP/1.1\n",               /* bare LF */
        "GET /metrics HTTP/1.1\rX",              /* bare CR */
        "GET /metrics HTTX/1.1\r\n",             /* not HTTP */
        "GET /metrics HTTP/a.1\r\n",             /* no digit */
        "GET /metrics HTTP/1.1 \r\n",            /* trailing space */
        "GET /metrics HTTP/1.1\r\n folded\r\n",  /* obs-fold */
        "GET /metrics HTTP/1.1\r\n: v\r\n",      /* empty field name */
        "GET /metrics HTTP/1.1\r\nHo st: v\r\n", /* space in name */
        "GET /metrics HTTP/1.1\r\nHost: a\x7f\r\n",
        "GET /metrics HTTP/1.1\r\nHost: a\r\r\n",
        "\r\n",
        "\x16\x03\x01\x02\x00", /* a TLS hello */
        "*1\r\n$4\r\nPING\r\n", /* RESP */
    };
    struct http_req r;
    size_t k;

    for (k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
        cr_assert_eq(parse_str(bad[k], &r), HTTP_REQ_BAD, "case %zu", k);
    }
}

/* ---------------- Fuzzing ---------------- */

static unsigned long fuzz_seed = 12345;

static unsigned fuzz_rand(unsigned n)
{
    fuzz_seed = fuzz_seed * 6364136223846793005UL + 1442695040888963407UL;
    return n == 0 ? 0 : (unsigned)((fuzz_seed >> 33) % n);
}

/* An independent reading of a head the parser accepted: a token method, a
 * visible-ASCII target, HTTP/D.D, every line ends in CRLF, no CR or LF
 * anywhere else, no line starts with a blank, and the head ends with the
 * blank line. */
static int head_valid(const char *p, size_t n, const struct http_req *r)
{
    static const char tchars[] = "!#$%&'*+-.^_`|~";
    size_t k;

    if (n < 4 || memcmp(p + n - 4, "\r\n\r\n", 4) != 0 || r->method != p ||
        r->method_len == 0 || r->target_len == 0 ||
        r->target != p + r->method_len + 1) {
        return 0;
    }
    for (k = 0; k < r->method_len; k++) {
        unsigned char ch = (unsigned char)p[k];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
              (ch >= '0' && ch <= '9') || (ch && strchr(tchars, ch)))) {
            return 0;
        }
    }
    for (k = 0; k < r->target_len; k++) {
        if (r->target[k] < 0x21 || r->target[k] > 0x7e) {
            return 0;
        }
    }
    for (k = 0; k + 1 < n; k++) {
        if (p[k] == '\r' && p[k + 1] != '\n') {
            return 0;
        }
        if (p[k] == '\n' && (k == 0 || p[k - 1] != '\r')) {
            return 0;
        }
        if (p[k] == '\n' && (p[k + 1] == ' ' || p[k + 1] == '\t')) {
            return 0;
        }
        if (p[k] == '\0') {
            return 0;
        }
    }
    return r->major >= 0 && r->major <= 9 && r->minor >= 0 && r->minor <= 9;
}

/* Parses every prefix of `in` from an exact-size copy and checks the
 * verdicts hold together. Returns the verdict of the whole input. */
static enum http_req_status fuzz_prefixes(const char *in, size_t n)
{
    enum http_req_status prev = HTTP_REQ_MORE, st;
    size_t done_len = 0, k;
    struct http_req r;

    for (k = 0; k <= n; k++) {
        char *copy = malloc(k > 0 ? k : 1);
        cr_assert_not_null(copy);
        memcpy(copy, in, k);
        st = http_req_parse(copy, k, &r);
        if (prev == HTTP_REQ_BAD) {
            cr_assert_eq(st, HTTP_REQ_BAD, "BAD went back at %zu", k);
        }
        if (prev == HTTP_REQ_DONE) {
            cr_assert_eq(st, HTTP_REQ_DONE, "DONE went back at %zu", k);
            cr_assert_eq(r.head_len, done_len);
        }
        if (st == HTTP_REQ_DONE) {
            cr_assert(r.head_len <= k);
            cr_assert(head_valid(copy, r.head_len, &r),
                      "accepted an invalid head of %zu bytes", r.head_len);
            done_len = r.head_len;
        }
        prev = st;
        free(copy);
    }
    return prev;
}

/* Feeds `in` in random pieces into a bounded buffer, parsing after each,
 * as the endpoint does; the verdict must be the whole input's. */
static void fuzz_splits(const char *in, size_t n, enum http_req_status want)
{
    char buf[512];
    size_t used = 0;
    enum http_req_status st = HTTP_REQ_MORE;
    struct http_req r;

    cr_assert(n <= sizeof(buf));
    while (used < n && st == HTTP_REQ_MORE) {
        size_t piece = 1 + fuzz_rand(16);
        if (piece > n - used) {
            piece = n - used;
        }
        memcpy(buf + used, in + used, piece);
        used += piece;
        st = http_req_parse(buf, used, &r);
    }
    if (n == 0) {
        st = http_req_parse(buf, 0, &r);
    }
    cr_assert_eq(st, want, "split feed gave %d, whole %d", st, want);
}

static const char *const fuzz_seeds[] = {
    ("GET /metrics HTTP/1.1\r\nHost: localhost:9100\r\nUser-Agent: "
     "Prometheus/2.45.0\r\nAccept: text/plain;version=0.0.4\r\n\r\n"),
    "GET /metrics HTTP/1.0\r\n\r\n",
    "HEAD / HTTP/1.1\r\nX: \t y\r\n\r\n",
};

/* One mutated input: a seed with byte flips, insertions of interesting
 * bytes, deletions, truncation; or plain random bytes. */
static size_t fuzz_input(char *out, size_t cap)
{
    static const char interesting[] = "\r\n :\t\x7f\x80\x00/HTP.1?";
    const char *seed;
    size_t n, k, muts;

    if (fuzz_rand(5) == 0) {
        n = fuzz_rand((unsigned)cap);
        for (k = 0; k < n; k++) {
            out[k] = (char)fuzz_rand(256);
        }
        return n;
    }
    seed = fuzz_seeds[fuzz_rand(3)];
    n = strlen(seed);
    memcpy(out, seed, n);
    muts = fuzz_rand(4);
    for (k = 0; k < muts && n > 0; k++) {
        size_t at = fuzz_rand((unsigned)n);
        switch (fuzz_rand(4)) {
        case 0:
            out[at] = (char)fuzz_rand(256);
            break;
        case 1:
            out[at] = interesting[fuzz_rand(sizeof(interesting) - 1)];
            break;
        case 2:
            if (n < cap) {
                memmove(out + at + 1, out + at, n - at);
                out[at] = interesting[fuzz_rand(sizeof(interesting) - 1)];
                n++;
            }
            break;
        default:
            memmove(out + at, out + at + 1, n - at - 1);
            n--;
            break;
        }
    }
    if (fuzz_rand(3) == 0 && n > 0) {
        n = fuzz_rand((unsigned)n); /* truncated */
    }
    return n;
}

Test(http_req, fuzz)
{
    char in[400];
    unsigned round, done = 0, bad = 0, more = 0;

    for (round = 0; round < 3000; round++) {
        size_t n = fuzz_input(in, sizeof(in));
        enum http_req_status st = fuzz_prefixes(in, n);
        fuzz_splits(in, n, st);
        done += st == HTTP_REQ_DONE;
        bad += st == HTTP_REQ_BAD;
        more += st == HTTP_REQ_MORE;
    }
    /* The run exercised every verdict, not just one. */
    cr_assert(done > 100 && bad > 100 && more > 100, "done %u bad %u more %u",
              done, bad, more);
}
