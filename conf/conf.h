/* proxy.yaml: the server settings, as plain values.
 *
 * conf_init() fills the defaults; conf_load_file() overlays a YAML file;
 * the command line overlays both (proxy/main.c). Leaf layer: no logging, no
 * globals. Errors are written to a caller buffer as "file:line:column: text",
 * one per line, every error of the file (not just the first). */
#ifndef PX_CONF_CONF_H
#define PX_CONF_CONF_H

#include <stddef.h>

#include "conf/cmdpolicy.h"
#include "conf/conf_addr.h"
#include "conf/conf_lease.h"
#include "conf/conf_secret.h"
#include "conf/conf_sentinel.h"
#include "conf/conf_state.h"
#include "conf/conf_tls.h"

#define CONF_OK     0
#define CONF_ERR    -1
#define CONF_ENOMEM -2

#define CONF_MAX_SEEDS CONF_MAX_ADDRS /* cluster seeds kept from config */

/* Log levels, in increasing severity (same order as proxy/log.h). */
enum conf_log_level {
    CONF_LOG_DEBUG = 0,
    CONF_LOG_INFO = 1,
    CONF_LOG_WARN = 2,
    CONF_LOG_ERROR = 3,
};

/* What a limiter check does when its store cannot answer in time. */
enum conf_store_down {
    CONF_FAIL_CLOSED = 0, /* reply with an error (default) */
    CONF_FAIL_OPEN = 1,   /* admit, and count it */
};

struct conf {
    struct conf_addr listen;   /* listen: default 127.0.0.1:7777 */
    struct conf_addr upstream; /* upstream: single Redis; port 0 = none */
    struct conf_addr seeds[CONF_MAX_SEEDS]; /* cluster: seed nodes */
    int nseeds;                             /* 0 = not cluster mode */

    char *upstream_user;     /* owned; NULL = AUTH with password only */
    char *upstream_password; /* owned; NULL = no AUTH upstream */
    char *limiter_user;      /* owned; the Redis user of the limiter's
                                own connections, NULL = none */
    char *limiter_password;  /* owned; NULL = the limiter shares the
                                client traffic's connections */
    char *requirepass;       /* owned; NULL = clients need no AUTH */
    char *admin_password;    /* owned; NULL = no admin login, and no
                                limiter administration over the network */
    char *limits_file;       /* owned; NULL = no limits tree */
    char *key_prefix;        /* owned; default "cellgate:" */
    /* The *_password_file keys (conf_secret.c): loading proxy.yaml reads
     * each file into its password above. */
    struct conf_secret secret;

    enum conf_log_level log_level;       /* default info */
    enum conf_store_down store_down;     /* default fail_closed */
    unsigned connect_timeout_ms;         /* default 1000 */
    unsigned command_timeout_ms;         /* default 1000; 0 = none */
    unsigned busy_reply_threshold_ms;    /* Redis's busy-reply-threshold,
                                            default 5000 */
    unsigned private_pool;               /* idle private connections kept
                                            per node, default 4 */
    unsigned private_max_per_node;       /* private connections clients
                                            hold per node, default 1000 */
    unsigned max_clients;                /* default 10000 */
    unsigned upstream_pool;              /* shared connections per node, 2 */
    unsigned max_pipeline;               /* pending requests before pausing */
    unsigned long long max_bulk_bytes;   /* default 512 MB */
    unsigned long long max_elements;     /* default 1048576 */
    unsigned long long max_inline_bytes; /* default 64 KB */
    unsigned long long client_max_output_bytes; /* default 64 MB */
    int split_multikey; /* cluster: split MGET & co. by slot; default 1 */
    unsigned refusal_cache_size; /* CL.THROTTLE keys whose refusal the
                                    proxy answers itself; 0 = off */
    struct cmdpolicy commands;   /* what ordinary clients may run: the
                                    default, then the rules of commands: */
    unsigned embedded_max_keys;  /* embedded store: most keys held */
    unsigned limiter_wait_max_per_identity; /* LIMITER CHECK ... WAIT
                                               held per identity; 0 = none */
    unsigned limiter_wait_max_total;        /* ... and in all; 0 = none */
    unsigned limiter_wait_max_ms; /* how far ahead a WAIT may reserve: a
                                     longer WAIT waits this long at most */
    /* Bytes (keys included) the limiter may hold for clients: */
    unsigned long long embedded_max_bytes;         /* embedded store */
    unsigned long long refusal_cache_max_bytes;    /* refusal cache */
    unsigned long long limiter_override_max_bytes; /* embedded overrides */
    unsigned long long limiter_pending_max_bytes;  /* limiter calls
                                                      pending, all clients */
    int limiter_shadow; /* every level of the limits tree decides and keeps
                           state but never refuses; default 0 */
    struct conf_addr metrics_listen; /* the Prometheus endpoint; port 0 =
                                        off (default) */
    double metrics_near_limit_ratio; /* an admitted decision with at least
                                        this share of its limit used is
                                        near_limit; 0 < r <= 1, default
                                        0.8 */
    struct conf_sentinel sentinel;   /* sentinel mode (conf_sentinel.h) */
    struct conf_lease lease;         /* leases (conf_lease.h) */
    struct conf_state state;         /* LIMITER's state format
                                        (conf_state.h) */
    struct conf_tls tls;             /* TLS on both sides (conf_tls.h) */
};

/* Fills every field with its default. Allocates the default key_prefix;
 * returns CONF_OK or CONF_ENOMEM. */
int conf_init(struct conf *c);

/* Frees the owned strings. Accepts a zeroed struct. */
void conf_free(struct conf *c);

/* Overlays the settings of a YAML file (or of `text`, naming it `name` in
 * errors). Unknown keys, wrong types and out-of-range values are errors.
 * Returns CONF_OK, or CONF_ERR with every error written to `err` (one per
 * line, "file:line:column: message"). On error `c` may be partly updated. */
int conf_load_file(struct conf *c, const char *path, char *err, size_t errlen);
int conf_load_string(struct conf *c, const char *name, const char *text,
                     char *err, size_t errlen);

/* Parses "a:1,b:2" into seeds[]. CONF_OK or CONF_ERR. */
int conf_parse_seeds(struct conf *c, const char *list);

/* Replaces an owned string field (NULL clears it). CONF_OK or CONF_ENOMEM. */
int conf_set_str(char **field, const char *value);

/* "debug" -> CONF_LOG_DEBUG, ...; -1 when unknown. */
int conf_log_level_parse(const char *s);

#endif /* PX_CONF_CONF_H */
