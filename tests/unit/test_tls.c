/* Unit tests of TLS's pure parts: the protocol list, the name a node's
 * certificate must carry (host name vs IP literal), the rules spanning the
 * TLS keys, their defaults and documentation. */
#include <stdio.h>
#include <string.h>

#include "conf/conf.h"
#include "conf/conf_keys.h"
#include "conf/conf_tls.h"
#include "proxy/core/tls.h"
#include "tests/support/px_test.h"

PX_TEST_SUITE(tls);

Test(tls, protocols_parse)
{
    unsigned m = 0;

    cr_assert_eq(conf_tls_protocols_parse("TLSv1.2 TLSv1.3", &m), 0);
    cr_assert_eq(m, CONF_TLS_V1_2 | CONF_TLS_V1_3);
    cr_assert_eq(conf_tls_protocols_parse("  tlsv1.3\t", &m), 0);
    cr_assert_eq(m, CONF_TLS_V1_3);
    cr_assert_eq(conf_tls_protocols_parse("TLSv1 TLSv1.1", &m), 0);
    cr_assert_eq(m, CONF_TLS_V1 | CONF_TLS_V1_1);
    m = 77;
    cr_assert_eq(conf_tls_protocols_parse("", &m), -1);
    cr_assert_eq(conf_tls_protocols_parse("   ", &m), -1);
    cr_assert_eq(conf_tls_protocols_parse("TLSv1.4", &m), -1);
    cr_assert_eq(conf_tls_protocols_parse("TLSv1.2,TLSv1.3", &m), -1);
    cr_assert_eq(conf_tls_protocols_parse("TLSv1.2 SSLv3", &m), -1);
    cr_assert_eq(conf_tls_protocols_parse("TLSv1.", &m), -1);
    cr_assert_eq(m, 77, "a refused list changed the mask");
}

Test(tls, name_kind)
{
    cr_assert_eq(tls_name_kind("127.0.0.1"), TLS_NAME_IP);
    cr_assert_eq(tls_name_kind("::1"), TLS_NAME_IP);
    cr_assert_eq(tls_name_kind("fe80::1:2"), TLS_NAME_IP);
    cr_assert_eq(tls_name_kind("localhost"), TLS_NAME_HOST);
    cr_assert_eq(tls_name_kind("redis-1.example.com"), TLS_NAME_HOST);
    cr_assert_eq(tls_name_kind("1.2.3"), TLS_NAME_HOST);
    cr_assert_eq(tls_name_kind("1.2.3.4.example"), TLS_NAME_HOST);
}

Test(tls, name_for_a_node)
{
    char n[256];

    cr_assert_eq(tls_name_for("10.0.0.5:6379", NULL, n, sizeof(n)),
                 TLS_NAME_IP);
    cr_assert_str_eq(n, "10.0.0.5");
    cr_assert_eq(tls_name_for("[::1]:6380", NULL, n, sizeof(n)), TLS_NAME_IP);
    cr_assert_str_eq(n, "::1");
    cr_assert_eq(tls_name_for("::1:6380", NULL, n, sizeof(n)), TLS_NAME_IP);
    cr_assert_str_eq(n, "::1");
    cr_assert_eq(tls_name_for("redis.example.com:6379", NULL, n, sizeof(n)),
                 TLS_NAME_HOST);
    cr_assert_str_eq(n, "redis.example.com");
    /* upstream_tls_server_name wins over the address. */
    cr_assert_eq(tls_name_for("10.0.0.5:6379", "cache.internal", n, sizeof(n)),
                 TLS_NAME_HOST);
    cr_assert_str_eq(n, "cache.internal");
    cr_assert_eq(
        tls_name_for("redis.example.com:6379", "10.1.1.1", n, sizeof(n)),
        TLS_NAME_IP);
    cr_assert_str_eq(n, "10.1.1.1");
    /* A short buffer truncates, and stays terminated. */
    tls_name_for("redis.example.com:6379", NULL, n, 6);
    cr_assert_str_eq(n, "redis");
}

/* Loads `yaml` over the defaults; CONF_OK expected. */
static void tls_load(struct conf *c, const char *yaml)
{
    char err[2048] = "";

    cr_assert_eq(conf_init(c), CONF_OK);
    cr_assert_eq(conf_load_string(c, "proxy.yaml", yaml, err, sizeof(err)),
                 CONF_OK, "%s", err);
}

Test(tls, defaults_as_redis)
{
    struct conf c;

    tls_load(&c, "");
    cr_assert_eq(c.tls.upstream, 0);
    cr_assert_eq(c.tls.up_verify, 1);
    cr_assert_eq(c.tls.up.protocols, CONF_TLS_V1_2 | CONF_TLS_V1_3);
    cr_assert_eq(c.tls.srv.protocols, CONF_TLS_V1_2 | CONF_TLS_V1_3);
    cr_assert_eq(c.tls.auth_clients, CONF_TLS_AUTH_YES);
    cr_assert_eq(c.tls.handshake_timeout_ms, 5000);
    cr_assert_eq(c.tls.listen.port, 0);
    cr_assert_null(c.tls.up.ca_cert_file);
    conf_free(&c);
}

Test(tls, keys_load)
{
    struct conf c;

    tls_load(&c, "upstream_tls: yes\nupstream_tls_ca_cert_file: /ca.crt\n"
                 "upstream_tls_verify: no\nupstream_tls_server_name: r.x\n"
                 "upstream_tls_protocols: TLSv1.3\n"
                 "tls_listen: 0.0.0.0:6380\ntls_auth_clients: optional\n"
                 "tls_handshake_timeout_ms: 250\nlisten: off\n"
                 "tls_ciphersuites: TLS_AES_128_GCM_SHA256\n");
    cr_assert_eq(c.tls.upstream, 1);
    cr_assert_str_eq(c.tls.up.ca_cert_file, "/ca.crt");
    cr_assert_eq(c.tls.up_verify, 0);
    cr_assert_str_eq(c.tls.up_server_name, "r.x");
    cr_assert_eq(c.tls.up.protocols, CONF_TLS_V1_3);
    cr_assert_str_eq(c.tls.listen.host, "0.0.0.0");
    cr_assert_eq(c.tls.listen.port, 6380);
    cr_assert_eq(c.tls.auth_clients, CONF_TLS_AUTH_OPTIONAL);
    cr_assert_eq(c.tls.handshake_timeout_ms, 250);
    cr_assert_eq(c.listen.port, 0, "listen: off");
    cr_assert_str_eq(c.tls.srv.ciphersuites, "TLS_AES_128_GCM_SHA256");
    conf_free(&c);
}

Test(tls, bad_values)
{
    static const char *const bad[][2] = {
        { "tls_auth_clients: maybe\n", "tls_auth_clients: expected no, yes "
                                       "or optional" },
        { "tls_protocols: SSLv3\n", "tls_protocols: expected a list of" },
        { "tls_listen: nowhere\n", "tls_listen: expected host:port or off" },
        { "tls_handshake_timeout_ms: 0\n", "tls_handshake_timeout_ms: " },
        { "upstream_tls: maybe\n", "upstream_tls: expected yes or no" },
    };
    struct conf c;
    char err[2048];

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err[0] = '\0';
        cr_assert_eq(conf_init(&c), CONF_OK);
        cr_assert_eq(
            conf_load_string(&c, "proxy.yaml", bad[i][0], err, sizeof(err)),
            CONF_ERR, "%s was taken", bad[i][0]);
        cr_assert_not_null(strstr(err, bad[i][1]), "%s: %s", bad[i][0], err);
        conf_free(&c);
    }
}

/* The rules spanning keys, once the flags are applied too. */
Test(tls, check_rules)
{
    struct conf c;
    char err[512];

    tls_load(&c, "");
    cr_assert_eq(conf_tls_check(&c, err, sizeof(err)), 0, "%s", err);
    c.listen.port = 0;
    cr_assert_eq(conf_tls_check(&c, err, sizeof(err)), -1);
    cr_assert_not_null(strstr(err, "listen and tls_listen are both off"));
    conf_free(&c);
#if defined(PX_TLS) && PX_TLS
    tls_load(&c, "listen: off\ntls_listen: 127.0.0.1:6380\n");
    cr_assert_eq(conf_tls_check(&c, err, sizeof(err)), -1);
    cr_assert_str_eq(err, "tls_listen needs tls_cert_file and tls_key_file");
    conf_free(&c);

    tls_load(&c, "tls_listen: 127.0.0.1:6380\ntls_cert_file: a\n"
                 "tls_key_file: b\n");
    cr_assert_eq(conf_tls_check(&c, err, sizeof(err)), -1);
    cr_assert_str_eq(err, "Either tls_ca_cert_file or tls_ca_cert_dir must "
                          "be specified when tls_auth_clients is enabled!");
    c.tls.auth_clients = CONF_TLS_AUTH_NO;
    cr_assert_eq(conf_tls_check(&c, err, sizeof(err)), 0, "%s", err);
    c.tls.auth_clients = CONF_TLS_AUTH_OPTIONAL;
    cr_assert_eq(conf_tls_check(&c, err, sizeof(err)), -1);
    conf_free(&c);

    tls_load(&c, "tls_listen: 127.0.0.1:6380\ntls_cert_file: a\n"
                 "tls_key_file: b\ntls_ca_cert_dir: /etc/ssl/certs\n");
    cr_assert_eq(conf_tls_check(&c, err, sizeof(err)), 0, "%s", err);
    conf_free(&c);

    tls_load(&c, "upstream_tls: yes\nupstream_tls_key_file: k\n");
    cr_assert_eq(conf_tls_check(&c, err, sizeof(err)), -1);
    cr_assert_not_null(strstr(err, "upstream_tls_cert_file and "
                                   "upstream_tls_key_file go together"));
    conf_free(&c);
#else
    tls_load(&c, "upstream_tls: yes\n");
    cr_assert_eq(conf_tls_check(&c, err, sizeof(err)), -1);
    cr_assert_str_eq(err, "cellgate was built without TLS (-DPX_TLS=OFF)");
    conf_free(&c);
#endif
}

/* conf/proxy.example.yaml documents every TLS key. */
Test(tls, example_file_mentions_every_key)
{
    FILE *f = fopen(PX_SOURCE_DIR "/conf/proxy.example.yaml", "r");
    static char text[1 << 17];
    char needle[128];
    size_t n;

    cr_assert_not_null(f);
    n = fread(text, 1, sizeof(text) - 1, f);
    fclose(f);
    text[n] = '\0';
    for (size_t i = 0; i < CONF_TLS_COUNT; i++) {
        snprintf(needle, sizeof(needle), "\n# %s:", conf_tls_cmds[i].name);
        if (strstr(text, needle) == NULL) {
            snprintf(needle, sizeof(needle), "\n%s:", conf_tls_cmds[i].name);
            cr_expect_not_null(strstr(text, needle), "missing key %s",
                               conf_tls_cmds[i].name);
        }
    }
}
