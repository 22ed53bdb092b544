/* The key tables of proxy.yaml, for the files of conf/ only.
 *
 * proxy.yaml's keys come in sections: conf.c's table of the core keys, and
 * one table per feature file (conf_tls.c, ...). A section is its table plus
 * the functions that set its defaults, free its strings and check the rules
 * that span its keys once a file is walked; conf.c lists the sections
 * (conf_sections[]) and looks every key up in each in turn. A feature adds
 * its keys by adding a section, not by growing conf.c. */
#ifndef PX_CONF_CONF_KEYS_H
#define PX_CONF_CONF_KEYS_H

#include <stddef.h>

#include <yaml.h>

#include "conf/conf.h"
#include "conf/conf_yaml.h"

#define CONF_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* Keys of all sections together, at most (the walk's `seen` table). */
#define CONF_MAX_KEYS 160

struct conf_command;

/* State of one load: where errors go and what is being filled. */
struct conf_loader {
    struct conf_yaml_diag diag; /* where errors go (no cap: list them all) */
    struct conf *c;             /* borrowed: the settings being overlaid */
    yaml_document_t *doc;       /* borrowed: the document being walked */
    yaml_node_t **seen;         /* borrowed: the key node of each key the
                                   file set, by its index over all
                                   sections (conf_key_seen) */
};

/* Validates `node` and stores it into the field of `cmd`. Returns CONF_OK,
 * CONF_ERR after reporting the error, or CONF_ENOMEM. */
typedef int conf_set_fn(struct conf_loader *ld, const struct conf_command *cmd,
                        yaml_node_t *node);

/* One YAML key of proxy.yaml. */
struct conf_command {
    const char *name;       /* the key */
    conf_set_fn *set;       /* validates and stores the value */
    size_t offset;          /* offsetof the field in struct conf */
    unsigned long long min; /* numbers: least value; strings: 1 = non-empty */
    unsigned long long max; /* numbers: greatest value; address lists:
                               offsetof their int count in struct conf */
    const char *want;       /* what a valid value is, for error messages */
};

#define CONF_CMD(key, setter, field, lo, hi, what)                             \
    {                                                                          \
        .name = (key), .set = (setter),                                        \
        .offset = offsetof(struct conf, field), .min = (lo), .max = (hi),      \
        .want = (what),                                                        \
    }

/* One section of keys (see the top). Any function may be NULL. */
struct conf_section {
    const struct conf_command *cmds;
    size_t ncmds;
    /* Fills the section's defaults (conf_init). CONF_OK or CONF_ENOMEM. */
    int (*defaults)(struct conf *c);
    /* Frees the section's owned strings (conf_free). */
    void (*free)(struct conf *c);
    /* Reports the errors of rules spanning keys, after the walk. */
    void (*check)(struct conf_loader *ld);
};

#define CONF_WANT_POSITIVE "a positive integer"
#define CONF_WANT_SIZE     "a positive size such as 65536, 64kb or 512mb"
#define CONF_WANT_STRING   "a string"
#define CONF_WANT_BOOL     "yes or no"

/* Setters of the common value kinds (conf.c). */
conf_set_fn conf_set_addr;        /* "host:port" */
conf_set_fn conf_set_seeds;       /* a list of "host:port" (see `max`) */
conf_set_fn conf_set_string;      /* a string; null or "" clears it */
conf_set_fn conf_set_bool;        /* yes/no (int field) */
conf_set_fn conf_set_uint;        /* an unsigned in [min, max] */
conf_set_fn conf_set_size;        /* bytes, with redis.conf's units */
conf_set_fn conf_set_addr_or_off; /* "host:port", or off: port 0 */

/* The state-format section (conf_state.c). */
#define CONF_STATE_NCMDS 1
extern const struct conf_command conf_state_cmds[CONF_STATE_NCMDS];
int conf_state_defaults(struct conf *c);
#define CONF_STATE_SECTION                                                     \
    {                                                                          \
        .cmds = conf_state_cmds, .ncmds = CONF_STATE_NCMDS,                    \
        .defaults = conf_state_defaults,                                       \
    }

/* The sections of the feature files, for conf_sections[] (conf.c). */
#define CONF_TLS_COUNT 20 /* keys of conf_tls.c */
extern const struct conf_command conf_tls_cmds[CONF_TLS_COUNT];
int conf_tls_defaults(struct conf *c);
void conf_tls_free(struct conf *c);
#define CONF_TLS_SECTION                                                       \
    {                                                                          \
        .cmds = conf_tls_cmds, .ncmds = CONF_TLS_COUNT,                        \
        .defaults = conf_tls_defaults, .free = conf_tls_free,                  \
    }

/* The lease section (conf_lease.c). */
#define CONF_LEASE_NCMDS 1
extern const struct conf_command conf_lease_cmds[CONF_LEASE_NCMDS];
int conf_lease_defaults(struct conf *c);
#define CONF_LEASE_SECTION                                                     \
    {                                                                          \
        .cmds = conf_lease_cmds, .ncmds = CONF_LEASE_NCMDS,                    \
        .defaults = conf_lease_defaults,                                       \
    }

/* The sections of the feature files, for conf_sections[] (conf.c). */
extern const struct conf_command conf_secret_cmds[CONF_SECRET_COUNT];
void conf_secret_free(struct conf *c);
void conf_secret_check(struct conf_loader *ld);
#define CONF_SECRET_SECTION                                                    \
    {                                                                          \
        .cmds = conf_secret_cmds, .ncmds = CONF_SECRET_COUNT,                  \
        .free = conf_secret_free, .check = conf_secret_check,                  \
    }

/* The field of `cmd` in `c`. */
void *conf_field(struct conf *c, const struct conf_command *cmd);

/* Reports `key: expected WANT, got "TEXT"` at `mark`. */
void conf_bad_text(struct conf_loader *ld, const yaml_mark_t *mark,
                   const struct conf_command *cmd, const char *want,
                   const char *text, size_t len);

/* Reports that the scalar `node` is not a valid value of `cmd`. */
void conf_bad_value(struct conf_loader *ld, const yaml_node_t *node,
                    const struct conf_command *cmd);

/* The node of the key `name` when the file set it, else NULL. */
const yaml_node_t *conf_key_seen(const struct conf_loader *ld,
                                 const char *name);

#endif /* PX_CONF_CONF_KEYS_H */
