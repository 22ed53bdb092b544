/* conf_yaml.c: the parts of loading a YAML file that proxy.yaml (conf.c)
 * and limits.yaml (limits.c) share.
 *
 *   path --conf_yaml_read_file--> text --(the loader's own parse and walk)
 *                                              |
 *        caller's err buffer <--conf_yaml_error("file:line:col: ...")
 *
 * A loader embeds one struct conf_yaml_diag per load, and every error goes
 * through conf_yaml_error(): the caller's buffer ends up with one error per
 * line, as conf.h and limits.h promise, cut off after max_errors when the
 * loader sets a cap (limits.yaml may be large; proxy.yaml lists them all).
 * The value helpers (scalar text, quoting, decimal numbers) report through
 * the same diag, so both files word their errors alike. Leaf layer: no
 * logging, no globals. */
#include "conf/conf_yaml.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Growth step of the file buffer; it doubles from there. */
#define CONF_YAML_READ_CHUNK 4096

/* ---------------- Error reporting ---------------- */

void conf_yaml_diag_init(struct conf_yaml_diag *d, const char *name, char *err,
                         size_t errlen, int max_errors)
{
    memset(d, 0, sizeof(*d));
    d->name = name != NULL ? name : "(string)";
    d->err = errlen > 0 ? err : NULL;
    d->errlen = d->err != NULL ? errlen : 0;
    d->max_errors = max_errors;
    if (d->err != NULL) {
        d->err[0] = '\0';
    }
}

/* Appends to the caller's buffer, truncating (always NUL-terminated) when
 * it is full. */
CONF_YAML_PRINTF(2, 0)
static void conf_yaml_errv(struct conf_yaml_diag *d, const char *fmt,
                           va_list ap)
{
    size_t room;
    int n;

    if (d->err == NULL || d->used + 1 >= d->errlen) {
        return;
    }
    room = d->errlen - d->used;
    n = vsnprintf(d->err + d->used, room, fmt, ap);
    if (n < 0) {
        d->err[d->used] = '\0';
        return;
    }
    d->used += (size_t)n < room ? (size_t)n : room - 1;
}

CONF_YAML_PRINTF(2, 3)
static void conf_yaml_errf(struct conf_yaml_diag *d, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    conf_yaml_errv(d, fmt, ap);
    va_end(ap);
}

void conf_yaml_error(struct conf_yaml_diag *d, const yaml_mark_t *mark,
                     const char *fmt, ...)
{
    va_list ap;

    if (d->max_errors > 0 && d->stop && d->nerrors > d->max_errors) {
        return;
    }
    if (d->nerrors > 0) {
        conf_yaml_errf(d, "\n");
    }
    if (d->max_errors > 0 && d->nerrors == d->max_errors) {
        d->nerrors++;
        conf_yaml_errf(d, "%s: too many errors, stopping", d->name);
        d->stop = true;
        return;
    }
    d->nerrors++;
    if (mark != NULL) {
        conf_yaml_errf(d, "%s:%zu:%zu: ", d->name, mark->line + 1,
                       mark->column + 1);
    } else {
        conf_yaml_errf(d, "%s: ", d->name);
    }
    va_start(ap, fmt);
    conf_yaml_errv(d, fmt, ap);
    va_end(ap);
}

/* Turns the byte offset of a libyaml reader error into a 0-based mark. */
static yaml_mark_t conf_yaml_mark_at(const char *text, size_t textlen,
                                     size_t offset)
{
    yaml_mark_t mark = { .index = offset };
    size_t i;

    for (i = 0; i < offset && i < textlen; i++) {
        if (text[i] == '\n') {
            mark.line++;
            mark.column = 0;
        } else {
            mark.column++;
        }
    }
    return mark;
}

int conf_yaml_syntax_error(struct conf_yaml_diag *d, const yaml_parser_t *p,
                           const char *text, size_t textlen)
{
    const char *problem = p->problem != NULL ? p->problem : "invalid YAML";
    yaml_mark_t mark = p->problem_mark;

    if (p->error == YAML_MEMORY_ERROR) {
        conf_yaml_error(d, NULL, "out of memory");
        return CONF_YAML_ENOMEM;
    }
    if (p->error == YAML_READER_ERROR) {
        mark = conf_yaml_mark_at(text, textlen, p->problem_offset);
        if (p->problem_value >= 0) {
            conf_yaml_error(d, &mark, "%s (byte 0x%02x)", problem,
                            (unsigned)p->problem_value);
        } else {
            conf_yaml_error(d, &mark, "%s", problem);
        }
        return CONF_YAML_ERR;
    }
    if (p->context != NULL) {
        conf_yaml_error(d, &mark, "%s (%s at line %zu, column %zu)", problem,
                        p->context, p->context_mark.line + 1,
                        p->context_mark.column + 1);
    } else {
        conf_yaml_error(d, &mark, "%s", problem);
    }
    return CONF_YAML_ERR;
}

/* ---------------- Reading a file ---------------- */

int conf_yaml_read_file(struct conf_yaml_diag *d, const char *path,
                        size_t max_bytes, char **out, size_t *outlen)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL, *nbuf;
    size_t len = 0, cap = 0, n;
    int rc = CONF_YAML_ERR;

    if (f == NULL) {
        conf_yaml_error(d, NULL, "cannot open: %s", strerror(errno));
        return CONF_YAML_ERR;
    }
    for (;;) {
        if (cap - len < CONF_YAML_READ_CHUNK + 1) {
            cap = cap == 0 ? CONF_YAML_READ_CHUNK + 1 : cap * 2;
            nbuf = realloc(buf, cap);
            if (nbuf == NULL) {
                conf_yaml_error(d, NULL, "out of memory");
                rc = CONF_YAML_ENOMEM;
                goto fail;
            }
            buf = nbuf;
        }
        n = fread(buf + len, 1, cap - len - 1, f);
        len += n;
        if (len > max_bytes) {
            conf_yaml_error(d, NULL, "file larger than %zu bytes", max_bytes);
            goto fail;
        }
        if (n == 0 || ferror(f) || feof(f)) {
            break;
        }
    }
    if (ferror(f)) {
        conf_yaml_error(d, NULL, "cannot read: %s", strerror(errno));
        goto fail;
    }
    fclose(f);
    buf[len] = '\0';
    *out = buf;
    *outlen = len;
    return CONF_YAML_OK;

fail:
    fclose(f);
    free(buf);
    return rc;
}

/* ---------------- Values ---------------- */

void conf_yaml_show(char *out, const char *s, size_t len)
{
    size_t i, o = 0, n = len;

    if (n > CONF_YAML_SHOW_BYTES) {
        /* Cut before the lead byte of a sequence the limit falls in. */
        n = CONF_YAML_SHOW_BYTES;
        while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80) {
            n--;
        }
    }
    for (i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];

        if (ch == '"' || ch == '\\') {
            out[o++] = '\\';
            out[o++] = (char)ch;
        } else if (ch < 0x20 || ch == 0x7f) {
            out[o++] = '?';
        } else {
            out[o++] = (char)ch;
        }
    }
    if (n < len) {
        memcpy(out + o, "...", 3);
        o += 3;
    }
    out[o] = '\0';
}

const char *conf_yaml_node_kind(const yaml_node_t *node)
{
    switch (node->type) {
    case YAML_SEQUENCE_NODE:
        return "a sequence";
    case YAML_MAPPING_NODE:
        return "a mapping";
    case YAML_SCALAR_NODE:
        return "a scalar";
    case YAML_NO_NODE:
        break;
    }
    return "nothing";
}

bool conf_yaml_is_null(const yaml_node_t *node)
{
    static const char *const nulls[] = { "", "~", "null", "Null", "NULL" };
    size_t i;

    if (node->type != YAML_SCALAR_NODE ||
        node->data.scalar.style != YAML_PLAIN_SCALAR_STYLE) {
        return false;
    }
    for (i = 0; i < sizeof(nulls) / sizeof(nulls[0]); i++) {
        if (strcmp((const char *)node->data.scalar.value, nulls[i]) == 0) {
            return true;
        }
    }
    return false;
}

const char *conf_yaml_scalar(struct conf_yaml_diag *d, const yaml_node_t *node,
                             const char *where, const char *what,
                             const char *want)
{
    const char *sep = where != NULL ? ": " : "";
    const char *s;

    if (where == NULL) {
        where = "";
    }
    if (node->type != YAML_SCALAR_NODE) {
        conf_yaml_error(d, &node->start_mark, "%s%s%s: expected %s, got %s",
                        where, sep, what, want, conf_yaml_node_kind(node));
        return NULL;
    }
    s = (const char *)node->data.scalar.value;
    if (strlen(s) != node->data.scalar.length) {
        conf_yaml_error(d, &node->start_mark,
                        "%s%s%s: the value contains a NUL byte", where, sep,
                        what);
        return NULL;
    }
    return s;
}

enum conf_yaml_num conf_yaml_parse_decimal(const char *s, size_t len,
                                           unsigned scale, uint64_t *out)
{
    uint64_t v = 0;
    bool overflow = false, fine = false;
    size_t i = 0, nint, nfrac = 0;

    for (; i < len && s[i] >= '0' && s[i] <= '9'; i++) {
        unsigned d = (unsigned)(s[i] - '0');

        overflow = overflow || v > (UINT64_MAX - d) / 10;
        v = v * 10 + d;
    }
    nint = i;
    if (nint == 0 || (i < len && (s[i] != '.' || i + 1 == len))) {
        return CONF_YAML_NUM_EINVAL;
    }
    for (i++; i < len; i++, nfrac++) {
        unsigned d = (unsigned)(s[i] - '0');

        if (s[i] < '0' || s[i] > '9') {
            return CONF_YAML_NUM_EINVAL;
        }
        if (nfrac >= scale) {
            fine = fine || d != 0;
            continue;
        }
        overflow = overflow || v > (UINT64_MAX - d) / 10;
        v = v * 10 + d;
    }
    for (; nfrac < scale; nfrac++) {
        overflow = overflow || v > UINT64_MAX / 10;
        v *= 10;
    }
    if (overflow) {
        return CONF_YAML_NUM_ERANGE;
    }
    if (fine) {
        return CONF_YAML_NUM_EPREC;
    }
    *out = v;
    return CONF_YAML_NUM_OK;
}
