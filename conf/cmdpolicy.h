/* cmdpolicy: which commands an ordinary (not admin) client may run.
 *
 * The policy is one bit per command and subcommand of a static table
 * (every command of Redis 7.0 with its ACL categories,
 * conf/cmdpolicy_table.h), one bit per command and subcommand of
 * cellgate's own (CL.THROTTLE, LIMITER and its subcommands:
 * "-limiter|adjust"), and one bit for the commands neither knows (newer
 * Redis, modules). It starts from the default (cmdpolicy_init) and is
 * adjusted by rules in Redis's ACL syntax, applied in order: "+get",
 * "-keys", "+client|kill", "-config|get", "+@dangerous", "-@admin",
 * "allcommands" (= "+@all"), "nocommands" (= "-@all"). Names are
 * case-insensitive.
 *
 * Leaf layer: libc only, no allocation, no logging, no globals. */
#ifndef PX_CONF_CMDPOLICY_H
#define PX_CONF_CMDPOLICY_H

#include <stddef.h>

#define CMDPOLICY_OK        0
#define CMDPOLICY_ESYNTAX   -1 /* neither +name, -name, allcommands... */
#define CMDPOLICY_ECOMMAND  -2 /* no such command or subcommand */
#define CMDPOLICY_ECATEGORY -3 /* no such category */

/* Entries the bitmap has room for (the table has about 380). */
#define CMDPOLICY_MAX_CMDS 1024

/* The rules of the default policy, applied by cmdpolicy_init (docs/commands.md
 * "Command policy" says why each one). */
#define CMDPOLICY_DEFAULT_RULES                                                \
    "+@all -@admin -@dangerous +info +keys +sort +sort_ro +restore "           \
    "-function|load -function|delete -function|flush -function|restore"

struct cmdpolicy {
    unsigned char denied[CMDPOLICY_MAX_CMDS / 8]; /* bit i: table entry i */
    int others_denied; /* commands the table does not know */
};

/* Fills `p` with the default policy. */
void cmdpolicy_init(struct cmdpolicy *p);

/* Applies one rule of `len` bytes. CMDPOLICY_OK, or an error code with `p`
 * unchanged. */
int cmdpolicy_apply(struct cmdpolicy *p, const char *rule, size_t len);

/* Applies the blank-separated rules of `text` in order. On an error,
 * returns its code and sets *bad and *badlen (may be NULL) to the rule;
 * the rules before it stay applied. */
int cmdpolicy_apply_all(struct cmdpolicy *p, const char *text, const char **bad,
                        size_t *badlen);

/* 1 when the policy lets an ordinary client run command `name` whose first
 * argument is `arg` (NULL when it has none), else 0. A subcommand the table
 * does not know follows its command. */
int cmdpolicy_allows(const struct cmdpolicy *p, const char *name, size_t nlen,
                     const char *arg, size_t alen);

/* The policy as Redis ACL command rules, blank-separated ("+@all -flushall
 * -client|kill ..."): applied to a Redis user, they allow exactly what `p`
 * allows. Written to `out` when it has room (NUL-terminated); returns the
 * length the text needs, without the NUL, like snprintf. */
size_t cmdpolicy_acl_rules(const struct cmdpolicy *p, char *out, size_t outlen);

/* What an error code means, for messages: "unknown command", ... */
const char *cmdpolicy_strerror(int code);

#endif /* PX_CONF_CMDPOLICY_H */
