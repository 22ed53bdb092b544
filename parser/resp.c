/* RESP input: the request reader (client side; the reply framer is in
 * resp_framer.c).
 *
 * Request reader. Fed bytes are appended to `in`; the unconsumed part is
 * in.data[start..len) and always begins at a frame boundary. resp_reader_next
 * runs a small resumable scanner over it:
 *
 *   FRAME --'*'--> COUNT --> (TYPE --> HEADER --> BODY) x count --> DONE
 *     \--other--> INLINE
 *
 * The scanner checks every header line as soon as its CRLF is there (or as
 * soon as it is too long to be one), with Redis's rules and texts, and skips
 * bulk payloads by arithmetic. So a client declaring a 4 GB bulk or 100M
 * elements is refused before we buffer anything it sized, and a large payload
 * arriving in small chunks costs O(chunk) per feed, never a rescan.
 *
 * Only a complete, validated RESP frame is handed to hiredis, which parses it
 * and reports each argument through our callbacks. A callback receives a
 * pointer into hiredis's private copy; we turn it into an offset in the
 * frame (see hr_stream_offset) and record it in the command, whose `raw` is
 * our own copy of the frame. hiredis is thus never given inline bytes, never
 * sees a half-validated header (0.14 has no size limits of its own), and its
 * state is clean after every frame.
 *
 * Inline commands (`GET k\r\n`) are split here the way Redis's sdssplitargs
 * does and re-encoded as RESP, so the proxy can forward any command as is.
 *
 * The reply framer lives in resp_framer.c (hiredis 0.14 cannot frame replies
 * nested deeper than 7 levels). */
#include "parser/resp.h"
#include "parser/resp_cmd.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "parser/buf.h"

/* hiredis 1.x changed createArray's count from int to size_t. */
#if defined(HIREDIS_MAJOR) && HIREDIS_MAJOR >= 1
typedef size_t hr_count_t;
#else
typedef int hr_count_t;
#endif

/* Once a request larger than this has been parsed, the hiredis reader is
 * dropped (and recreated on demand) so its copy of the request is released;
 * hiredis itself keeps up to REDIS_READER_MAX_BUF of idle buffer. */
#define RD_HR_RECYCLE_BYTES ((size_t)16 * 1024)

/* An input buffer left empty and larger than this is released, so that one
 * big request does not pin its memory for the life of the connection. */
#define RD_KEEP_CAP_BYTES ((size_t)256 * 1024)

/* First allocation of the inline argument span array. */
#define RD_MIN_SPANS 16

/* Longest decimal a header line can usefully hold: "-" and 19 digits. */
#define RD_NUM_MAX 20

/* Redis's error texts (networking.c), verbatim. */
static const char ERR_MBULK_LEN[] = "Protocol error: invalid multibulk length";
static const char ERR_BULK_LEN[] = "Protocol error: invalid bulk length";
static const char ERR_MBULK_BIG[] =
    "Protocol error: too big mbulk count string";
static const char ERR_BULK_BIG[] = "Protocol error: too big bulk count string";
static const char ERR_INLINE_BIG[] = "Protocol error: too big inline request";
static const char ERR_QUOTES[] = "Protocol error: unbalanced quotes in request";
/* Ours: hiredis and the scanner disagree about a frame (a bug, not input). */
static const char ERR_INTERNAL[] = "Protocol error: unexpected frame layout";

/* Where the request scanner stands. */
enum rd_state {
    RD_FRAME,  /* at a frame boundary: the next byte picks RESP or inline */
    RD_INLINE, /* inside an inline line, looking for its '\n' */
    RD_COUNT,  /* inside the `*<count>` line */
    RD_TYPE,   /* at the type byte of the next element (must be '$') */
    RD_HEADER, /* inside a `$<len>` line */
    RD_BODY,   /* skipping a bulk payload and its CRLF */
    RD_DONE,   /* the frame is complete; its command is not yet built */
    RD_FAILED, /* protocol error, sticky */
};

/* Internal step result: the state changed, keep going. */
#define RD_NEXT 2

/* Results of reading a header line. */
enum rd_line {
    RD_LINE_OK,
    RD_LINE_AGAIN, /* no CRLF yet */
    RD_LINE_BIG,   /* longer than lim.max_inline */
    RD_LINE_BAD,   /* '\r' not followed by '\n' */
};

/* The request reader. Offsets named "from start" are relative to the first
 * unconsumed byte, so moving the buffer's contents never invalidates them. */
struct resp_reader {
    struct resp_limits lim;        /* copied at creation */
    enum rd_state state;           /* scanner position in the grammar */
    struct buf in;                 /* owned: fed bytes */
    size_t start;                  /* first unconsumed byte of in */
    size_t scan;                   /* bytes of the frame scanned, from start */
    size_t line;                   /* header line's first byte, from start */
    int nargs;                     /* declared count of the current frame */
    int left;                      /* elements not yet scanned */
    unsigned long long body;       /* payload + CRLF bytes still to skip */
    redisReader *hr;               /* owned; NULL until a frame needs it */
    redisReplyObjectFunctions fns; /* our callbacks (hiredis wants it
                                      mutable, so not a static const) */
    unsigned long long hr_fed;     /* bytes ever fed to hr */
    unsigned long long hr_base;    /* hr stream offset of the frame */
    struct resp_cmd *cur;          /* borrowed: the command the callbacks
                                      fill, only during redisReaderGetReply */
    int nfilled;                   /* arguments reported by the callbacks */
    const char *reject;            /* reason a callback returned NULL */
    struct buf tmp;                /* owned: unescaped inline arguments */
    struct resp_arg *spans;        /* owned: inline arguments, into tmp */
    size_t spans_cap;              /* entries allocated in spans */
    const char *err;               /* static text or errbuf; NULL if none */
    char errbuf[160];              /* formatted error text: room for
                                      "Protocol error: " + hiredis errstr */
};

/* ---------------- hiredis cursor access ---------------- */

/* These two helpers are the only code that reads redisReader's buf, len and
 * pos (hiredis has no accessors for them). hiredis holds a copy of the fed
 * stream whose unconsumed tail is buf[pos..len); between replies it drops
 * consumed bytes (after 1 KiB), but never during one. So while a callback
 * runs, buf[0] sits at stream offset `fed - len`, and after a reply the
 * stream offset just past it is `fed - (len - pos)`. Both were checked
 * against hiredis 0.14.1 (tests/unit/test_resp_*.c pin them). */
static unsigned long long
hr_stream_offset(const redisReader *r, unsigned long long fed, const char *p)
{
    return fed - r->len + (size_t)(p - r->buf);
}

/* Bytes fed to `r` that belong to no completed reply yet. */
static size_t hr_unread(const redisReader *r)
{
    return r->len - r->pos;
}

/* ---------------- Request reader: errors and buffer ---------------- */

/* Enters the sticky failed state with `msg` (static storage or rd->errbuf)
 * and releases everything buffered: nothing more will be parsed. */
static int rd_fail(struct resp_reader *rd, const char *msg)
{
    rd->state = RD_FAILED;
    rd->err = msg;
    buf_free(&rd->in);
    buf_free(&rd->tmp);
    free(rd->spans);
    rd->spans = NULL;
    rd->spans_cap = 0;
    rd->start = 0;
    if (rd->hr != NULL) {
        redisReaderFree(rd->hr);
        rd->hr = NULL;
    }
    return RESP_EPROTO;
}

/* Redis's text for an element that is not a bulk string. */
static const char *rd_type_error(struct resp_reader *rd, char type)
{
    snprintf(rd->errbuf, sizeof(rd->errbuf),
             "Protocol error: expected '$', got '%c'", type);
    return rd->errbuf;
}

/* Drops the current frame (n bytes) and returns to a frame boundary. */
static void rd_consume(struct resp_reader *rd, size_t n)
{
    rd->start += n;
    rd->scan = 0;
    rd->line = 0;
    rd->state = RD_FRAME;
    if (rd->start == rd->in.len) {
        rd->start = 0;
        if (rd->in.cap > RD_KEEP_CAP_BYTES) {
            buf_free(&rd->in);
        } else {
            buf_clear(&rd->in);
        }
    }
}

/* The unconsumed bytes: the current frame and whatever follows it. */
static const char *rd_base(const struct resp_reader *rd)
{
    return rd->in.data + rd->start;
}

static size_t rd_end(const struct resp_reader *rd)
{
    return rd->in.len - rd->start;
}

/* ---------------- Request reader: RESP frames ---------------- */

int resp_parse_ll(const char *p, size_t n, long long *v)
{
    unsigned long long m = 0;
    int neg = 0;
    size_t i = 0;

    if (n == 0 || n > RD_NUM_MAX) {
        return -1;
    }
    if (n == 1 && p[0] == '0') {
        *v = 0;
        return 0;
    }
    if (p[0] == '-') {
        neg = 1;
        i = 1;
    }
    if (i == n || p[i] < '1' || p[i] > '9') {
        return -1;
    }
    for (; i < n; i++) {
        unsigned d = (unsigned)(p[i] - '0');

        if (p[i] < '0' || p[i] > '9' || m > (ULLONG_MAX - d) / 10) {
            return -1;
        }
        m = m * 10 + d;
    }
    if (neg) {
        if (m > (unsigned long long)LLONG_MAX + 1) {
            return -1;
        }
        *v = m == (unsigned long long)LLONG_MAX + 1 ? LLONG_MIN : -(long long)m;
    } else {
        if (m > (unsigned long long)LLONG_MAX) {
            return -1;
        }
        *v = (long long)m;
    }
    return 0;
}

/* Finds the CRLF ending the header line whose text starts at rd->line.
 * Resumes where the previous call stopped, so a slow header costs O(bytes).
 * On RD_LINE_OK, `*cr` is the offset of its '\r' (from start). */
static enum rd_line rd_header_line(struct resp_reader *rd, size_t *cr)
{
    const char *base = rd_base(rd);
    size_t end = rd_end(rd);
    const char *p = memchr(base + rd->scan, '\r', end - rd->scan);
    size_t at;

    if (p == NULL) {
        rd->scan = end;
        return end - rd->line > rd->lim.max_inline ? RD_LINE_BIG
                                                   : RD_LINE_AGAIN;
    }
    at = (size_t)(p - base);
    rd->scan = at; /* if the '\n' is missing, resume at this '\r' */
    if (at - rd->line > rd->lim.max_inline) {
        return RD_LINE_BIG;
    }
    if (at + 1 == end) {
        return RD_LINE_AGAIN;
    }
    if (base[at + 1] != '\n') {
        return RD_LINE_BAD;
    }
    *cr = at;
    return RD_LINE_OK;
}

/* The `*<count>` line. A count of zero or less is skipped, as Redis does
 * (processMultibulkBuffer ignores a non-positive multibulk length). */
static int rd_step_count(struct resp_reader *rd)
{
    enum rd_line lr;
    long long n;
    size_t cr = 0;

    lr = rd_header_line(rd, &cr);
    if (lr == RD_LINE_AGAIN) {
        return RESP_AGAIN;
    }
    if (lr == RD_LINE_BIG) {
        return rd_fail(rd, ERR_MBULK_BIG);
    }
    if (lr == RD_LINE_BAD ||
        resp_parse_ll(rd_base(rd) + rd->line, cr - rd->line, &n) != 0) {
        return rd_fail(rd, ERR_MBULK_LEN);
    }
    if (n <= 0) {
        rd_consume(rd, cr + 2);
        return RD_NEXT;
    }
    if (n > INT_MAX || (unsigned long long)n > rd->lim.max_elements) {
        return rd_fail(rd, ERR_MBULK_LEN);
    }
    rd->nargs = (int)n;
    rd->left = (int)n;
    rd->scan = cr + 2;
    rd->state = RD_TYPE;
    return RD_NEXT;
}

/* The type byte of an element: requests hold bulk strings only. */
static int rd_step_type(struct resp_reader *rd)
{
    char c;

    if (rd->scan == rd_end(rd)) {
        return RESP_AGAIN;
    }
    c = rd_base(rd)[rd->scan];
    if (c != '$') {
        return rd_fail(rd, rd_type_error(rd, c));
    }
    rd->scan++;
    rd->line = rd->scan;
    rd->state = RD_HEADER;
    return RD_NEXT;
}

/* The `$<len>` line: checked before any of the payload is waited for. */
static int rd_step_header(struct resp_reader *rd)
{
    enum rd_line lr;
    long long n;
    size_t cr = 0;

    lr = rd_header_line(rd, &cr);
    if (lr == RD_LINE_AGAIN) {
        return RESP_AGAIN;
    }
    if (lr == RD_LINE_BIG) {
        return rd_fail(rd, ERR_BULK_BIG);
    }
    if (lr == RD_LINE_BAD ||
        resp_parse_ll(rd_base(rd) + rd->line, cr - rd->line, &n) != 0 ||
        n < 0 || (unsigned long long)n > rd->lim.max_bulk) {
        return rd_fail(rd, ERR_BULK_LEN);
    }
    rd->body = (unsigned long long)n + 2;
    rd->scan = cr + 2;
    rd->state = RD_BODY;
    return RD_NEXT;
}

/* Skips payload bytes. Like Redis and hiredis, the two bytes after the
 * payload are not checked to be CRLF. */
static int rd_step_body(struct resp_reader *rd)
{
    size_t avail = rd_end(rd) - rd->scan;

    if (avail < rd->body) {
        rd->scan += avail;
        rd->body -= avail;
        return RESP_AGAIN;
    }
    rd->scan += (size_t)rd->body;
    rd->body = 0;
    rd->left--;
    rd->state = rd->left == 0 ? RD_DONE : RD_TYPE;
    return RD_NEXT;
}

/* ---------------- Request reader: hiredis callbacks ---------------- */

/* Every callback receives the reader as task->privdata. A callback that
 * refuses returns NULL after recording why in rd->reject, because hiredis
 * 0.14 reports any NULL as "Out of memory". The frames we feed are already
 * validated, so refusals here are a second line of defence. The non-NULL
 * value returned is a token: no reply object is built. */

static void *rd_refuse(struct resp_reader *rd, const char *why)
{
    rd->reject = why;
    return NULL;
}

static void *rd_on_string(const redisReadTask *t, char *str, size_t len)
{
    struct resp_reader *rd = t->privdata;
    struct resp_cmd *c = rd->cur;
    struct resp_arg *a;

    if (t->type != REDIS_REPLY_STRING) {
        return rd_refuse(
            rd, rd_type_error(rd, t->type == REDIS_REPLY_ERROR ? '-' : '+'));
    }
    if (t->parent == NULL || t->parent->parent != NULL || t->idx < 0 ||
        t->idx >= c->argc) {
        return rd_refuse(rd, ERR_INTERNAL);
    }
    /* str points into hiredis's copy of c->raw: turn it into an offset. */
    a = &c->argv[t->idx];
    a->off = (size_t)(hr_stream_offset(rd->hr, rd->hr_fed, str) - rd->hr_base);
    a->len = len;
    if (a->off > c->raw_len || len > c->raw_len - a->off) {
        return rd_refuse(rd, ERR_INTERNAL);
    }
    rd->nfilled++;
    return rd;
}

static void *rd_on_array(const redisReadTask *t, hr_count_t n)
{
    struct resp_reader *rd = t->privdata;

    if (t->parent != NULL) {
        return rd_refuse(rd, rd_type_error(rd, '*'));
    }
    if ((long long)n != (long long)rd->cur->argc) {
        return rd_refuse(rd, ERR_INTERNAL);
    }
    return rd;
}

static void *rd_on_integer(const redisReadTask *t, long long v)
{
    (void)v;
    return rd_refuse(t->privdata, rd_type_error(t->privdata, ':'));
}

static void *rd_on_nil(const redisReadTask *t)
{
    struct resp_reader *rd = t->privdata;

    if (t->type == REDIS_REPLY_ARRAY) {
        return rd_refuse(rd, rd_type_error(rd, '*'));
    }
    return rd_refuse(rd, ERR_BULK_LEN);
}

static void rd_on_free(void *obj)
{
    (void)obj; /* tokens only: nothing to free */
}

/* Drops the hiredis reader; the next frame creates a fresh one. */
static void rd_drop_hr(struct resp_reader *rd)
{
    redisReaderFree(rd->hr);
    rd->hr = NULL;
    rd->hr_fed = 0;
}

/* Lets hiredis parse c->raw (one complete frame) and fill c->argv. */
static int rd_extract_args(struct resp_reader *rd, struct resp_cmd *c)
{
    void *reply = NULL;
    int rc;

    if (rd->hr == NULL) {
        rd->hr = redisReaderCreateWithFunctions(&rd->fns);
        if (rd->hr == NULL) {
            return RESP_ENOMEM;
        }
        rd->hr->privdata = rd;
        rd->hr_fed = 0;
    }
    if (redisReaderFeed(rd->hr, c->raw, c->raw_len) != REDIS_OK) {
        rd_drop_hr(rd);
        return RESP_ENOMEM;
    }
    rd->hr_base = rd->hr_fed;
    rd->hr_fed += c->raw_len;
    rd->cur = c;
    rd->nfilled = 0;
    rd->reject = NULL;
    rc = redisReaderGetReply(rd->hr, &reply);
    rd->cur = NULL;
    if (rc != REDIS_OK) {
        if (rd->reject != NULL) {
            return rd_fail(rd, rd->reject);
        }
        if (rd->hr->err == REDIS_ERR_OOM) {
            rd_drop_hr(rd);
            return RESP_ENOMEM;
        }
        snprintf(rd->errbuf, sizeof(rd->errbuf), "Protocol error: %s",
                 rd->hr->errstr);
        return rd_fail(rd, rd->errbuf);
    }
    if (reply == NULL || hr_unread(rd->hr) != 0 || rd->nfilled != c->argc) {
        return rd_fail(rd, ERR_INTERNAL);
    }
    if (c->raw_len > RD_HR_RECYCLE_BYTES) {
        rd_drop_hr(rd);
    }
    return RESP_OK;
}

/* The frame is complete: copy it into a command and let hiredis split it.
 * Sizing argv from the declared count is safe here, unlike at the header:
 * the whole frame has arrived, and each element took at least 6 of its
 * bytes ("$0\r\n\r\n"), so the allocation is proportional to bytes received
 * rather than to a number the client merely claimed. */
/* Gives the frame at the front of `in` (rd->scan bytes from offset 0) to
 * a new command as its raw, without copying it: a large request is held
 * once, not twice. The bytes after the frame stay in `in`, in a buffer of
 * their own. NULL when out of memory (nothing changed). */
static struct resp_cmd *rd_take_frame(struct resp_reader *rd)
{
    size_t n = rd->scan;
    struct resp_cmd *c;
    struct buf rest;

    buf_init(&rest);
    if (buf_append(&rest, rd->in.data + n, rd->in.len - n) != BUF_OK) {
        return NULL;
    }
    c = resp_cmd_alloc(rd->nargs, 0);
    if (c == NULL) {
        buf_free(&rest);
        return NULL;
    }
    /* Its spare capacity (it grew by doubling) was never written, so it
     * holds no memory; shrinking it could copy it (ASan's realloc does). */
    c->raw = rd->in.data;
    c->raw_len = n;
    rd->in = rest;
    return c;
}

static int rd_step_build(struct resp_reader *rd, struct resp_cmd **out)
{
    struct resp_cmd *c = NULL;
    int rc, taken = 0;

    if (rd->start == 0 && rd->scan > RD_KEEP_CAP_BYTES) {
        c = rd_take_frame(rd);
        taken = c != NULL;
    }
    if (c == NULL) {
        c = resp_cmd_alloc(rd->nargs, rd->scan);
        if (c == NULL) {
            return RESP_ENOMEM;
        }
        memcpy(c->raw, rd_base(rd), rd->scan);
    }
    rc = rd_extract_args(rd, c);
    if (rc != RESP_OK) {
        resp_cmd_free(c);
        return rc;
    }
    rd_consume(rd, taken ? 0 : c->raw_len);
    *out = c;
    return RESP_OK;
}

/* ---------------- Request reader: inline commands ---------------- */

/* isspace() in the C locale, without its locale and sign pitfalls. */
static int is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' ||
           c == '\r';
}

static int hex_value(char c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
        return c - 'A' + 10;
    }
    return -1;
}

/* The byte a double-quoted `\c` escape stands for. */
static char unescape(char c)
{
    switch (c) {
    case 'n':
        return '\n';
    case 'r':
        return '\r';
    case 't':
        return '\t';
    case 'b':
        return '\b';
    case 'a':
        return '\a';
    default:
        return c;
    }
}

/* Reads one argument starting at p[*pos] (not a blank) into `out`, which
 * has room for n - *pos more bytes: unescaping never lengthens the text.
 * Returns 0, or -1 for unbalanced quotes (a closing quote must be followed
 * by a blank or the end of the line). */
static int split_one(const char *p, size_t n, size_t *pos, char *out,
                     size_t *outlen)
{
    size_t i = *pos, o = 0;
    char q = 0; /* the open quote, if any */

    for (;;) {
        if (i == n) {
            if (q != 0) {
                return -1;
            }
            break;
        }
        if (q == 0) {
            if (p[i] == ' ' || p[i] == '\t' || p[i] == '\n' || p[i] == '\r') {
                break;
            }
            if (p[i] == '"' || p[i] == '\'') {
                q = p[i++];
            } else {
                out[o++] = p[i++];
            }
        } else if (p[i] == q) {
            if (i + 1 < n && !is_space(p[i + 1])) {
                return -1;
            }
            i++;
            break;
        } else if (p[i] != '\\' || i + 1 == n) {
            out[o++] = p[i++];
        } else if (q == '\'') {
            /* Single quotes know one escape: \'. */
            if (p[i + 1] == '\'') {
                i++;
            }
            out[o++] = p[i++];
        } else if (p[i + 1] == 'x' && i + 3 < n && hex_value(p[i + 2]) >= 0 &&
                   hex_value(p[i + 3]) >= 0) {
            out[o++] = (char)(hex_value(p[i + 2]) * 16 + hex_value(p[i + 3]));
            i += 4;
        } else {
            out[o++] = unescape(p[i + 1]);
            i += 2;
        }
    }
    *pos = i;
    *outlen = o;
    return 0;
}

/* Adds one span to rd->spans, growing it geometrically. */
static int rd_push_span(struct resp_reader *rd, size_t argc, size_t off,
                        size_t len)
{
    if (argc == rd->spans_cap) {
        size_t cap = rd->spans_cap == 0 ? RD_MIN_SPANS : rd->spans_cap * 2;
        struct resp_arg *s;

        if (cap > SIZE_MAX / sizeof(*s)) {
            return RESP_ENOMEM;
        }
        s = realloc(rd->spans, cap * sizeof(*s));
        if (s == NULL) {
            return RESP_ENOMEM;
        }
        rd->spans = s;
        rd->spans_cap = cap;
    }
    rd->spans[argc].off = off;
    rd->spans[argc].len = len;
    return RESP_OK;
}

/* Splits an inline line (sdssplitargs rules) into rd->tmp and rd->spans.
 * Sets `*argc` (0 for a blank line). RESP_OK, RESP_EPROTO for unbalanced
 * quotes (the caller reports it), or RESP_ENOMEM. */
static int rd_split(struct resp_reader *rd, const char *p, size_t n, int *argc)
{
    size_t i = 0, count = 0, len;

    buf_clear(&rd->tmp);
    if (n > 0 && buf_reserve(&rd->tmp, n) != BUF_OK) {
        return RESP_ENOMEM;
    }
    for (;;) {
        while (i < n && is_space(p[i])) {
            i++;
        }
        if (i == n) {
            break;
        }
        if (split_one(p, n, &i, rd->tmp.data + rd->tmp.len, &len) != 0) {
            return RESP_EPROTO;
        }
        if (count == INT_MAX) {
            return RESP_EPROTO;
        }
        if (rd_push_span(rd, count, rd->tmp.len, len) != RESP_OK) {
            return RESP_ENOMEM;
        }
        buf_commit(&rd->tmp, len);
        count++;
    }
    *argc = (int)count;
    return RESP_OK;
}

/* An inline command: one line up to '\n', a trailing '\r' stripped. A line
 * longer than max_inline is refused even when its '\n' is already here
 * (Redis only checks lines still missing one), so that the outcome never
 * depends on how the bytes were split into reads. The same holds for header
 * lines in rd_header_line. */
static int rd_step_inline(struct resp_reader *rd, struct resp_cmd **out)
{
    const char *base = rd_base(rd);
    size_t end = rd_end(rd);
    const char *nl = memchr(base + rd->scan, '\n', end - rd->scan);
    struct resp_cmd_src a;
    struct resp_cmd *c;
    size_t line, n;
    const char *nul;
    int argc = 0, rc;

    if (nl == NULL) {
        rd->scan = end;
        return end > rd->lim.max_inline ? rd_fail(rd, ERR_INLINE_BIG)
                                        : RESP_AGAIN;
    }
    line = (size_t)(nl - base);
    if (line > rd->lim.max_inline) {
        return rd_fail(rd, ERR_INLINE_BIG);
    }
    n = line;
    if (n > 0 && base[n - 1] == '\r') {
        n--;
    }
    /* Redis splits the line as a C string: a NUL ends it. */
    nul = memchr(base, '\0', n);
    if (nul != NULL) {
        n = (size_t)(nul - base);
    }
    rc = rd_split(rd, base, n, &argc);
    if (rc == RESP_EPROTO) {
        return rd_fail(rd, ERR_QUOTES);
    }
    if (rc != RESP_OK) {
        return rc;
    }
    if (argc == 0 || rd->spans == NULL) { /* spans is set when argc > 0 */
        rd_consume(rd, line + 1);
        return RD_NEXT;
    }
    a = (struct resp_cmd_src){ .base = rd->tmp.data, .spans = rd->spans };
    c = resp_cmd_encode(argc, &a);
    if (c == NULL) {
        return RESP_ENOMEM;
    }
    rd_consume(rd, line + 1);
    *out = c;
    return RESP_OK;
}

/* ---------------- Request reader: public API ---------------- */

struct resp_reader *resp_reader_new(const struct resp_limits *lim)
{
    struct resp_reader *rd = calloc(1, sizeof(*rd));

    if (rd == NULL) {
        return NULL;
    }
    if (lim != NULL) {
        rd->lim = *lim;
    } else {
        rd->lim.max_bulk = RESP_DEFAULT_MAX_BULK;
        rd->lim.max_elements = RESP_DEFAULT_MAX_ELEMENTS;
        rd->lim.max_inline = RESP_DEFAULT_MAX_INLINE;
    }
    rd->state = RD_FRAME;
    buf_init(&rd->in);
    buf_init(&rd->tmp);
    rd->fns = (redisReplyObjectFunctions){
        .createString = rd_on_string,
        .createArray = rd_on_array,
        .createInteger = rd_on_integer,
        .createNil = rd_on_nil,
        .freeObject = rd_on_free,
    };
    return rd;
}

void resp_reader_free(struct resp_reader *rd)
{
    if (rd == NULL) {
        return;
    }
    if (rd->hr != NULL) {
        redisReaderFree(rd->hr);
    }
    buf_free(&rd->in);
    buf_free(&rd->tmp);
    free(rd->spans);
    free(rd);
}

int resp_reader_feed(struct resp_reader *rd, const char *p, size_t n)
{
    size_t live;

    if (rd->state == RD_FAILED || n == 0) {
        return RESP_OK; /* after an error, input is dropped */
    }
    /* Move the unconsumed bytes to the front when that is no dearer than
     * what was consumed (amortised O(1) per byte), or when it may spare a
     * reallocation. */
    live = rd->in.len - rd->start;
    if (rd->start > 0 && (live <= rd->start || buf_avail(&rd->in) < n)) {
        buf_consume(&rd->in, rd->start);
        rd->start = 0;
    }
    return buf_append(&rd->in, p, n) == BUF_OK ? RESP_OK : RESP_ENOMEM;
}

int resp_reader_next(struct resp_reader *rd, struct resp_cmd **out)
{
    int rc = RD_NEXT;

    *out = NULL;
    while (rc == RD_NEXT) {
        switch (rd->state) {
        case RD_FRAME:
            if (rd_end(rd) == 0) {
                return RESP_AGAIN;
            }
            rd->state = rd_base(rd)[0] == '*' ? RD_COUNT : RD_INLINE;
            rd->scan = rd->state == RD_COUNT ? 1 : 0;
            rd->line = rd->scan;
            break;
        case RD_INLINE:
            rc = rd_step_inline(rd, out);
            break;
        case RD_COUNT:
            rc = rd_step_count(rd);
            break;
        case RD_TYPE:
            rc = rd_step_type(rd);
            break;
        case RD_HEADER:
            rc = rd_step_header(rd);
            break;
        case RD_BODY:
            rc = rd_step_body(rd);
            break;
        case RD_DONE:
            rc = rd_step_build(rd, out);
            break;
        case RD_FAILED:
            rc = RESP_EPROTO;
            break;
        }
    }
    return rc;
}

const char *resp_reader_error(const struct resp_reader *rd)
{
    return rd->err != NULL ? rd->err : "";
}

size_t resp_reader_pending(const struct resp_reader *rd)
{
    return rd->in.len - rd->start;
}
