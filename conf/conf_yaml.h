/* conf_yaml: what the YAML loaders of conf/ (proxy.yaml in conf.c,
 * limits.yaml in limits.c) share: reading a file whole with a size cap,
 * collecting errors as "file:line:column: message" in a caller buffer,
 * quoting rejected text back, and the scalar and number helpers over
 * libyaml's document nodes.
 *
 * Internal to conf/: only the .c files of conf/ include it. Its codes equal
 * those of conf.h and limits.h (each user checks that with a static
 * assertion).
 * Leaf layer: libc and libyaml only, no logging, no globals; allocation
 * failure returns CONF_YAML_ENOMEM. */
#ifndef PX_CONF_CONF_YAML_H
#define PX_CONF_CONF_YAML_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <yaml.h>

#define CONF_YAML_OK     0
#define CONF_YAML_ERR    -1
#define CONF_YAML_ENOMEM -2

#if defined(__GNUC__)
#define CONF_YAML_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define CONF_YAML_PRINTF(fmt, args)
#endif

/* Bytes of a rejected value quoted back in an error message, and the size
 * of the buffer conf_yaml_show() fills (every byte escaped, "...", NUL). */
#define CONF_YAML_SHOW_BYTES 64
#define CONF_YAML_SHOW_SIZE  (2 * CONF_YAML_SHOW_BYTES + 4)

/* Where the errors of one load go. Fill it with conf_yaml_diag_init(). */
struct conf_yaml_diag {
    const char *name; /* borrowed: file name used in messages */
    char *err;        /* borrowed: caller's buffer, may be NULL */
    size_t errlen;    /* size of err */
    size_t used;      /* bytes written to err, NUL excluded */
    int nerrors;      /* errors reported, written or not */
    int max_errors;   /* errors listed before giving up; 0 = no cap */
    bool stop;        /* the cap was hit, or the caller gave up: walk no
                         further */
};

/* Prepares `d` for a load of `name` (NULL: "(string)"). `err` may be NULL
 * or `errlen` 0; otherwise it is emptied. */
void conf_yaml_diag_init(struct conf_yaml_diag *d, const char *name, char *err,
                         size_t errlen, int max_errors);

/* Reports one error as "name:line:column: message" (or "name: message"
 * when `mark` is NULL), on a line of its own, truncating (always
 * NUL-terminated) when the buffer is full. With a cap, the error past
 * max_errors is replaced by "name: too many errors, stopping", d->stop is
 * set and later errors are dropped. */
CONF_YAML_PRINTF(3, 4)
void conf_yaml_error(struct conf_yaml_diag *d, const yaml_mark_t *mark,
                     const char *fmt, ...);

/* Reports why libyaml's parser `p` failed on `text` (`textlen` bytes, the
 * parser's input). CONF_YAML_ERR, or CONF_YAML_ENOMEM. */
int conf_yaml_syntax_error(struct conf_yaml_diag *d, const yaml_parser_t *p,
                           const char *text, size_t textlen);

/* Reads the whole file at `path` into `*out` (NUL-terminated, owned by the
 * caller, `*outlen` bytes before the NUL). Refuses a file larger than
 * `max_bytes`. CONF_YAML_OK, CONF_YAML_ERR after reporting, or
 * CONF_YAML_ENOMEM after reporting. */
int conf_yaml_read_file(struct conf_yaml_diag *d, const char *path,
                        size_t max_bytes, char **out, size_t *outlen);

/* Copies at most CONF_YAML_SHOW_BYTES of `s` into `out`
 * (CONF_YAML_SHOW_SIZE bytes) for quoting in a message: quotes and
 * backslashes escaped, control bytes shown as '?', and "..." when cut
 * (never inside a UTF-8 sequence). */
void conf_yaml_show(char *out, const char *s, size_t len);

/* "a scalar", "a sequence", "a mapping" or "nothing", for messages. */
const char *conf_yaml_node_kind(const yaml_node_t *node);

/* YAML's null: an unquoted empty value, "~" or "null". */
bool conf_yaml_is_null(const yaml_node_t *node);

/* Returns the text of the scalar `node`, or NULL after reporting that it is
 * a collection ("[where: ]what: expected WANT, got a mapping") or holds a
 * NUL byte. `where` may be NULL. */
const char *conf_yaml_scalar(struct conf_yaml_diag *d, const yaml_node_t *node,
                             const char *where, const char *what,
                             const char *want);

/* Result of parsing a number. Callers reuse the codes for their own range
 * checks: EINVAL also for a zero where none is allowed, ERANGE for a value
 * past their maximum. */
enum conf_yaml_num {
    CONF_YAML_NUM_OK = 0,
    CONF_YAML_NUM_EINVAL = -1, /* not of the expected form */
    CONF_YAML_NUM_ERANGE = -2, /* too large */
    CONF_YAML_NUM_EPREC = -3,  /* finer than the unit (1 ms, 1e-6) */
};

/* Parses "digits[.digits]" (no sign, blank or exponent) of `len` bytes as
 * value * 10^scale into `*out`: CONF_YAML_NUM_ERANGE past UINT64_MAX,
 * CONF_YAML_NUM_EPREC when a fraction digit past `scale` is not zero (so
 * with scale 0, "1.0" is 1: refuse the '.' first where it is unwanted). */
enum conf_yaml_num conf_yaml_parse_decimal(const char *s, size_t len,
                                           unsigned scale, uint64_t *out);

#endif /* PX_CONF_CONF_YAML_H */
