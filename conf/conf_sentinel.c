/* The Sentinel section of proxy.yaml (conf_sentinel.h). */
#include <stdlib.h>

#include "conf/conf.h"
#include "conf/conf_keys.h"
#include "conf/conf_sentinel.h" /* again: its section, after conf_keys.h */

const struct conf_command conf_sentinel_cmds[CONF_SENTINEL_NCMDS] = {
    CONF_CMD("sentinel", conf_set_seeds, sentinel.addrs, 0,
             offsetof(struct conf, sentinel.naddrs), "a list of host:port"),
    CONF_CMD("sentinel_master", conf_set_string, sentinel.master, 1, 0,
             "a non-empty string (the name the sentinels monitor)"),
    CONF_CMD("sentinel_user", conf_set_string, sentinel.user, 1, 0,
             "a non-empty string"),
    CONF_CMD("sentinel_password", conf_set_string, sentinel.password, 0, 0,
             CONF_WANT_STRING),
    CONF_CMD("sentinel_tls", conf_set_bool, sentinel.tls, 0, 1, CONF_WANT_BOOL),
};

int conf_sentinel_defaults(struct conf *c)
{
    c->sentinel.naddrs = 0;
    c->sentinel.tls = CONF_SENTINEL_TLS_AS_UPSTREAM;
    return CONF_OK;
}

void conf_sentinel_free(struct conf *c)
{
    free(c->sentinel.master);
    free(c->sentinel.user);
    free(c->sentinel.password);
    c->sentinel.master = NULL;
    c->sentinel.user = NULL;
    c->sentinel.password = NULL;
}

/* The broken rule's text and the key beside `sentinel` it names. */
static const char *conf_sentinel_rule(const struct conf *c, const char **key)
{
    const struct conf_sentinel *s = &c->sentinel;

    *key = "sentinel";
    if (s->naddrs == 0) {
        *key = "sentinel_master";
        return s->master != NULL ? "sentinel_master needs sentinel" : NULL;
    }
    if (c->upstream.port != 0) {
        *key = "upstream";
        return "sentinel and upstream are mutually exclusive";
    }
    if (c->nseeds > 0) {
        *key = "cluster";
        return "sentinel and cluster are mutually exclusive";
    }
    if (s->master == NULL) {
        return "sentinel needs sentinel_master (the name the sentinels "
               "monitor the master by)";
    }
    if (s->user != NULL && s->password == NULL) {
        *key = "sentinel_user";
        return "sentinel_user needs sentinel_password or "
               "sentinel_password_file";
    }
    return NULL;
}

int conf_sentinel_tls(const struct conf *c)
{
    if (c->sentinel.naddrs == 0) {
        return 0;
    }
    return c->sentinel.tls == CONF_SENTINEL_TLS_AS_UPSTREAM ? c->tls.upstream
                                                            : c->sentinel.tls;
}

const char *conf_sentinel_invalid(const struct conf *c)
{
    const char *key;

    return conf_sentinel_rule(c, &key);
}

/* A rule of two keys is reported at the later of the two. */
void conf_sentinel_check(struct conf_loader *ld)
{
    const char *key;
    const char *why = conf_sentinel_rule(ld->c, &key);
    const yaml_node_t *a = conf_key_seen(ld, "sentinel");
    const yaml_node_t *b = conf_key_seen(ld, key);

    if (why == NULL) {
        return;
    }
    if (a == NULL || (b != NULL && b->start_mark.index > a->start_mark.index)) {
        a = b;
    }
    if (a != NULL) { /* else neither key is this file's */
        conf_yaml_error(&ld->diag, &a->start_mark, "%s", why);
    }
}
