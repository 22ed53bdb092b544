/* Key positions from the upstream's COMMAND reply (see keyspec.h).
 *
 * COMMAND answers one entry per command: name, arity, flags, first key,
 * last key, step, ... and, since Redis 7, its subcommands as entries named
 * "container|sub". Entries are kept in one array sorted by name and found
 * through a hash index of their names (every forwarded command is looked
 * up, twice: for its flags, then its keys; a binary search took about
 * eight string comparisons each time). A command whose flags say "movablekeys"
 * has keys that move with its arguments; the ones Redis ships are located by
 * explicit code below (the same rules as Redis's own *GetKeys functions,
 * written anew), and any other is refused rather than routed to a wrong node.
 */
#include "parser/keyspec.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "parser/fnv.h"
#include "parser/resp.h"
#include "parser/resp_value.h"

/* Longest command or "container|subcommand" name kept. */
#define KS_NAME_MAX 64

/* Field positions in a COMMAND entry. */
#define KS_F_NAME     0
#define KS_F_ARITY    1
#define KS_F_FLAGS    2
#define KS_F_FIRST    3
#define KS_F_LAST     4
#define KS_F_STEP     5
#define KS_F_ACL      6
#define KS_F_SUBCMDS  9
#define KS_MIN_FIELDS 6

struct ks_entry {
    char name[KS_NAME_MAX + 1]; /* lower case, "container|sub" for subs */
    int arity;                  /* Redis convention */
    int first, last, step;      /* key range; first 0 = no fixed keys */
    unsigned flags;             /* KEYSPEC_F_* */
    unsigned movable : 1;       /* keys depend on the arguments */
    unsigned container : 1;     /* has subcommands */
};

struct keyspec {
    struct ks_entry *e; /* owned, sorted by name */
    size_t n;           /* entries used */
    size_t cap;         /* entries allocated */
    unsigned *index;    /* owned: open addressing by fnv1a of the name,
                           1 + the entry's position; 0 is a free slot */
    size_t mask;        /* slots of index - 1 (a power of two - 1) */
};

/* ---------------- Building the table ---------------- */

static void ks_lower(char *dst, const char *src, size_t n)
{
    size_t k;

    for (k = 0; k < n; k++) {
        char ch = src[k];
        dst[k] = (ch >= 'A' && ch <= 'Z') ? (char)(ch - 'A' + 'a') : ch;
    }
    dst[n] = '\0';
}

static int ks_push(struct keyspec *ks, const struct ks_entry *e)
{
    if (ks->n == ks->cap) {
        size_t cap = ks->cap ? ks->cap * 2 : 256;
        struct ks_entry *p = realloc(ks->e, cap * sizeof(*p));
        if (p == NULL) {
            return RESP_ENOMEM;
        }
        ks->e = p;
        ks->cap = cap;
    }
    ks->e[ks->n++] = *e;
    return RESP_OK;
}

/* Adds one COMMAND entry (and its subcommands). Entries of an unexpected
 * shape are skipped: a newer Redis may add fields, never remove these. */
static int ks_add(struct keyspec *ks, const struct resp_value *v, int depth)
{
    struct ks_entry e;
    const struct resp_value *f;
    size_t k;
    int rc;

    if (v->type != '*' || v->n < KS_MIN_FIELDS) {
        return RESP_OK;
    }
    f = v->elem;
    if (f[KS_F_NAME].str == NULL || f[KS_F_NAME].len == 0 ||
        f[KS_F_NAME].len > KS_NAME_MAX || f[KS_F_ARITY].type != ':' ||
        f[KS_F_FIRST].type != ':' || f[KS_F_LAST].type != ':' ||
        f[KS_F_STEP].type != ':') {
        return RESP_OK;
    }
    memset(&e, 0, sizeof(e));
    ks_lower(e.name, f[KS_F_NAME].str, f[KS_F_NAME].len);
    e.arity = (int)f[KS_F_ARITY].integer;
    e.first = (int)f[KS_F_FIRST].integer;
    e.last = (int)f[KS_F_LAST].integer;
    e.step = (int)f[KS_F_STEP].integer;
    for (k = 0; k < f[KS_F_FLAGS].n; k++) {
        const struct resp_value *fl = &f[KS_F_FLAGS].elem[k];
        if (resp_value_is(fl, "movablekeys")) {
            e.movable = 1;
        } else if (resp_value_is(fl, "blocking")) {
            e.flags |= KEYSPEC_F_BLOCKING;
        } else if (resp_value_is(fl, "pubsub")) {
            e.flags |= KEYSPEC_F_PUBSUB;
        } else if (resp_value_is(fl, "admin")) {
            e.flags |= KEYSPEC_F_ADMIN;
        } else if (resp_value_is(fl, "readonly")) {
            e.flags |= KEYSPEC_F_READONLY;
        }
    }
    for (k = 0; v->n > KS_F_ACL && k < f[KS_F_ACL].n; k++) {
        if (resp_value_is(&f[KS_F_ACL].elem[k], "@connection")) {
            e.flags |= KEYSPEC_F_CONNECTION;
        }
    }
    if (depth == 0 && v->n > KS_F_SUBCMDS && f[KS_F_SUBCMDS].n > 0) {
        e.container = 1;
        for (k = 0; k < f[KS_F_SUBCMDS].n; k++) {
            rc = ks_add(ks, &f[KS_F_SUBCMDS].elem[k], 1);
            if (rc != RESP_OK) {
                return rc;
            }
        }
    }
    return ks_push(ks, &e);
}

static int ks_cmp(const void *a, const void *b)
{
    const struct ks_entry *x = a, *y = b;
    return strcmp(x->name, y->name);
}

/* Builds ks->index over the sorted entries: at least twice as many slots
 * as entries, so a probe sequence stays short. 0, or -1 on ENOMEM. */
static int ks_index(struct keyspec *ks)
{
    size_t slots = 16, i, j;

    while (slots < 2 * ks->n) {
        slots *= 2;
    }
    ks->index = calloc(slots, sizeof(*ks->index));
    if (ks->index == NULL) {
        return -1;
    }
    ks->mask = slots - 1;
    for (i = 0; i < ks->n; i++) {
        j = fnv1a(ks->e[i].name) & ks->mask;
        while (ks->index[j] != 0) {
            j = (j + 1) & ks->mask;
        }
        ks->index[j] = (unsigned)i + 1;
    }
    return 0;
}

struct keyspec *keyspec_new(const char *reply, size_t len)
{
    struct resp_value v;
    struct keyspec *ks;
    size_t used, k;
    int rc = RESP_OK;

    if (resp_value_parse(reply, len, &v, &used) != RESP_OK) {
        return NULL;
    }
    ks = calloc(1, sizeof(*ks));
    if (v.type != '*' || v.n == 0 || ks == NULL) {
        resp_value_free(&v);
        free(ks);
        return NULL;
    }
    for (k = 0; k < v.n && rc == RESP_OK; k++) {
        rc = ks_add(ks, &v.elem[k], 0);
    }
    resp_value_free(&v);
    if (rc != RESP_OK || ks->n == 0) {
        keyspec_free(ks);
        return NULL;
    }
    qsort(ks->e, ks->n, sizeof(*ks->e), ks_cmp);
    if (ks_index(ks) != 0) {
        keyspec_free(ks);
        return NULL;
    }
    return ks;
}

void keyspec_free(struct keyspec *ks)
{
    if (ks == NULL) {
        return;
    }
    free(ks->index);
    free(ks->e);
    free(ks);
}

size_t keyspec_count(const struct keyspec *ks)
{
    return ks->n;
}

/* ---------------- Lookup ---------------- */

/* The entry named `name` (lower case), or NULL. */
static const struct ks_entry *ks_lookup(const struct keyspec *ks,
                                        const char *name)
{
    size_t j = fnv1a(name) & ks->mask;

    for (; ks->index[j] != 0; j = (j + 1) & ks->mask) {
        const struct ks_entry *e = &ks->e[ks->index[j] - 1];
        if (strcmp(e->name, name) == 0) {
            return e;
        }
    }
    return NULL;
}

/* Parses argument i as a count in 0..max. 0 on success. */
static int ks_arg_count(const struct resp_cmd *cmd, int i, int max, int *out)
{
    size_t len, k;
    const char *p = resp_cmd_arg(cmd, i, &len);
    long long v = 0;

    if (len == 0 || len > 10) {
        return -1;
    }
    for (k = 0; k < len; k++) {
        if (p[k] < '0' || p[k] > '9') {
            return -1;
        }
        v = v * 10 + (p[k] - '0');
    }
    if (v > max) {
        return -1;
    }
    *out = (int)v;
    return 0;
}

/* Keys given as "<numkeys> key..." with numkeys at argument `at`; `before`
 * is an extra key before it (the destination of ZUNIONSTORE), or 0. */
static int ks_numkeys(const struct resp_cmd *cmd, int at, int before, int *keys,
                      int *nkeys)
{
    int n, k;

    if (at >= cmd->argc || ks_arg_count(cmd, at, cmd->argc - at - 1, &n)) {
        return KEYSPEC_ESYNTAX;
    }
    *nkeys = 0;
    if (before > 0) {
        keys[(*nkeys)++] = before;
    }
    for (k = 0; k < n; k++) {
        keys[(*nkeys)++] = at + 1 + k;
    }
    return KEYSPEC_OK;
}

/* XREAD/XREADGROUP: the keys are the first half of what follows STREAMS. */
static int ks_streams(const struct resp_cmd *cmd, int *keys, int *nkeys)
{
    int i, n, k;

    for (i = 1; i < cmd->argc; i++) {
        if (resp_cmd_arg_is(cmd, i, "streams")) {
            break;
        }
    }
    n = cmd->argc - i - 1;
    if (i >= cmd->argc || n <= 0 || n % 2 != 0) {
        return KEYSPEC_ESYNTAX;
    }
    *nkeys = 0;
    for (k = 0; k < n / 2; k++) {
        keys[(*nkeys)++] = i + 1 + k;
    }
    return KEYSPEC_OK;
}

/* SORT key [BY p] [LIMIT o c] [GET p ...] [ASC|DESC] [ALPHA] [STORE dst]:
 * the key, plus STORE's destination (options are skipped with their
 * arguments so a GET pattern named "store" is not mistaken for it). */
static int ks_sort(const struct resp_cmd *cmd, int *keys, int *nkeys)
{
    int i;

    keys[0] = 1;
    *nkeys = 1;
    for (i = 2; i < cmd->argc; i++) {
        if (resp_cmd_arg_is(cmd, i, "limit")) {
            i += 2;
        } else if (resp_cmd_arg_is(cmd, i, "get") ||
                   resp_cmd_arg_is(cmd, i, "by")) {
            i += 1;
        } else if (resp_cmd_arg_is(cmd, i, "store") && i + 1 < cmd->argc) {
            keys[(*nkeys)++] = i + 1;
            i += 1;
        }
    }
    return KEYSPEC_OK;
}

/* MIGRATE host port key|"" db timeout [...] [KEYS key...]. */
static int ks_migrate(const struct resp_cmd *cmd, int *keys, int *nkeys)
{
    size_t len;
    int i;

    if (cmd->argc < 6) {
        return KEYSPEC_ESYNTAX;
    }
    resp_cmd_arg(cmd, 3, &len);
    *nkeys = 0;
    if (len > 0) {
        keys[(*nkeys)++] = 3;
        return KEYSPEC_OK;
    }
    for (i = 6; i < cmd->argc; i++) {
        if (resp_cmd_arg_is(cmd, i, "keys")) {
            for (i = i + 1; i < cmd->argc; i++) {
                keys[(*nkeys)++] = i;
            }
            return KEYSPEC_OK;
        }
        if (resp_cmd_arg_is(cmd, i, "auth")) {
            i += 1;
        } else if (resp_cmd_arg_is(cmd, i, "auth2")) {
            i += 2;
        }
    }
    return KEYSPEC_OK;
}

/* GEORADIUS key ... [STORE k] [STOREDIST k]. */
static int ks_georadius(const struct resp_cmd *cmd, int *keys, int *nkeys)
{
    int i;

    keys[0] = 1;
    *nkeys = 1;
    for (i = 2; i + 1 < cmd->argc; i++) {
        if (resp_cmd_arg_is(cmd, i, "store") ||
            resp_cmd_arg_is(cmd, i, "storedist")) {
            keys[(*nkeys)++] = i + 1;
            i++;
        }
    }
    return KEYSPEC_OK;
}

/* Movable-keys commands located by their own rules. Returns 1 when `name`
 * is one of them (the result in *rc). */
static int ks_movable(const char *name, const struct resp_cmd *cmd, int *keys,
                      int *nkeys, int *rc)
{
    static const char *const numkeys_at_2[] = {
        "eval",  "evalsha",  "eval_ro", "evalsha_ro",
        "fcall", "fcall_ro", "blmpop",  "bzmpop",
    };
    static const char *const numkeys_at_1[] = {
        "zunion",     "zinter", "zdiff", "sintercard",
        "zintercard", "lmpop",  "zmpop",
    };
    static const char *const store_at_1[] = {
        "zunionstore",
        "zinterstore",
        "zdiffstore",
    };
    size_t k;

    for (k = 0; k < sizeof(numkeys_at_2) / sizeof(numkeys_at_2[0]); k++) {
        if (strcmp(name, numkeys_at_2[k]) == 0) {
            *rc = ks_numkeys(cmd, 2, 0, keys, nkeys);
            return 1;
        }
    }
    for (k = 0; k < sizeof(numkeys_at_1) / sizeof(numkeys_at_1[0]); k++) {
        if (strcmp(name, numkeys_at_1[k]) == 0) {
            *rc = ks_numkeys(cmd, 1, 0, keys, nkeys);
            return 1;
        }
    }
    for (k = 0; k < sizeof(store_at_1) / sizeof(store_at_1[0]); k++) {
        if (strcmp(name, store_at_1[k]) == 0) {
            *rc = ks_numkeys(cmd, 2, 1, keys, nkeys);
            return 1;
        }
    }
    if (strcmp(name, "xread") == 0 || strcmp(name, "xreadgroup") == 0) {
        *rc = ks_streams(cmd, keys, nkeys);
        return 1;
    }
    if (strcmp(name, "sort") == 0 || strcmp(name, "sort_ro") == 0) {
        *rc = cmd->argc >= 2 ? ks_sort(cmd, keys, nkeys) : KEYSPEC_ESYNTAX;
        return 1;
    }
    if (strcmp(name, "migrate") == 0) {
        *rc = ks_migrate(cmd, keys, nkeys);
        return 1;
    }
    if (strncmp(name, "georadius", 9) == 0) {
        *rc = cmd->argc >= 2 ? ks_georadius(cmd, keys, nkeys) : KEYSPEC_ESYNTAX;
        return 1;
    }
    return 0;
}

/* Keys of a fixed range first..last by step (last < 0 counts from the
 * end). Arguments past argc are ignored: Redis checks arity itself. */
static void ks_range(const struct ks_entry *e, const struct resp_cmd *cmd,
                     int *keys, int *nkeys)
{
    int last = e->last < 0 ? cmd->argc + e->last : e->last;
    int step = e->step > 0 ? e->step : 1;
    int i;

    *nkeys = 0;
    for (i = e->first; i <= last && i < cmd->argc; i += step) {
        keys[(*nkeys)++] = i;
        if (step >= cmd->argc - i) {
            break; /* past the arguments; a huge step must not wrap i */
        }
    }
}

/* The entry of `cmd` (its subcommand's when there is one) and, in `name`,
 * the command's lower-case name. `*exact` tells whether a container's
 * subcommand was found (else the container's entry is returned). */
static const struct ks_entry *ks_entry_of(const struct keyspec *ks,
                                          const struct resp_cmd *cmd,
                                          char *name, int *exact)
{
    const struct ks_entry *e;
    size_t len, sublen;
    const char *p = resp_cmd_arg(cmd, 0, &len);

    *exact = 0;
    if (len == 0 || len > KS_NAME_MAX) {
        return NULL;
    }
    ks_lower(name, p, len);
    e = ks_lookup(ks, name);
    if (e == NULL) {
        return NULL;
    }
    *exact = !e->container;
    if (e->container && cmd->argc >= 2) {
        const struct ks_entry *sub;
        p = resp_cmd_arg(cmd, 1, &sublen);
        if (sublen > 0 && sublen <= KS_NAME_MAX) {
            name[len] = '|';
            ks_lower(name + len + 1, p, sublen);
            sub = ks_lookup(ks, name);
            if (sub != NULL) {
                e = sub;
                *exact = 1;
            }
            name[len] = '\0';
        }
    }
    return e;
}

int keyspec_flags(const struct keyspec *ks, const struct resp_cmd *cmd,
                  unsigned *flags)
{
    char name[2 * KS_NAME_MAX + 2];
    int exact;
    const struct ks_entry *e = ks_entry_of(ks, cmd, name, &exact);

    *flags = 0;
    if (e == NULL || !exact) {
        return KEYSPEC_UNKNOWN;
    }
    *flags = e->flags;
    return KEYSPEC_OK;
}

int keyspec_find(const struct keyspec *ks, const struct resp_cmd *cmd,
                 int *keys, int *nkeys)
{
    char name[2 * KS_NAME_MAX + 2];
    const struct ks_entry *e;
    int rc, exact;

    *nkeys = 0;
    e = ks_entry_of(ks, cmd, name, &exact);
    if (e == NULL) {
        return KEYSPEC_UNKNOWN;
    }
    if (e->movable && ks_movable(name, cmd, keys, nkeys, &rc)) {
        return rc;
    }
    if (e->first <= 0) {
        return e->movable ? KEYSPEC_EMOVABLE : KEYSPEC_OK;
    }
    ks_range(e, cmd, keys, nkeys);
    return KEYSPEC_OK;
}
