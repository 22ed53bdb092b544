/* acl: the ACL SETUSER lines of the two Redis users (see acl.h).
 *
 * Two escapings are layered: Redis's glob ("\x" is a literal x, also
 * inside "[^...]"), then redis-cli's argument splitting (a token with a
 * blank, a quote, a backslash or a byte that is not printable ASCII goes in
 * double quotes, with "\\", "\"" and "\xHH"). Each token is built raw first,
 * then quoted as it is written out. */
#include "conf/acl.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf/cmdpolicy.h"
#include "conf/conf.h"

/* Text written to a caller's buffer: bytes past its end are counted, not
 * written. */
struct acl_out {
    char *p;     /* borrowed: the caller's buffer */
    size_t cap;  /* its size */
    size_t used; /* bytes needed so far */
    int bare;    /* the next token goes without a blank before it */
};

/* A token being built: owned bytes, grown as needed. */
struct acl_tok {
    char *p;    /* owned */
    size_t len; /* bytes used */
    size_t cap; /* bytes allocated */
};

static void acl_putc(struct acl_out *o, char ch)
{
    if (o->used + 1 < o->cap) {
        o->p[o->used] = ch;
        o->p[o->used + 1] = '\0';
    }
    o->used++;
}

static void acl_puts(struct acl_out *o, const char *s)
{
    while (*s != '\0') {
        acl_putc(o, *s++);
    }
}

/* 0, or -1 when out of memory. */
static int acl_tok_add(struct acl_tok *t, const char *s, size_t n)
{
    if (t->len + n + 1 > t->cap) {
        size_t cap = (t->len + n + 1) * 2;
        char *p = realloc(t->p, cap);
        if (p == NULL) {
            return -1;
        }
        t->p = p;
        t->cap = cap;
    }
    memcpy(t->p + t->len, s, n);
    t->len += n;
    t->p[t->len] = '\0';
    return 0;
}

/* `s` (`n` bytes) as literal glob text: "*?[]\" escaped. */
static int acl_tok_literal(struct acl_tok *t, const char *s, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++) {
        if (s[i] != '\0' && strchr("*?[]\\", s[i]) != NULL &&
            acl_tok_add(t, "\\", 1) != 0) {
            return -1;
        }
        if (acl_tok_add(t, s + i, 1) != 0) {
            return -1;
        }
    }
    return 0;
}

/* Writes token `s` (`n` bytes) after a blank, quoted for redis-cli when
 * it must be. */
static void acl_put_token(struct acl_out *o, const char *s, size_t n)
{
    int quote = n == 0;
    size_t i;

    for (i = 0; i < n && !quote; i++) {
        unsigned char ch = (unsigned char)s[i];
        quote = ch <= ' ' || ch >= 127 || ch == '"' || ch == '\'' || ch == '\\';
    }
    if (!o->bare) {
        acl_putc(o, ' ');
    }
    o->bare = 0;
    if (!quote) {
        for (i = 0; i < n; i++) {
            acl_putc(o, s[i]);
        }
        return;
    }
    acl_putc(o, '"');
    for (i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '"' || ch == '\\') {
            acl_putc(o, '\\');
            acl_putc(o, (char)ch);
        } else if (ch < ' ' || ch >= 127) {
            char hex[5];
            snprintf(hex, sizeof(hex), "\\x%02x", ch);
            acl_puts(o, hex);
        } else {
            acl_putc(o, (char)ch);
        }
    }
    acl_putc(o, '"');
}

/* Writes `lead` followed by `s` (`n` bytes) as one token. */
static int acl_put_pair(struct acl_out *o, const char *lead, const char *s,
                        size_t n)
{
    struct acl_tok t = { 0 };

    if (acl_tok_add(&t, lead, strlen(lead)) != 0 ||
        acl_tok_add(&t, s, n) != 0) {
        free(t.p);
        return -1;
    }
    acl_put_token(o, t.p, t.len);
    free(t.p);
    return 0;
}

/* The client user's key patterns, each after a blank. 0, or -1 when out
 * of memory. */
static int acl_keys(struct acl_out *o, const char *prefix, size_t plen)
{
    size_t i;

    for (i = 0; i < plen; i++) {
        /* Keys whose first difference from the prefix is at byte i. */
        struct acl_tok t = { 0 };
        char cls[2] = { '\\', prefix[i] };
        int special = prefix[i] != '\0' && strchr("\\]^-[", prefix[i]);
        int rc =
            acl_tok_add(&t, "~", 1) != 0 ||
            acl_tok_literal(&t, prefix, i) != 0 ||
            acl_tok_add(&t, "[^", 2) != 0 ||
            acl_tok_add(&t, special ? cls : cls + 1, special ? 2 : 1) != 0 ||
            acl_tok_add(&t, "]*", 2) != 0;
        if (rc == 0) {
            acl_put_token(o, t.p, t.len);
        }
        free(t.p);
        if (rc != 0) {
            return -1;
        }
    }
    for (i = 0; i < plen; i++) {
        /* The key made of the prefix's first i bytes ("" included). */
        struct acl_tok t = { 0 };
        int rc =
            acl_tok_add(&t, "~", 1) != 0 || acl_tok_literal(&t, prefix, i) != 0;
        if (rc == 0) {
            acl_put_token(o, t.p, t.len);
        }
        free(t.p);
        if (rc != 0) {
            return -1;
        }
    }
    return 0;
}

int acl_prefix_ok(const char *prefix, size_t plen)
{
    size_t i;

    for (i = 0; i < plen; i++) {
        if (isspace((unsigned char)prefix[i])) {
            return 0;
        }
    }
    return 1;
}

int acl_conf_check(const struct conf *c, char *err, size_t errlen)
{
    if (c->upstream_user == NULL && c->limiter_user == NULL) {
        return 0; /* no ACL users: the prefix goes into no pattern */
    }
    if (!acl_prefix_ok(c->key_prefix, strlen(c->key_prefix))) {
        snprintf(err, errlen,
                 "key_prefix '%s' has a blank, which a Redis ACL key pattern "
                 "cannot hold: choose a prefix without one",
                 c->key_prefix);
        return -1;
    }
    if (c->upstream_user != NULL && c->limiter_user != NULL &&
        strcmp(c->upstream_user, c->limiter_user) == 0) {
        snprintf(err, errlen,
                 "upstream_user and limiter_user are both '%s': the limiter "
                 "user may touch every key, so clients would reach the "
                 "limiter's keys; name two different users",
                 c->upstream_user);
        return -1;
    }
    return 0;
}

size_t acl_client_keys(const char *prefix, size_t plen, char *out,
                       size_t outlen)
{
    struct acl_out o = { out, outlen, 0, 1 };

    if (outlen > 0) {
        out[0] = '\0';
    }
    return acl_keys(&o, prefix, plen) == 0 ? o.used : 0;
}

size_t acl_setuser_lines(const struct conf *c, char *out, size_t outlen)
{
    struct acl_out o = { out, outlen, 0, 0 };
    const char *prefix = c->key_prefix;
    size_t plen = strlen(prefix), n;
    char *rules;

    if (outlen > 0) {
        out[0] = '\0';
    }
    acl_puts(&o, "ACL SETUSER");
    acl_put_token(&o, c->upstream_user, strlen(c->upstream_user));
    acl_puts(&o, " reset on");
    if (acl_put_pair(&o, ">", c->upstream_password,
                     strlen(c->upstream_password)) != 0 ||
        acl_keys(&o, prefix, plen) != 0) {
        return 0;
    }
    acl_puts(&o, " &* ");
    n = cmdpolicy_acl_rules(&c->commands, NULL, 0);
    rules = malloc(n + 1);
    if (rules == NULL) {
        return 0;
    }
    cmdpolicy_acl_rules(&c->commands, rules, n + 1);
    acl_puts(&o, rules);
    free(rules);
    acl_puts(&o, "\nACL SETUSER");
    acl_put_token(&o, c->limiter_user, strlen(c->limiter_user));
    acl_puts(&o, " reset on");
    if (acl_put_pair(&o, ">", c->limiter_password,
                     strlen(c->limiter_password)) != 0) {
        return 0;
    }
    acl_puts(&o, " ~* resetchannels " ACL_LIMITER_COMMANDS "\n");
    return o.used;
}
