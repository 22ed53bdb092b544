/* RESP input: the request reader (client side) and the reply framer (upstream
 * side). Both wrap the hiredis reader; hiredis types never leave resp.c.
 *
 * Request reader: bytes in, `struct resp_cmd` out. A command keeps its wire
 * form (`raw`): for a RESP array it is the exact bytes the client sent, so the
 * proxy can forward them untouched; for an inline command (`GET k\r\n`) it is
 * the RESP encoding of the split arguments. Arguments are spans into `raw`.
 * Every client-declared size is checked against `struct resp_limits` before
 * anything sized by it is allocated or buffered.
 *
 * Reply framer: bytes in, lengths of complete replies out (every RESP2 and
 * RESP3 type, nested, attributes included). It allocates no reply objects;
 * the caller keeps the bytes. */
#ifndef PX_PARSER_RESP_H
#define PX_PARSER_RESP_H

#include <stddef.h>

#define RESP_OK     0
#define RESP_AGAIN  1  /* need more bytes */
#define RESP_EPROTO -1 /* protocol error: see resp_reader_error() */
#define RESP_ENOMEM -2

/* Redis defaults: proto-max-bulk-len, 1M elements, PROTO_INLINE_MAX_SIZE. */
#define RESP_DEFAULT_MAX_BULK     (512ULL * 1024 * 1024)
#define RESP_DEFAULT_MAX_ELEMENTS (1024ULL * 1024)
#define RESP_DEFAULT_MAX_INLINE   (64ULL * 1024)

struct resp_limits {
    unsigned long long max_bulk;     /* largest bulk string, bytes */
    unsigned long long max_elements; /* largest request array */
    unsigned long long max_inline;   /* longest inline line or header line */
};

/* One argument: a span of `raw`. */
struct resp_arg {
    size_t off; /* offset into cmd->raw */
    size_t len; /* bytes */
};

/* One parsed request. Owns everything it points to: one allocation, or
 * two for a large request read whole, whose raw is the reader's buffer
 * (taken, not copied); resp_cmd_free knows which. */
struct resp_cmd {
    int argc;              /* >= 1 */
    struct resp_arg *argv; /* argc spans into raw; owned with the cmd */
    char *raw;             /* RESP wire form of the request; owned */
    size_t raw_len;        /* bytes in raw */
};

/* Argument i's bytes (not NUL-terminated); `*len` receives its length. */
static inline const char *resp_cmd_arg(const struct resp_cmd *c, int i,
                                       size_t *len)
{
    *len = c->argv[i].len;
    return c->raw + c->argv[i].off;
}

/* True when p[0..len) is the lower-case `word`, ignoring ASCII case
 * (command names and options are case-insensitive; no locale). */
int resp_word_is(const char *p, size_t len, const char *word);

/* True when argument i of `c` exists and is `word`, ignoring case. */
static inline int resp_cmd_arg_is(const struct resp_cmd *c, int i,
                                  const char *word)
{
    size_t len;
    const char *p;

    if (i < 0 || i >= c->argc) {
        return 0;
    }
    p = resp_cmd_arg(c, i, &len);
    return resp_word_is(p, len, word);
}

/* Parses p[0..n) as a signed 64-bit decimal the way Redis's string2ll
 * does: an optional '-', no '+', no blanks, no leading zeros, no overflow.
 * 0 on success, -1 otherwise. */
int resp_parse_ll(const char *p, size_t n, long long *v);

/* Frees a command. Accepts NULL. */
void resp_cmd_free(struct resp_cmd *c);

/* Builds a command from explicit arguments (used for commands the proxy makes
 * itself). Returns NULL on allocation failure. */
struct resp_cmd *resp_cmd_new(int argc, const char *const *argv,
                              const size_t *lens);

/* A copy of `c` whose argument i is p[0..n) instead (i out of range: an
 * exact copy). NULL on allocation failure. */
struct resp_cmd *resp_cmd_with_arg(const struct resp_cmd *c, int i,
                                   const char *p, size_t n);

struct resp_reader;

/* A reader with the given limits (NULL: the defaults). NULL on ENOMEM. */
struct resp_reader *resp_reader_new(const struct resp_limits *lim);

/* Frees the reader and any buffered bytes. Accepts NULL. */
void resp_reader_free(struct resp_reader *rd);

/* Buffers `n` bytes. RESP_OK or RESP_ENOMEM. The bytes are copied. */
int resp_reader_feed(struct resp_reader *rd, const char *p, size_t n);

/* Next complete command. RESP_OK sets `*out` (caller owns it), RESP_AGAIN
 * means more bytes are needed, RESP_EPROTO is sticky: the reader stays failed
 * and resp_reader_error() tells why. Empty lines and arrays of a count of
 * zero or less (`*0`, `*-1`, `*-10`) are skipped as Redis does. */
int resp_reader_next(struct resp_reader *rd, struct resp_cmd **out);

/* The reason of the last RESP_EPROTO, in Redis's words, for example
 * "Protocol error: invalid bulk length". Static storage or owned by rd. */
const char *resp_reader_error(const struct resp_reader *rd);

/* Bytes fed and not yet returned as commands. */
size_t resp_reader_pending(const struct resp_reader *rd);

struct resp_framer;

/* A reply framer. NULL on ENOMEM. */
struct resp_framer *resp_framer_new(void);

/* Frees the framer. Accepts NULL. */
void resp_framer_free(struct resp_framer *fr);

/* Tells the framer about `n` more bytes of the stream. The caller keeps its
 * own copy: frames are reported as lengths into the caller's stream. */
int resp_framer_feed(struct resp_framer *fr, const char *p, size_t n);

/* Length of the next complete reply, counted from the end of the previous
 * one. RESP_OK sets `*len`, RESP_AGAIN means incomplete, RESP_EPROTO means the
 * stream is not RESP (sticky). */
int resp_framer_next(struct resp_framer *fr, size_t *len);

/* resp_framer_next(), also giving the frame's type byte in `*type` (when
 * not NULL): the type of its value, after any attribute (`|`) before it, so
 * '>' marks a RESP3 push. */
int resp_framer_next_typed(struct resp_framer *fr, size_t *len, char *type);

#endif /* PX_PARSER_RESP_H */
