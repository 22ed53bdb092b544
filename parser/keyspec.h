/* Where a command's keys are: learned from the upstream's own `COMMAND`
 * reply, so commands of newer Redis versions and of modules route like any
 * other, plus explicit code for the movable-keys commands whose keys depend
 * on their arguments (EVAL's numkeys, XREAD's STREAMS, SORT's STORE...).
 *
 * Leaf layer: the table is built from the reply bytes and queried with a
 * parsed request; nothing here does I/O. */
#ifndef PX_PARSER_KEYSPEC_H
#define PX_PARSER_KEYSPEC_H

#include <stddef.h>

struct resp_cmd;
struct keyspec;

/* Results of keyspec_find. */
#define KEYSPEC_OK       0
#define KEYSPEC_UNKNOWN  1  /* command not in the table */
#define KEYSPEC_EMOVABLE -1 /* movable keys that cellgate cannot locate */
#define KEYSPEC_ESYNTAX  -2 /* bad numkeys or the like: let Redis say why */

/* What COMMAND says about a command, as far as a proxy cares: whether
 * Redis may hold the connection (blocking), whether it is part of the
 * subscription machinery, whether it acts on the connection itself
 * (the @connection ACL category), and whether it only reads. */
#define KEYSPEC_F_BLOCKING   (1u << 0) /* flag "blocking" */
#define KEYSPEC_F_PUBSUB     (1u << 1) /* flag "pubsub" */
#define KEYSPEC_F_CONNECTION (1u << 2) /* ACL category "@connection" */
#define KEYSPEC_F_ADMIN      (1u << 3) /* flag "admin" */
#define KEYSPEC_F_READONLY   (1u << 4) /* flag "readonly": writes no key */

/* A table built from the reply to `COMMAND` (RESP2 bytes of one frame).
 * NULL when the reply is not a COMMAND reply (or on ENOMEM). */
struct keyspec *keyspec_new(const char *reply, size_t len);

/* Frees the table. Accepts NULL. */
void keyspec_free(struct keyspec *ks);

/* Number of commands known (subcommands count separately). */
size_t keyspec_count(const struct keyspec *ks);

/* Finds the keys of `cmd`: writes their argument indexes, in argument order,
 * to keys[0..*nkeys) (keys has room for cmd->argc entries). Returns
 * KEYSPEC_OK, KEYSPEC_UNKNOWN (*nkeys = 0), KEYSPEC_EMOVABLE or
 * KEYSPEC_ESYNTAX. */
int keyspec_find(const struct keyspec *ks, const struct resp_cmd *cmd,
                 int *keys, int *nkeys);

/* The KEYSPEC_F_* flags of `cmd` (of its subcommand, for a command with
 * subcommands). Returns KEYSPEC_OK, or KEYSPEC_UNKNOWN when this Redis
 * does not know the command or the subcommand. */
int keyspec_flags(const struct keyspec *ks, const struct resp_cmd *cmd,
                  unsigned *flags);

#endif /* PX_PARSER_KEYSPEC_H */
