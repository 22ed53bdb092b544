/* resp_cmd: building, encoding and freeing the command object of
 * parser/resp.h, apart from the request reader (resp.c) that fills most of
 * them. A command is one allocation (the struct, its argv spans, its raw
 * wire form), except a large request the reader took whole, whose raw is
 * a second one (see resp_cmd_free). Leaf layer: libc only. */
#include "parser/resp_cmd.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The argv array follows the struct in the same allocation. */
_Static_assert(sizeof(struct resp_cmd) % _Alignof(struct resp_arg) == 0,
               "resp_arg array must be aligned after struct resp_cmd");

struct resp_cmd *resp_cmd_alloc(int argc, size_t raw_len)
{
    size_t head = sizeof(struct resp_cmd);
    size_t argsz;
    struct resp_cmd *c;
    char *mem;

    if (argc < 1 ||
        (size_t)argc > (SIZE_MAX - head) / sizeof(struct resp_arg)) {
        return NULL;
    }
    argsz = (size_t)argc * sizeof(struct resp_arg);
    if (raw_len > SIZE_MAX - head - argsz) {
        return NULL;
    }
    mem = malloc(head + argsz + raw_len);
    if (mem == NULL) {
        return NULL;
    }
    c = (struct resp_cmd *)(void *)mem;
    c->argc = argc;
    c->argv = (struct resp_arg *)(void *)(mem + head);
    c->raw = mem + head + argsz;
    c->raw_len = raw_len;
    return c;
}

/* Number of decimal digits of `n`. */
static size_t num_width(size_t n)
{
    size_t d = 1;

    while (n >= 10) {
        n /= 10;
        d++;
    }
    return d;
}

/* Writes `<type><n>\r\n` at dst and returns the byte after it. */
static char *put_header(char *dst, char type, size_t n)
{
    size_t w = num_width(n);
    size_t i;

    *dst++ = type;
    for (i = w; i > 0; i--) {
        dst[i - 1] = (char)('0' + n % 10);
        n /= 10;
    }
    dst += w;
    *dst++ = '\r';
    *dst++ = '\n';
    return dst;
}

static const char *arg_ptr(const struct resp_cmd_src *a, int i, size_t *len)
{
    if (a->spans != NULL) {
        *len = a->spans[i].len;
        return a->base + a->spans[i].off;
    }
    *len = a->lens[i];
    return a->ptrs[i];
}

struct resp_cmd *resp_cmd_encode(int argc, const struct resp_cmd_src *a)
{
    size_t raw_len = 1 + num_width((size_t)argc) + 2;
    struct resp_cmd *c;
    char *p;
    size_t n;
    int i;

    for (i = 0; i < argc; i++) {
        size_t s;

        (void)arg_ptr(a, i, &n);
        s = 1 + num_width(n) + 2;
        if (n > SIZE_MAX - s - 2 || n + s + 2 > SIZE_MAX - raw_len) {
            return NULL;
        }
        raw_len += n + s + 2;
    }
    c = resp_cmd_alloc(argc, raw_len);
    if (c == NULL) {
        return NULL;
    }
    p = put_header(c->raw, '*', (size_t)argc);
    for (i = 0; i < argc; i++) {
        const char *src = arg_ptr(a, i, &n);

        p = put_header(p, '$', n);
        c->argv[i].off = (size_t)(p - c->raw);
        c->argv[i].len = n;
        if (n > 0) {
            memcpy(p, src, n);
        }
        p += n;
        *p++ = '\r';
        *p++ = '\n';
    }
    return c;
}

int resp_word_is(const char *p, size_t len, const char *word)
{
    size_t k;

    for (k = 0; k < len; k++) {
        char ch = p[k];
        if (ch >= 'A' && ch <= 'Z') {
            ch = (char)(ch - 'A' + 'a');
        }
        if (word[k] == '\0' || ch != word[k]) {
            return 0;
        }
    }
    return word[len] == '\0';
}

void resp_cmd_free(struct resp_cmd *c)
{
    /* A large frame's raw is the reader's buffer, taken whole
     * (rd_take_frame); every other raw follows argv in c's allocation. */
    if (c != NULL && c->raw != (char *)(c->argv + c->argc)) {
        free(c->raw);
    }
    free(c);
}

struct resp_cmd *resp_cmd_new(int argc, const char *const *argv,
                              const size_t *lens)
{
    struct resp_cmd_src a = { .ptrs = argv, .lens = lens };

    if (argc < 1 || argv == NULL || lens == NULL) {
        return NULL; /* a command has a name at least */
    }
    return resp_cmd_encode(argc, &a);
}

struct resp_cmd *resp_cmd_with_arg(const struct resp_cmd *c, int i,
                                   const char *p, size_t n)
{
    const char **ptrs = malloc((size_t)c->argc * sizeof(*ptrs));
    size_t *lens = malloc((size_t)c->argc * sizeof(*lens));
    struct resp_cmd *out = NULL;
    int k;

    if (ptrs != NULL && lens != NULL) {
        for (k = 0; k < c->argc; k++) {
            ptrs[k] = resp_cmd_arg(c, k, &lens[k]);
        }
        if (i >= 0 && i < c->argc) {
            ptrs[i] = p;
            lens[i] = n;
        }
        out = resp_cmd_new(c->argc, ptrs, lens);
    }
    free(ptrs);
    free(lens);
    return out;
}
