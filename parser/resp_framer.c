/* Reply framer: finds where each complete reply ends in an upstream's byte
 * stream, without building reply objects and without keeping the bytes.
 *
 * Why our own and not hiredis: the hiredis reader in Debian (0.14.1) refuses
 * replies nested deeper than 7 levels, and Redis sends deeper ones (COMMAND
 * DOCS; a Lua script that returns a table holding itself makes Redis nest
 * thousands of levels); it also reads RESP2 only.
 *
 * Framing needs no stack: a frame is complete when no value is owed any
 * more. `owed` starts at 1 for the frame's value; every value read pays one,
 * an aggregate header adds its element count, and an attribute (`|`) adds
 * its 2n elements without paying, because the value it describes follows it.
 * So a reply of any depth is framed in constant memory, and a reply split
 * across any number of reads is scanned exactly once.
 *
 * A line (a simple string, error, integer, any RESP3 scalar line) ends at
 * its first CRLF, as hiredis and Redis's own reader (redis-cli) read it: a
 * bare LF or a bare CR inside it is content. Reading the line to its first
 * '\n' instead would end the reply where a client's reader does not, so the
 * proxy and the client would disagree on which reply answers which request.
 * resp_value.c reads lines the same way; tests/fuzz/fuzz_reply_diff.c holds
 * the two parsers to one reading of any bytes. A blob's payload must be
 * followed by CRLF, as resp_value.c checks it.
 *
 * It understands every RESP2 and RESP3 type: lines (+ - : _ , # ( ), blobs
 * ($ ! = with a length, -1 meaning null for $), aggregates (* ~ > with n
 * elements, % with 2n, | an attribute of 2n that precedes the value it
 * describes). Streamed (?-length) RESP3 aggregates are not sent by Redis and
 * are refused, and so are lengths no Redis reply can have (see FR_MAX_BLOB
 * and FR_MAX_ELEMENTS): a garbled header must not wrap the arithmetic.
 *
 * Each frame is reported with the type byte of its value (after any
 * attribute that precedes it), so the caller can tell a RESP3 push (`>`),
 * which answers no request, from a reply. */
#include "parser/resp.h"

#include <stdlib.h>
#include <string.h>

/* Longest length accepted: 19 digits, so the number cannot wrap. */
#define FR_MAX_DIGITS 19

/* Largest blob accepted: what a signed 64-bit length can say (Redis and
 * hiredis use long long lengths), minus its CRLF, so payload and CRLF fit
 * in one. resp_value.c accepts the same. */
#define FR_MAX_BLOB (0x7fffffffffffffffULL - 2)

/* Most elements of one aggregate (a map counts keys and values): hiredis's
 * default limit (REDIS_READER_MAX_ARRAY_ELEMENTS), far above any reply. */
#define FR_MAX_ELEMENTS 0xffffffffULL

/* One frame found and not yet reported. */
struct fr_end {
    unsigned long long end; /* stream offset just past the frame */
    char type;              /* type byte of its value (not of attributes) */
};

enum fr_state {
    FR_TYPE,    /* at the type byte of a value */
    FR_LINE,    /* inside a line whose content we skip, until CRLF */
    FR_NUM,     /* inside a length line: sign and digits, until \r */
    FR_NUM_LF,  /* after the \r of a length line */
    FR_BLOB,    /* skipping blob payload */
    FR_BLOB_CR, /* at the \r after a blob's payload */
    FR_BLOB_LF, /* at the \n after a blob's payload */
};

struct resp_framer {
    enum fr_state state;     /* where the scan is */
    char type;               /* type byte of the value being read */
    int neg;                 /* the length line had a '-' */
    int line_cr;             /* the line's last byte scanned was \r */
    int ndigits;             /* digits seen in the length line */
    char top;                /* type of the top-level value being read */
    unsigned long long num;  /* the length being parsed */
    unsigned long long skip; /* blob payload bytes left to skip */
    unsigned long long owed; /* values still owed by the current frame,
                                0 between frames */
    int top_known;           /* the frame's value type is known */
    unsigned long long fed;  /* stream offset scanned up to */
    unsigned long long last; /* stream offset where the last frame ended */
    struct fr_end *ends;     /* owned: complete, unreported frames */
    size_t nends;            /* used entries of ends */
    size_t head;             /* next entry to report */
    size_t cap;              /* allocated entries of ends */
    int failed;              /* 0 or a sticky RESP_E* */
};

struct resp_framer *resp_framer_new(void)
{
    struct resp_framer *fr = calloc(1, sizeof(*fr));

    if (fr != NULL) {
        fr->state = FR_TYPE;
    }
    return fr;
}

void resp_framer_free(struct resp_framer *fr)
{
    if (fr == NULL) {
        return;
    }
    free(fr->ends);
    free(fr);
}

/* Records a frame ending at stream offset `end`. */
static int fr_push_end(struct resp_framer *fr, unsigned long long end)
{
    struct fr_end *e;

    if (fr->head == fr->nends) {
        fr->head = 0;
        fr->nends = 0;
    }
    if (fr->nends == fr->cap) {
        size_t cap = fr->cap ? fr->cap * 2 : 16;
        struct fr_end *p = realloc(fr->ends, cap * sizeof(*p));
        if (p == NULL) {
            return RESP_ENOMEM;
        }
        fr->ends = p;
        fr->cap = cap;
    }
    e = &fr->ends[fr->nends++];
    e->end = end;
    e->type = fr->top;
    return RESP_OK;
}

/* A value just ended at stream offset `end`: pay for it, and record a
 * frame when nothing is owed any more. */
static int fr_value_done(struct resp_framer *fr, unsigned long long end)
{
    if (--fr->owed > 0) {
        return RESP_OK;
    }
    return fr_push_end(fr, end);
}

/* An aggregate header of `n` elements (n > 0): they are owed now. An
 * attribute adds them without paying for itself (the value it describes
 * is still owed); any other aggregate pays for itself with its last
 * element, so it adds n - 1. */
static int fr_open(struct resp_framer *fr, unsigned long long n, int attr)
{
    unsigned long long add = attr ? n : n - 1;

    if (fr->owed > ~0ULL - add) {
        return RESP_EPROTO;
    }
    fr->owed += add;
    return RESP_OK;
}

/* The length line of `fr->type` is complete; `end` is just past its \n. */
static int fr_length_done(struct resp_framer *fr, unsigned long long end)
{
    unsigned long long n = fr->num;
    char t = fr->type;

    fr->state = FR_TYPE;
    if (fr->neg) {
        /* Only -1 is meaningful: a null blob or a null array (RESP3 has
         * `_` for its nulls). Written "-1" exactly, as Redis does. */
        if (n != 1 || fr->ndigits != 1 || (t != '$' && t != '*')) {
            return RESP_EPROTO;
        }
        return fr_value_done(fr, end);
    }
    if (t == '$' || t == '!' || t == '=') {
        if (n > FR_MAX_BLOB) {
            return RESP_EPROTO;
        }
        fr->skip = n;
        fr->state = n > 0 ? FR_BLOB : FR_BLOB_CR;
        return RESP_OK;
    }
    if (n > FR_MAX_ELEMENTS) {
        return RESP_EPROTO;
    }
    if (t == '%' || t == '|') {
        n *= 2; /* pairs: keys and values */
    }
    if (n == 0) {
        return t == '|' ? RESP_OK : fr_value_done(fr, end);
    }
    return fr_open(fr, n, t == '|');
}

/* Scans bytes p[0..n) that start at stream offset fr->fed. */
static int fr_scan(struct resp_framer *fr, const char *p, size_t n)
{
    size_t i = 0;
    int rc = RESP_OK;

    while (i < n && rc == RESP_OK) {
        char ch = p[i];
        switch (fr->state) {
        case FR_TYPE:
            fr->type = ch;
            if (fr->owed == 0) {
                fr->owed = 1; /* a new frame */
                fr->top_known = 0;
            }
            if (!fr->top_known && fr->owed == 1 && ch != '|') {
                /* Only the frame's own value (or, after a top-level
                 * attribute, the value it describes) starts when one
                 * value is owed and no type is known yet. */
                fr->top = ch;
                fr->top_known = 1;
            }
            i++;
            if (strchr("+-:_,#(", ch) != NULL && ch != '\0') {
                fr->state = FR_LINE;
                fr->line_cr = 0;
            } else if (strchr("$!=*~>%|", ch) != NULL && ch != '\0') {
                fr->state = FR_NUM;
                fr->neg = 0;
                fr->ndigits = 0;
                fr->num = 0;
            } else {
                rc = RESP_EPROTO;
            }
            break;
        case FR_LINE: {
            /* The line ends at the first \n right after a \r, which may
             * have come in the previous feed. */
            const char *nl = memchr(p + i, '\n', n - i);
            size_t at;
            int cr;
            if (nl == NULL) {
                fr->line_cr = p[n - 1] == '\r';
                i = n;
                break;
            }
            at = (size_t)(nl - p);
            cr = at > i ? p[at - 1] == '\r' : fr->line_cr;
            i = at + 1;
            fr->line_cr = 0;
            if (cr) {
                fr->state = FR_TYPE;
                rc = fr_value_done(fr, fr->fed + i);
            }
            break;
        }
        case FR_NUM:
            i++;
            if (ch == '-' && fr->ndigits == 0 && !fr->neg) {
                fr->neg = 1;
            } else if (ch >= '0' && ch <= '9' && fr->ndigits < FR_MAX_DIGITS) {
                /* 19 digits always fit in 64 bits: no wrap-around. */
                fr->num = fr->num * 10 + (unsigned long long)(ch - '0');
                fr->ndigits++;
            } else if (ch == '\r' && fr->ndigits > 0) {
                fr->state = FR_NUM_LF;
            } else {
                rc = RESP_EPROTO;
            }
            break;
        case FR_NUM_LF:
            i++;
            rc = ch == '\n' ? fr_length_done(fr, fr->fed + i) : RESP_EPROTO;
            break;
        case FR_BLOB: {
            size_t take = n - i;
            if ((unsigned long long)take > fr->skip) {
                take = (size_t)fr->skip;
            }
            i += take;
            fr->skip -= take;
            if (fr->skip == 0) {
                fr->state = FR_BLOB_CR;
            }
            break;
        }
        case FR_BLOB_CR:
            i++;
            fr->state = FR_BLOB_LF;
            rc = ch == '\r' ? RESP_OK : RESP_EPROTO;
            break;
        case FR_BLOB_LF:
            i++;
            fr->state = FR_TYPE;
            rc = ch == '\n' ? fr_value_done(fr, fr->fed + i) : RESP_EPROTO;
            break;
        }
    }
    fr->fed += i;
    return rc;
}

int resp_framer_feed(struct resp_framer *fr, const char *p, size_t n)
{
    int rc;

    if (fr->failed != 0) {
        return fr->failed;
    }
    rc = fr_scan(fr, p, n);
    if (rc != RESP_OK) {
        fr->failed = rc;
    }
    return RESP_OK;
}

int resp_framer_next_typed(struct resp_framer *fr, size_t *len, char *type)
{
    if (fr->head < fr->nends) {
        const struct fr_end *e = &fr->ends[fr->head++];
        *len = (size_t)(e->end - fr->last);
        if (type != NULL) {
            *type = e->type;
        }
        fr->last = e->end;
        return RESP_OK;
    }
    if (fr->failed != 0) {
        return fr->failed;
    }
    return RESP_AGAIN;
}

int resp_framer_next(struct resp_framer *fr, size_t *len)
{
    return resp_framer_next_typed(fr, len, NULL);
}
