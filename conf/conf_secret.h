/* Secrets read from files: `upstream_password_file` and its kin.
 *
 * A password may be written in proxy.yaml (`upstream_password: ...`) or
 * kept in a file of its own (`upstream_password_file: /run/secrets/x`),
 * which an operator (or a secret store) rewrites to rotate it, then sends
 * SIGHUP. The file holds one line: a trailing "\n" or "\r\n" is dropped;
 * an empty file, one over CONF_SECRET_MAX_BYTES, one with a NUL byte or a
 * second line, and anything but a regular file are refused, and so is a
 * key set both ways.
 *
 * Loading proxy.yaml reads each file into the password's field of struct
 * conf, so everything that asks "is there a password?" reads conf as
 * before. The passwords in use live in a struct conf_secret_values, which
 * starts as a copy of them and is refreshed by conf_secret_reload() on
 * SIGHUP: the values are what connections AUTH with from then on.
 *
 * Adding a secret (sentinel_password_file) is one line of CONF_SECRETS.
 * Leaf layer: libc only, no logging, no globals. */
#ifndef PX_CONF_CONF_SECRET_H
#define PX_CONF_CONF_SECRET_H

#include <stddef.h>

struct conf;

/* The largest secret file, in bytes (its newline included). */
#define CONF_SECRET_MAX_BYTES 4096

/* X(id, key, field): the secret's id, its proxy.yaml key (the file's key is
 * key "_file") and its char * field in struct conf. */
#define CONF_SECRETS(X)                                                        \
    X(CONF_SECRET_UPSTREAM, "upstream_password", upstream_password)            \
    X(CONF_SECRET_LIMITER, "limiter_password", limiter_password)               \
    X(CONF_SECRET_ADMIN, "admin_password", admin_password)                     \
    X(CONF_SECRET_REQUIREPASS, "requirepass", requirepass)                     \
    X(CONF_SECRET_SENTINEL, "sentinel_password", sentinel.password)

#define CONF_SECRET_ENUM(id, key, field) id,
enum conf_secret_id { CONF_SECRETS(CONF_SECRET_ENUM) CONF_SECRET_COUNT };
#undef CONF_SECRET_ENUM

/* proxy.yaml's section of the file keys (struct conf's `secret`). */
struct conf_secret {
    char *file[CONF_SECRET_COUNT]; /* owned: the *_file paths; NULL = the
                                      password, if any, is in proxy.yaml */
};

/* The passwords in use, by id. */
struct conf_secret_values {
    char *value[CONF_SECRET_COUNT]; /* owned; NULL = no such password */
};

/* "upstream_password_file", ... */
const char *conf_secret_file_key(enum conf_secret_id id);

/* Reads the secret file at `path` into `*out` (NUL-terminated, owned by
 * the caller). Never blocks on a FIFO (it is refused). CONF_OK; CONF_ERR
 * with the reason, naming the path, in `err` (unreadable with strerror, not
 * a regular file, empty, too large, a NUL byte, more than one line); or
 * CONF_ENOMEM. */
int conf_secret_read(const char *path, char **out, char *err, size_t errlen);

/* Fills `v` with copies of the passwords of `c`. CONF_OK or CONF_ENOMEM
 * (`v` is then empty). */
int conf_secret_values_init(struct conf_secret_values *v, const struct conf *c);

/* Frees the values. Accepts a zeroed struct. */
void conf_secret_values_free(struct conf_secret_values *v);

/* What conf_secret_reload() did. */
enum conf_secret_reloaded {
    CONF_SECRET_NO_FILE = 0, /* the password is not from a file */
    CONF_SECRET_CHANGED,     /* read: a new value is in use */
    CONF_SECRET_UNCHANGED,   /* read: the same value as before */
    CONF_SECRET_BAD,         /* refused (reason in err): the old stays */
    CONF_SECRET_NOMEM,       /* out of memory: the old stays */
};

/* Reads the file of secret `id` of `c` again and, when it is good, makes
 * its content the value of `id` in `v`. */
enum conf_secret_reloaded conf_secret_reload(const struct conf *c,
                                             enum conf_secret_id id,
                                             struct conf_secret_values *v,
                                             char *err, size_t errlen);

#endif /* PX_CONF_CONF_SECRET_H */
