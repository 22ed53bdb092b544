/* cmdpolicy: the command policy of ordinary clients (see cmdpolicy.h).
 *
 *   rule text --cmdpolicy_apply--> bits of the table entries it names
 *                                  (a command, its subcommands, a category)
 *   name, first argument --cmdpolicy_allows--> the subcommand's bit, else
 *                                  the command's, else the unknown bit
 *
 * The table is sorted by name ("client" comes right before its
 * "client|..." entries), so a command and its subcommands are one run of
 * entries; a generated hash index finds any of them. Like Redis's ACL,
 * "+client" covers every CLIENT subcommand and a category rule sets each
 * entry that has the category, subcommands included; "+@all" and "-@all"
 * also decide the commands the table does not know. */
#include "conf/cmdpolicy.h"

#include <stdint.h>
#include <string.h>
#include <strings.h>

/* One command or subcommand of the table. */
struct cmdpolicy_cmd {
    const char *name; /* lower case; "name|sub" for a subcommand */
    unsigned cats;    /* CMDPOLICY_CAT_* bits */
};

#include "conf/cmdpolicy_table.h"
#include "parser/fnv.h"

#define CMDPOLICY_NCMDS (sizeof(cmdpolicy_cmds) / sizeof(cmdpolicy_cmds[0]))

/* cellgate's own commands, after the generated table's entries (their
 * bits follow), so that an operator can write "-limiter|adjust" (a client
 * that may give any identity's units back or charge it into debt) or
 * "-cl.throttle". Sorted as the table is, the command before its
 * subcommands. No Redis category: only command rules, "allcommands" and
 * "nocommands" (and "+@all"/"-@all") reach them, so no category rule of a
 * Redis user changes what they did before they were named here; and they
 * are never part of the rules given to Redis (cmdpolicy_acl_rules), which
 * does not know them. */
static const char *const cmdpolicy_own[] = {
    "cl.throttle",      "limiter",       "limiter|adjust",  "limiter|check",
    "limiter|override", "limiter|peek",  "limiter|release", "limiter|reload",
    "limiter|reset",    "limiter|rules",
};

#define CMDPOLICY_NOWN (sizeof(cmdpolicy_own) / sizeof(cmdpolicy_own[0]))
/* Entries of both tables: bits 0 .. CMDPOLICY_NCMDS - 1 the generated
 * table's, then cmdpolicy_own's. */
#define CMDPOLICY_NALL (CMDPOLICY_NCMDS + CMDPOLICY_NOWN)

_Static_assert(sizeof(cmdpolicy_cmds) / sizeof(cmdpolicy_cmds[0]) +
                       sizeof(cmdpolicy_own) / sizeof(cmdpolicy_own[0]) <=
                   CMDPOLICY_MAX_CMDS,
               "CMDPOLICY_MAX_CMDS is too small for the table");

/* The name of entry i of either table. */
static const char *cmdpolicy_name(size_t i)
{
    return i < CMDPOLICY_NCMDS ? cmdpolicy_cmds[i].name
                               : cmdpolicy_own[i - CMDPOLICY_NCMDS];
}

/* The categories of entry i (none for cellgate's own). */
static unsigned cmdpolicy_cats(size_t i)
{
    return i < CMDPOLICY_NCMDS ? cmdpolicy_cmds[i].cats : 0;
}

/* Longest "name|sub" looked up; longer names are in no table entry. */
#define CMDPOLICY_NAME_MAX 64

/* ---------------- Bits ---------------- */

static void cmdpolicy_set(struct cmdpolicy *p, size_t i, int deny)
{
    unsigned char m = (unsigned char)(1u << (i % 8));

    if (deny) {
        p->denied[i / 8] |= m;
    } else {
        p->denied[i / 8] &= (unsigned char)~m;
    }
}

static int cmdpolicy_is_denied(const struct cmdpolicy *p, size_t i)
{
    return (p->denied[i / 8] >> (i % 8)) & 1;
}

/* ---------------- Lookup ---------------- */

/* Lower-cases `len` bytes into `out` (CMDPOLICY_NAME_MAX + 1 bytes),
 * appending at *used. 0, or -1 when it does not fit. */
static int cmdpolicy_lower(char *out, size_t *used, const char *s, size_t len)
{
    size_t k;

    if (*used + len > CMDPOLICY_NAME_MAX) {
        return -1;
    }
    for (k = 0; k < len; k++) {
        char ch = s[k];

        out[*used + k] = ch >= 'A' && ch <= 'Z' ? (char)(ch - 'A' + 'a') : ch;
    }
    *used += len;
    out[*used] = '\0';
    return 0;
}

/* Index of the entry named `name` (lower case, NUL-terminated), or -1.
 * Looked up for every request: the generated index finds it with one
 * string comparison where a binary search took nine. */
static long cmdpolicy_find(const char *name)
{
    unsigned h = fnv1a(name) % CMDPOLICY_HASH_SLOTS;

    _Static_assert(CMDPOLICY_HASH_SLOTS > CMDPOLICY_NCMDS,
                   "the index needs an empty slot");
    size_t k;

    while (cmdpolicy_index[h] >= 0) {
        const char *entry = cmdpolicy_cmds[cmdpolicy_index[h]].name;
        if (strcmp(entry, name) == 0) {
            return cmdpolicy_index[h];
        }
        h = (h + 1) % CMDPOLICY_HASH_SLOTS;
    }
    /* Ten names, only for what Redis does not know. */
    for (k = 0; k < CMDPOLICY_NOWN; k++) {
        if (strcmp(cmdpolicy_own[k], name) == 0) {
            return (long)(CMDPOLICY_NCMDS + k);
        }
    }
    return -1;
}

/* True when entry j is a subcommand of entry i (a command). */
static int cmdpolicy_is_sub_of(size_t j, size_t i)
{
    size_t n = strlen(cmdpolicy_name(i));

    return j < CMDPOLICY_NALL &&
           strncmp(cmdpolicy_name(j), cmdpolicy_name(i), n) == 0 &&
           cmdpolicy_name(j)[n] == '|';
}

/* ---------------- Rules ---------------- */

/* Sets every entry of category `cat` (all of them when cat is 0). */
static void cmdpolicy_set_category(struct cmdpolicy *p, unsigned cat, int deny)
{
    size_t i;

    for (i = 0; i < CMDPOLICY_NALL; i++) {
        if (cat == 0 || (cmdpolicy_cats(i) & cat)) {
            cmdpolicy_set(p, i, deny);
        }
    }
    if (cat == 0) {
        p->others_denied = deny;
    }
}

/* "+@name" / "-@name" with the '@' stripped. */
static int cmdpolicy_apply_category(struct cmdpolicy *p, const char *s,
                                    size_t len, int deny)
{
    size_t k;

    if (len == 3 && strncasecmp(s, "all", 3) == 0) {
        cmdpolicy_set_category(p, 0, deny);
        return CMDPOLICY_OK;
    }
    for (k = 0; k < CMDPOLICY_NCATS; k++) {
        if (strlen(cmdpolicy_cat_names[k]) == len &&
            strncasecmp(s, cmdpolicy_cat_names[k], len) == 0) {
            cmdpolicy_set_category(p, 1u << k, deny);
            return CMDPOLICY_OK;
        }
    }
    return CMDPOLICY_ECATEGORY;
}

/* "+name" / "-name" with the sign stripped: the command and its
 * subcommands, or one subcommand ("name|sub"). */
static int cmdpolicy_apply_command(struct cmdpolicy *p, const char *s,
                                   size_t len, int deny)
{
    char name[CMDPOLICY_NAME_MAX + 1];
    size_t used = 0, j;
    long i;

    if (len == 0 || cmdpolicy_lower(name, &used, s, len) != 0 ||
        (i = cmdpolicy_find(name)) < 0) {
        return CMDPOLICY_ECOMMAND;
    }
    cmdpolicy_set(p, (size_t)i, deny);
    for (j = (size_t)i + 1; cmdpolicy_is_sub_of(j, (size_t)i); j++) {
        cmdpolicy_set(p, j, deny);
    }
    return CMDPOLICY_OK;
}

int cmdpolicy_apply(struct cmdpolicy *p, const char *rule, size_t len)
{
    int deny;

    if (len == 11 && strncasecmp(rule, "allcommands", 11) == 0) {
        cmdpolicy_set_category(p, 0, 0);
        return CMDPOLICY_OK;
    }
    if (len == 10 && strncasecmp(rule, "nocommands", 10) == 0) {
        cmdpolicy_set_category(p, 0, 1);
        return CMDPOLICY_OK;
    }
    if (len < 2 || (rule[0] != '+' && rule[0] != '-')) {
        return CMDPOLICY_ESYNTAX;
    }
    deny = rule[0] == '-';
    if (rule[1] == '@') {
        return cmdpolicy_apply_category(p, rule + 2, len - 2, deny);
    }
    return cmdpolicy_apply_command(p, rule + 1, len - 1, deny);
}

int cmdpolicy_apply_all(struct cmdpolicy *p, const char *text, const char **bad,
                        size_t *badlen)
{
    const char *s = text, *start;
    int rc;

    for (;;) {
        while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r') {
            s++;
        }
        if (*s == '\0') {
            return CMDPOLICY_OK;
        }
        start = s;
        while (*s != '\0' && *s != ' ' && *s != '\t' && *s != '\n' &&
               *s != '\r') {
            s++;
        }
        rc = cmdpolicy_apply(p, start, (size_t)(s - start));
        if (rc != CMDPOLICY_OK) {
            if (bad != NULL) {
                *bad = start;
            }
            if (badlen != NULL) {
                *badlen = (size_t)(s - start);
            }
            return rc;
        }
    }
}

void cmdpolicy_init(struct cmdpolicy *p)
{
    int rc;

    memset(p, 0, sizeof(*p));
    rc = cmdpolicy_apply_all(p, CMDPOLICY_DEFAULT_RULES, NULL, NULL);
    (void)rc; /* test_cmdpolicy checks that the default rules parse */
}

/* ---------------- As Redis ACL rules ---------------- */

/* Appends `sign` and `word`, blank-separated, to `out` (`outlen` bytes)
 * when it fits; *used counts the bytes either way. */
static void cmdpolicy_put(char *out, size_t outlen, size_t *used, char sign,
                          const char *word)
{
    size_t n = strlen(word) + (sign != 0) + (*used > 0);

    if (*used + n < outlen) {
        char *w = out + *used;
        if (*used > 0) {
            *w++ = ' ';
        }
        if (sign != 0) {
            *w++ = sign;
        }
        memcpy(w, word, strlen(word) + 1);
    }
    *used += n;
}

size_t cmdpolicy_acl_rules(const struct cmdpolicy *p, char *out, size_t outlen)
{
    int base = p->others_denied; /* what "+@all"/"-@all" leaves */
    char sign = base ? '+' : '-';
    size_t used = 0, i, j, end;

    if (outlen > 0) {
        out[0] = '\0';
    }
    cmdpolicy_put(out, outlen, &used, 0, base ? "-@all" : "+@all");
    for (i = 0; i < CMDPOLICY_NCMDS; i = end) {
        int same = 1;
        for (end = i + 1; cmdpolicy_is_sub_of(end, i); end++) {
            same &= cmdpolicy_is_denied(p, end) == cmdpolicy_is_denied(p, i);
        }
        if (same || end == i + 1) {
            /* The command as a whole (its subcommands with it). */
            if (cmdpolicy_is_denied(p, i) != base) {
                cmdpolicy_put(out, outlen, &used, sign, cmdpolicy_cmds[i].name);
            }
            continue;
        }
        for (j = i + 1; j < end; j++) {
            if (cmdpolicy_is_denied(p, j) != base) {
                cmdpolicy_put(out, outlen, &used, sign, cmdpolicy_cmds[j].name);
            }
        }
    }
    return used;
}

/* ---------------- Checks ---------------- */

int cmdpolicy_allows(const struct cmdpolicy *p, const char *name, size_t nlen,
                     const char *arg, size_t alen)
{
    char key[CMDPOLICY_NAME_MAX + 1];
    size_t used = 0;
    long i, j;

    if (cmdpolicy_lower(key, &used, name, nlen) != 0 ||
        memchr(key, '|', used) != NULL || (i = cmdpolicy_find(key)) < 0) {
        return !p->others_denied;
    }
    if (arg != NULL && cmdpolicy_is_sub_of((size_t)i + 1, (size_t)i) &&
        cmdpolicy_lower(key, &used, "|", 1) == 0 &&
        cmdpolicy_lower(key, &used, arg, alen) == 0 &&
        (j = cmdpolicy_find(key)) >= 0) {
        return !cmdpolicy_is_denied(p, (size_t)j);
    }
    return !cmdpolicy_is_denied(p, (size_t)i);
}

const char *cmdpolicy_strerror(int code)
{
    switch (code) {
    case CMDPOLICY_OK:
        return "no error";
    case CMDPOLICY_ESYNTAX:
        return "expected +command, -command, +@category, -@category, "
               "allcommands or nocommands";
    case CMDPOLICY_ECOMMAND:
        return "unknown command";
    case CMDPOLICY_ECATEGORY:
        return "unknown category";
    default:
        return "unknown error";
    }
}
