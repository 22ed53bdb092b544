/* conf_secret.c: passwords kept in files (see conf_secret.h).
 *
 * The section's keys are the `<password>_file` keys of CONF_SECRETS. Once
 * proxy.yaml is walked, conf_secret_check() refuses a password set both
 * ways and reads each file into the password's field, so the file's errors
 * carry the key's position like any other value's, and --check-config
 * reports them. conf_secret_reload() reads one file again for SIGHUP; it
 * replaces a value only with a good file, so a half-written or deleted
 * file never logs anything out. No secret ever reaches an error message:
 * the errors say what is wrong with the file, not what it holds. */
#include "conf/conf_secret.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "conf/conf.h"
#include "conf/conf_keys.h"

/* Room for the reason a file is refused (its path included). */
#define CONF_SECRET_ERR_SIZE 1024

/* One secret of CONF_SECRETS. */
struct conf_secret_spec {
    const char *key;      /* "upstream_password" */
    const char *file_key; /* "upstream_password_file" */
    size_t offset;        /* offsetof its char * field in struct conf */
};

#define CONF_SECRET_SPEC(id, k, field)                                         \
    [id] = { .key = k,                                                         \
             .file_key = k "_file",                                            \
             .offset = offsetof(struct conf, field) },
static const struct conf_secret_spec conf_secret_specs[CONF_SECRET_COUNT] = {
    CONF_SECRETS(CONF_SECRET_SPEC)
};
#undef CONF_SECRET_SPEC

#define CONF_SECRET_CMD(id, k, field)                                          \
    CONF_CMD(k "_file", conf_set_string, secret.file[id], 1, 0,                \
             "the path of a file holding the password"),
const struct conf_command conf_secret_cmds[CONF_SECRET_COUNT] = { CONF_SECRETS(
    CONF_SECRET_CMD) };
#undef CONF_SECRET_CMD

const char *conf_secret_file_key(enum conf_secret_id id)
{
    return conf_secret_specs[id].file_key;
}

static char **conf_secret_field(struct conf *c, enum conf_secret_id id)
{
    return (char **)(void *)((char *)c + conf_secret_specs[id].offset);
}

static const char *conf_secret_get(const struct conf *c, enum conf_secret_id id)
{
    return *(char *const *)(const void *)((const char *)c +
                                          conf_secret_specs[id].offset);
}

/* Frees a secret, overwriting it first: a freed password should not linger
 * in the heap for a core dump to show. */
static void conf_secret_drop(char *s)
{
    volatile char *p = s;

    if (s == NULL) {
        return;
    }
    while (*p != '\0') {
        *p++ = '\0';
    }
    free(s);
}

/* ---------------- Reading a file ---------------- */

/* Reads at most CONF_SECRET_MAX_BYTES + 1 bytes of `fd` into `buf`. The
 * count, or -1 with errno set. */
static ssize_t conf_secret_fill(int fd, char *buf)
{
    size_t len = 0;
    ssize_t n;

    while (len <= CONF_SECRET_MAX_BYTES) {
        n = read(fd, buf + len, CONF_SECRET_MAX_BYTES + 1 - len);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0) {
            return -1;
        }
        if (n == 0) {
            break;
        }
        len += (size_t)n;
    }
    return (ssize_t)len;
}

/* CONF_OK when `fd` is a regular file, else CONF_ERR with the reason. */
static int conf_secret_regular(int fd, const char *path, char *err,
                               size_t errlen)
{
    struct stat st;

    if (fstat(fd, &st) != 0) {
        snprintf(err, errlen, "cannot read '%s': %s", path, strerror(errno));
    } else if (S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "cannot read '%s': %s", path, strerror(EISDIR));
    } else if (!S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "'%s' is not a regular file", path);
    } else {
        return CONF_OK;
    }
    return CONF_ERR;
}

int conf_secret_read(const char *path, char **out, char *err, size_t errlen)
{
    char *buf;
    ssize_t got;
    size_t len;
    int fd, rc = CONF_ERR;

    *out = NULL;
    /* Non-blocking, and regular files only: SIGHUP reads on the event
     * loop, where opening a FIFO with no writer would stop the proxy. */
    fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errlen, "cannot open '%s': %s", path, strerror(errno));
        return CONF_ERR;
    }
    if (conf_secret_regular(fd, path, err, errlen) != CONF_OK) {
        close(fd);
        return CONF_ERR;
    }
    /* One byte past the limit tells a too-large file apart. */
    buf = malloc(CONF_SECRET_MAX_BYTES + 2);
    if (buf == NULL) {
        close(fd);
        return CONF_ENOMEM;
    }
    got = conf_secret_fill(fd, buf);
    if (got < 0) {
        snprintf(err, errlen, "cannot read '%s': %s", path, strerror(errno));
        goto done;
    }
    len = (size_t)got;
    if (len > CONF_SECRET_MAX_BYTES) {
        snprintf(err, errlen, "'%s' is larger than %d bytes", path,
                 CONF_SECRET_MAX_BYTES);
        goto done;
    }
    buf[len] = '\0';
    if (len > 0 && buf[len - 1] == '\n') {
        buf[--len] = '\0';
        if (len > 0 && buf[len - 1] == '\r') {
            buf[--len] = '\0';
        }
    }
    if (len == 0) {
        snprintf(err, errlen, "'%s' is empty", path);
    } else if (memchr(buf, '\0', len) != NULL) {
        snprintf(err, errlen, "'%s' holds a NUL byte", path);
    } else if (memchr(buf, '\n', len) != NULL) {
        snprintf(err, errlen, "'%s' holds more than one line", path);
    } else {
        rc = CONF_OK;
    }

done:
    close(fd);
    if (rc != CONF_OK) {
        memset(buf, 0, CONF_SECRET_MAX_BYTES + 2);
        free(buf);
        return rc;
    }
    *out = buf;
    return CONF_OK;
}

/* ---------------- The section ---------------- */

void conf_secret_free(struct conf *c)
{
    size_t i;

    for (i = 0; i < CONF_SECRET_COUNT; i++) {
        free(c->secret.file[i]);
        c->secret.file[i] = NULL;
    }
}

/* Of two key nodes, the one written later in the file. */
static const yaml_node_t *conf_secret_later(const yaml_node_t *a,
                                            const yaml_node_t *b)
{
    return a->start_mark.index > b->start_mark.index ? a : b;
}

/* Refuses a password set both ways; reads each file into its password. */
void conf_secret_check(struct conf_loader *ld)
{
    const yaml_node_t *luser = conf_key_seen(ld, "limiter_user");
    char msg[CONF_SECRET_ERR_SIZE];
    size_t i;

    for (i = 0; i < CONF_SECRET_COUNT; i++) {
        const struct conf_secret_spec *s = &conf_secret_specs[i];
        const yaml_node_t *pn = conf_key_seen(ld, s->key);
        const yaml_node_t *fn = conf_key_seen(ld, s->file_key);
        const char *path = ld->c->secret.file[i];
        char *v = NULL;
        int rc;

        if (fn == NULL || path == NULL) {
            continue;
        }
        if (pn != NULL) {
            conf_yaml_error(&ld->diag, &conf_secret_later(pn, fn)->start_mark,
                            "%s and %s are mutually exclusive: set one", s->key,
                            s->file_key);
            continue;
        }
        rc = conf_secret_read(path, &v, msg, sizeof(msg));
        if (rc == CONF_ENOMEM) {
            conf_yaml_error(&ld->diag, &fn->start_mark, "%s: out of memory",
                            s->file_key);
        } else if (rc != CONF_OK) {
            conf_yaml_error(&ld->diag, &fn->start_mark, "%s: %s", s->file_key,
                            msg);
        } else {
            conf_secret_drop(*conf_secret_field(ld->c, i));
            *conf_secret_field(ld->c, i) = v;
        }
    }
    /* Without a password the limiter's user could not log in. */
    if (luser != NULL && conf_key_seen(ld, "limiter_password") == NULL &&
        conf_key_seen(ld, "limiter_password_file") == NULL) {
        conf_yaml_error(&ld->diag, &luser->start_mark,
                        "limiter_user needs limiter_password or "
                        "limiter_password_file");
    }
}

/* ---------------- The values in use ---------------- */

int conf_secret_values_init(struct conf_secret_values *v, const struct conf *c)
{
    size_t i;

    memset(v, 0, sizeof(*v));
    for (i = 0; i < CONF_SECRET_COUNT; i++) {
        const char *s = conf_secret_get(c, i);

        if (s != NULL && (v->value[i] = strdup(s)) == NULL) {
            conf_secret_values_free(v);
            return CONF_ENOMEM;
        }
    }
    return CONF_OK;
}

void conf_secret_values_free(struct conf_secret_values *v)
{
    size_t i;

    for (i = 0; i < CONF_SECRET_COUNT; i++) {
        conf_secret_drop(v->value[i]);
        v->value[i] = NULL;
    }
}

enum conf_secret_reloaded conf_secret_reload(const struct conf *c,
                                             enum conf_secret_id id,
                                             struct conf_secret_values *v,
                                             char *err, size_t errlen)
{
    char *fresh = NULL;
    int rc;

    if (c->secret.file[id] == NULL) {
        return CONF_SECRET_NO_FILE;
    }
    rc = conf_secret_read(c->secret.file[id], &fresh, err, errlen);
    if (rc == CONF_ENOMEM) {
        return CONF_SECRET_NOMEM;
    }
    if (rc != CONF_OK) {
        return CONF_SECRET_BAD;
    }
    if (v->value[id] != NULL && strcmp(v->value[id], fresh) == 0) {
        conf_secret_drop(fresh);
        return CONF_SECRET_UNCHANGED;
    }
    conf_secret_drop(v->value[id]);
    v->value[id] = fresh;
    return CONF_SECRET_CHANGED;
}
