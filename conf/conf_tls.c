/* conf_tls.c: the TLS section of proxy.yaml (conf_keys.h). Key names and
 * defaults follow redis.conf's tls-* keys, with an upstream_ prefix for the
 * connections cellgate opens to Redis. Leaf layer: pure parsing. */
#include "conf/conf_tls.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "conf/conf.h"
#include "conf/conf_keys.h"

/* Whether this build has TLS (CMake's PX_TLS). */
#if defined(PX_TLS) && PX_TLS
#define PX_TLS_BUILT 1
#else
#define PX_TLS_BUILT 0
#endif

/* A handshake in progress holds a client slot and a little memory, so a
 * peer that stalls is closed after this long (Redis has no such key; 5 s
 * is far above any real handshake). */
#define CONF_TLS_DEFAULT_HANDSHAKE_MS 5000
#define CONF_TLS_MAX_HANDSHAKE_MS     3600000

#define CONF_WANT_PROTOCOLS                                                    \
    "a list of TLSv1, TLSv1.1, TLSv1.2, TLSv1.3 such as \"TLSv1.2 TLSv1.3\""

static conf_set_fn conf_tls_set_protocols;
static conf_set_fn conf_tls_set_auth;

const struct conf_command conf_tls_cmds[CONF_TLS_COUNT] = {
    CONF_CMD("upstream_tls", conf_set_bool, tls.upstream, 0, 0, CONF_WANT_BOOL),
    CONF_CMD("upstream_tls_ca_cert_file", conf_set_string, tls.up.ca_cert_file,
             0, 0, CONF_WANT_STRING),
    CONF_CMD("upstream_tls_ca_cert_dir", conf_set_string, tls.up.ca_cert_dir, 0,
             0, CONF_WANT_STRING),
    CONF_CMD("upstream_tls_cert_file", conf_set_string, tls.up.cert_file, 0, 0,
             CONF_WANT_STRING),
    CONF_CMD("upstream_tls_key_file", conf_set_string, tls.up.key_file, 0, 0,
             CONF_WANT_STRING),
    CONF_CMD("upstream_tls_server_name", conf_set_string, tls.up_server_name, 0,
             0, CONF_WANT_STRING),
    CONF_CMD("upstream_tls_verify", conf_set_bool, tls.up_verify, 0, 0,
             CONF_WANT_BOOL),
    CONF_CMD("upstream_tls_protocols", conf_tls_set_protocols, tls.up.protocols,
             0, 0, CONF_WANT_PROTOCOLS),
    CONF_CMD("upstream_tls_ciphers", conf_set_string, tls.up.ciphers, 0, 0,
             CONF_WANT_STRING),
    CONF_CMD("upstream_tls_ciphersuites", conf_set_string, tls.up.ciphersuites,
             0, 0, CONF_WANT_STRING),
    CONF_CMD("tls_listen", conf_set_addr_or_off, tls.listen, 0, 0,
             "host:port or off"),
    CONF_CMD("tls_cert_file", conf_set_string, tls.srv.cert_file, 0, 0,
             CONF_WANT_STRING),
    CONF_CMD("tls_key_file", conf_set_string, tls.srv.key_file, 0, 0,
             CONF_WANT_STRING),
    CONF_CMD("tls_ca_cert_file", conf_set_string, tls.srv.ca_cert_file, 0, 0,
             CONF_WANT_STRING),
    CONF_CMD("tls_ca_cert_dir", conf_set_string, tls.srv.ca_cert_dir, 0, 0,
             CONF_WANT_STRING),
    CONF_CMD("tls_auth_clients", conf_tls_set_auth, tls.auth_clients, 0, 0,
             "no, yes or optional"),
    CONF_CMD("tls_handshake_timeout_ms", conf_set_uint,
             tls.handshake_timeout_ms, 1, CONF_TLS_MAX_HANDSHAKE_MS,
             CONF_WANT_POSITIVE),
    CONF_CMD("tls_protocols", conf_tls_set_protocols, tls.srv.protocols, 0, 0,
             CONF_WANT_PROTOCOLS),
    CONF_CMD("tls_ciphers", conf_set_string, tls.srv.ciphers, 0, 0,
             CONF_WANT_STRING),
    CONF_CMD("tls_ciphersuites", conf_set_string, tls.srv.ciphersuites, 0, 0,
             CONF_WANT_STRING),
};

/* The protocol names, as redis.conf spells them. */
static const struct {
    const char *name;
    unsigned bit;
} conf_tls_versions[] = {
    { "TLSv1", CONF_TLS_V1 },
    { "TLSv1.1", CONF_TLS_V1_1 },
    { "TLSv1.2", CONF_TLS_V1_2 },
    { "TLSv1.3", CONF_TLS_V1_3 },
};

int conf_tls_protocols_parse(const char *s, unsigned *mask)
{
    unsigned m = 0;
    size_t len, i;

    for (;;) {
        s += strspn(s, " \t");
        if (*s == '\0') {
            break;
        }
        len = strcspn(s, " \t");
        for (i = 0; i < CONF_ARRAY_SIZE(conf_tls_versions); i++) {
            if (strlen(conf_tls_versions[i].name) == len &&
                strncasecmp(s, conf_tls_versions[i].name, len) == 0) {
                break;
            }
        }
        if (i == CONF_ARRAY_SIZE(conf_tls_versions)) {
            return -1;
        }
        m |= conf_tls_versions[i].bit;
        s += len;
    }
    if (m == 0) {
        return -1;
    }
    *mask = m;
    return 0;
}

static int conf_tls_set_protocols(struct conf_loader *ld,
                                  const struct conf_command *cmd,
                                  yaml_node_t *node)
{
    const char *s =
        conf_yaml_scalar(&ld->diag, node, NULL, cmd->name, cmd->want);

    if (s == NULL) {
        return CONF_ERR;
    }
    if (conf_tls_protocols_parse(s, conf_field(ld->c, cmd)) != 0) {
        conf_bad_value(ld, node, cmd);
        return CONF_ERR;
    }
    return CONF_OK;
}

static int conf_tls_set_auth(struct conf_loader *ld,
                             const struct conf_command *cmd, yaml_node_t *node)
{
    static const char *const names[] = { "no", "yes", "optional" };
    const char *s =
        conf_yaml_scalar(&ld->diag, node, NULL, cmd->name, cmd->want);
    size_t i;

    if (s == NULL) {
        return CONF_ERR;
    }
    for (i = 0; i < CONF_ARRAY_SIZE(names); i++) {
        if (strcasecmp(s, names[i]) == 0) {
            *(enum conf_tls_auth *)conf_field(ld->c, cmd) =
                (enum conf_tls_auth)i;
            return CONF_OK;
        }
    }
    conf_bad_value(ld, node, cmd);
    return CONF_ERR;
}

/* tls_listen and listen: "host:port", or off (null too) for none. */
int conf_set_addr_or_off(struct conf_loader *ld, const struct conf_command *cmd,
                         yaml_node_t *node)
{
    const char *s;

    if (!conf_yaml_is_null(node)) {
        s = conf_yaml_scalar(&ld->diag, node, NULL, cmd->name, cmd->want);
        if (s == NULL) {
            return CONF_ERR;
        }
        if (strcasecmp(s, "off") != 0) {
            return conf_set_addr(ld, cmd, node);
        }
    }
    memset(conf_field(ld->c, cmd), 0, sizeof(struct conf_addr));
    return CONF_OK;
}

int conf_tls_defaults(struct conf *c)
{
    c->tls.up_verify = 1;
    c->tls.up.protocols = CONF_TLS_PROTOCOLS_DEFAULT;
    c->tls.srv.protocols = CONF_TLS_PROTOCOLS_DEFAULT;
    c->tls.auth_clients = CONF_TLS_AUTH_YES;
    c->tls.handshake_timeout_ms = CONF_TLS_DEFAULT_HANDSHAKE_MS;
    return CONF_OK;
}

static void conf_tls_side_free(struct conf_tls_side *s)
{
    char **owned[] = {
        &s->ca_cert_file, &s->ca_cert_dir, &s->cert_file,
        &s->key_file,     &s->ciphers,     &s->ciphersuites,
    };
    size_t i;

    for (i = 0; i < CONF_ARRAY_SIZE(owned); i++) {
        free(*owned[i]);
        *owned[i] = NULL;
    }
}

void conf_tls_free(struct conf *c)
{
    conf_tls_side_free(&c->tls.up);
    conf_tls_side_free(&c->tls.srv);
    free(c->tls.up_server_name);
    c->tls.up_server_name = NULL;
}

int conf_tls_check(const struct conf *c, char *err, size_t errlen)
{
    const struct conf_tls *t = &c->tls;
    const char *why = NULL;

    if (c->listen.port == 0 && t->listen.port == 0) {
        why = "listen and tls_listen are both off: no client could connect";
    } else if (!PX_TLS_BUILT && (t->upstream || t->listen.port != 0)) {
        why = "cellgate was built without TLS (-DPX_TLS=OFF)";
    } else if ((t->up.cert_file == NULL) != (t->up.key_file == NULL)) {
        why = "upstream_tls_cert_file and upstream_tls_key_file go together "
              "(mutual TLS): set both or neither";
    } else if (t->listen.port != 0 &&
               (t->srv.cert_file == NULL || t->srv.key_file == NULL)) {
        why = "tls_listen needs tls_cert_file and tls_key_file";
    } else if (t->listen.port != 0 && t->auth_clients != CONF_TLS_AUTH_NO &&
               t->srv.ca_cert_file == NULL && t->srv.ca_cert_dir == NULL) {
        why = "Either tls_ca_cert_file or tls_ca_cert_dir must be specified "
              "when tls_auth_clients is enabled!";
    }
    if (why == NULL) {
        return 0;
    }
    snprintf(err, errlen, "%s", why);
    return -1;
}
