/* proxy.yaml's Sentinel keys: sentinel mode is single mode whose one node
 * is the master that Redis Sentinel names (proxy/core/sentinel.c).
 *
 *   sentinel: [127.0.0.1:26379, ...]   the sentinels, asked in turn
 *   sentinel_master: mymaster          the name they monitor it by
 *   sentinel_user / sentinel_password  AUTH on the sentinels
 *   sentinel_tls: yes|no               default: upstream_tls's value
 *
 * Leaf layer: the fields, and the section conf.c lists (conf_keys.h). */
#ifndef PX_CONF_CONF_SENTINEL_H
#define PX_CONF_CONF_SENTINEL_H

#include "conf/conf_addr.h"

struct conf;
struct conf_command;
struct conf_loader;

/* sentinel_tls when the file does not set it: follow upstream_tls. */
#define CONF_SENTINEL_TLS_AS_UPSTREAM -1

struct conf_sentinel {
    struct conf_addr addrs[CONF_MAX_ADDRS]; /* sentinel: the sentinels */
    int naddrs;     /* length of addrs; 0 = not sentinel mode */
    char *master;   /* owned: sentinel_master, required with sentinel */
    char *user;     /* owned: sentinel_user; NULL = AUTH with password */
    char *password; /* owned: sentinel_password; NULL = no AUTH */
    int tls;        /* sentinel_tls: 0, 1, or CONF_SENTINEL_TLS_AS_UPSTREAM */
};

/* The rules spanning keys, for a configuration built from flags too
 * (proxy/main.c): NULL when it is valid, else the error's text. */
const char *conf_sentinel_invalid(const struct conf *c);

/* 1 when the connections to the sentinels speak TLS (sentinel_tls, else
 * upstream_tls's value; with the upstream_tls_* settings either way). */
int conf_sentinel_tls(const struct conf *c);

#endif /* PX_CONF_CONF_SENTINEL_H */

/* The section, for the files of conf/ that include conf_keys.h first (its
 * table's type is theirs only): conf.c's conf_sections[]. */
#if defined(PX_CONF_CONF_KEYS_H) && !defined(PX_CONF_CONF_SENTINEL_KEYS)
#define PX_CONF_CONF_SENTINEL_KEYS
#define CONF_SENTINEL_NCMDS 5
extern const struct conf_command conf_sentinel_cmds[];
int conf_sentinel_defaults(struct conf *c);
void conf_sentinel_free(struct conf *c);
void conf_sentinel_check(struct conf_loader *ld);
#define CONF_SENTINEL_SECTION                                                  \
    {                                                                          \
        .cmds = conf_sentinel_cmds, .ncmds = CONF_SENTINEL_NCMDS,              \
        .defaults = conf_sentinel_defaults, .free = conf_sentinel_free,        \
        .check = conf_sentinel_check,                                          \
    }

#endif
