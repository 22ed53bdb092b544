/* Sentinel mode's pure parts: the replies it reads from the sentinels and
 * the candidate master (proxy/core/sentinel.c), and its proxy.yaml keys
 * (conf/conf_sentinel.c). */
#include "tests/support/px_test.h"

#include <stdio.h>
#include <string.h>

#include "conf/conf.h"
#include "proxy/core/sentinel.h"

PX_TEST_SUITE(sentinel);

static enum sentinel_parse addr(const char *frame, char *host, int *port)
{
    return sentinel_parse_addr(frame, strlen(frame), host, 64, port);
}

Test(sentinel, get_master_addr_gives_host_and_port)
{
    char host[64];
    int port = 0;

    cr_assert_eq(addr("*2\r\n$9\r\n127.0.0.1\r\n$4\r\n6380\r\n", host, &port),
                 SENTINEL_PARSE_OK);
    cr_assert_str_eq(host, "127.0.0.1");
    cr_assert_eq(port, 6380);
    cr_assert_eq(addr("*2\r\n$7\r\nredis-a\r\n$5\r\n65535\r\n", host, &port),
                 SENTINEL_PARSE_OK);
    cr_assert_str_eq(host, "redis-a");
    cr_assert_eq(port, 65535);
    cr_assert_eq(addr("*2\r\n$3\r\n::1\r\n$4\r\n6379\r\n", host, &port),
                 SENTINEL_PARSE_OK);
    cr_assert_str_eq(host, "::1");
}

Test(sentinel, get_master_addr_unknown_name_and_garbage)
{
    char host[64];
    int port;

    cr_assert_eq(addr("*-1\r\n", host, &port), SENTINEL_PARSE_UNKNOWN);
    cr_assert_eq(addr("_\r\n", host, &port), SENTINEL_PARSE_UNKNOWN);
    cr_assert_eq(addr("-NOAUTH Authentication required.\r\n", host, &port),
                 SENTINEL_PARSE_BAD);
    cr_assert_eq(addr("*1\r\n$9\r\n127.0.0.1\r\n", host, &port),
                 SENTINEL_PARSE_BAD);
    cr_assert_eq(addr("*2\r\n$9\r\n127.0.0.1\r\n$5\r\n70000\r\n", host, &port),
                 SENTINEL_PARSE_BAD);
    cr_assert_eq(addr("*2\r\n$9\r\n127.0.0.1\r\n$1\r\n0\r\n", host, &port),
                 SENTINEL_PARSE_BAD);
    cr_assert_eq(addr("*2\r\n$9\r\n127.0.0.1\r\n$3\r\n6x9\r\n", host, &port),
                 SENTINEL_PARSE_BAD);
    cr_assert_eq(addr("*2\r\n$0\r\n\r\n$4\r\n6379\r\n", host, &port),
                 SENTINEL_PARSE_BAD);
    cr_assert_eq(addr("*2\r\n$9\r\n127.0.0.1\r\n", host, &port),
                 SENTINEL_PARSE_BAD); /* incomplete */
}

Test(sentinel, get_master_addr_host_that_does_not_fit_is_refused)
{
    char host[8];
    int port;
    const char *f = "*2\r\n$9\r\n127.0.0.1\r\n$4\r\n6379\r\n";

    cr_assert_eq(sentinel_parse_addr(f, strlen(f), host, sizeof(host), &port),
                 SENTINEL_PARSE_BAD);
}

/* A +switch-master message as a RESP2 subscription delivers it. */
static const char *switch_msg(const char *payload, char *buf, size_t cap)
{
    snprintf(buf, cap,
             "*3\r\n$7\r\nmessage\r\n$14\r\n+switch-master\r\n$%zu\r\n%s\r\n",
             strlen(payload), payload);
    return buf;
}

Test(sentinel, switch_master_for_our_name_only)
{
    char buf[256], host[64];
    int port = 0;
    const char *f;

    f = switch_msg("mymaster 127.0.0.1 6379 127.0.0.1 6380", buf, sizeof(buf));
    cr_assert_eq(sentinel_parse_switch(f, strlen(f), "mymaster", host,
                                       sizeof(host), &port),
                 SENTINEL_PARSE_OK);
    cr_assert_str_eq(host, "127.0.0.1");
    cr_assert_eq(port, 6380);
    /* Another master's switch, or a name that only starts alike. */
    cr_assert_eq(
        sentinel_parse_switch(f, strlen(f), "other", host, sizeof(host), &port),
        SENTINEL_PARSE_BAD);
    cr_assert_eq(sentinel_parse_switch(f, strlen(f), "mymast", host,
                                       sizeof(host), &port),
                 SENTINEL_PARSE_BAD);
    f = switch_msg("mymaster 127.0.0.1 6379 127.0.0.1", buf, sizeof(buf));
    cr_assert_eq(sentinel_parse_switch(f, strlen(f), "mymaster", host,
                                       sizeof(host), &port),
                 SENTINEL_PARSE_BAD);
    f = switch_msg("mymaster 127.0.0.1 6379 127.0.0.1 6380 x", buf,
                   sizeof(buf));
    cr_assert_eq(sentinel_parse_switch(f, strlen(f), "mymaster", host,
                                       sizeof(host), &port),
                 SENTINEL_PARSE_BAD);
    /* The subscription's own confirmation is no switch. */
    f = "*3\r\n$9\r\nsubscribe\r\n$14\r\n+switch-master\r\n:1\r\n";
    cr_assert_eq(sentinel_parse_switch(f, strlen(f), "mymaster", host,
                                       sizeof(host), &port),
                 SENTINEL_PARSE_BAD);
}

Test(sentinel, role_master_only)
{
    const char *m = "*3\r\n$6\r\nmaster\r\n:0\r\n*0\r\n";
    const char *r = "*5\r\n$5\r\nslave\r\n$9\r\n127.0.0.1\r\n:6379\r\n"
                    "$9\r\nconnected\r\n:14\r\n";
    const char *e = "-ERR upstream 127.0.0.1:1 unavailable: x\r\n";

    cr_assert_eq(sentinel_parse_role_master(m, strlen(m)), 1);
    cr_assert_eq(sentinel_parse_role_master(r, strlen(r)), 0);
    cr_assert_eq(sentinel_parse_role_master(e, strlen(e)), 0);
}

/* An ask's answer naming the master just left is a sentinel that has not
 * seen the switch: not followed for a while, then followed again. */
Test(sentinel, stale_answers_after_a_switch)
{
    cr_assert_eq(sentinel_stale("", 0, 5, "a:1"), 0); /* no switch yet */
    cr_assert_eq(sentinel_stale("a:1", 1000, 1500, "a:1"), 1);
    cr_assert_eq(sentinel_stale("a:1", 1000, 10999, "a:1"), 1);
    cr_assert_eq(sentinel_stale("a:1", 1000, 11000, "a:1"), 0);
    cr_assert_eq(sentinel_stale("a:1", 1000, 1500, "b:1"), 0);
    cr_assert_eq(sentinel_stale("a:1", 1000, 1500, "a:10"), 0);
}

/* ---- proxy.yaml ---- */

static int load(struct conf *c, const char *yaml, char *err, size_t cap)
{
    cr_assert_eq(conf_init(c), CONF_OK);
    return conf_load_string(c, "proxy.yaml", yaml, err, cap);
}

Test(sentinel, keys_load)
{
    struct conf c;
    char err[1024];

    cr_assert_eq(load(&c,
                      "sentinel: [10.0.0.1:26379, \"s2:26380\"]\n"
                      "sentinel_master: mymaster\nsentinel_user: u\n"
                      "sentinel_password: p\nsentinel_tls: no\n",
                      err, sizeof(err)),
                 CONF_OK, "%s", err);
    cr_assert_eq(c.sentinel.naddrs, 2);
    cr_assert_str_eq(c.sentinel.addrs[1].host, "s2");
    cr_assert_eq(c.sentinel.addrs[1].port, 26380);
    cr_assert_str_eq(c.sentinel.master, "mymaster");
    cr_assert_str_eq(c.sentinel.user, "u");
    cr_assert_str_eq(c.sentinel.password, "p");
    cr_assert_eq(c.sentinel.tls, 0);
    cr_assert_null(conf_sentinel_invalid(&c));
    conf_free(&c);
    cr_assert_eq(load(&c,
                      "sentinel: 10.0.0.1:26379,10.0.0.2:26379\n"
                      "sentinel_master: m\n",
                      err, sizeof(err)),
                 CONF_OK, "%s", err);
    cr_assert_eq(c.sentinel.naddrs, 2);
    cr_assert_eq(c.sentinel.tls, CONF_SENTINEL_TLS_AS_UPSTREAM);
    conf_free(&c);
}

static void expect_error(const char *yaml, const char *want)
{
    struct conf c;
    char err[1024];

    cr_assert_eq(load(&c, yaml, err, sizeof(err)), CONF_ERR, "accepted %s",
                 yaml);
    cr_assert_str_eq(err, want);
    conf_free(&c);
}

Test(sentinel, rules_between_keys)
{
    expect_error("sentinel: [a:1]\n",
                 "proxy.yaml:1:1: sentinel needs sentinel_master (the name "
                 "the sentinels monitor the master by)");
    expect_error("upstream: a:1\nsentinel: [a:2]\nsentinel_master: m\n",
                 "proxy.yaml:2:1: sentinel and upstream are mutually "
                 "exclusive");
    expect_error("sentinel: [a:2]\nsentinel_master: m\ncluster: [a:1]\n",
                 "proxy.yaml:3:1: sentinel and cluster are mutually "
                 "exclusive");
    expect_error("sentinel_master: m\n",
                 "proxy.yaml:1:1: sentinel_master needs sentinel");
    expect_error(
        "sentinel: [a:2]\nsentinel_master: m\nsentinel_user: u\n",
        "proxy.yaml:3:1: sentinel_user needs sentinel_password or sentinel_password_file");
    expect_error("sentinel: [a:2]\nsentinel_master: \"\"\n",
                 "proxy.yaml:2:18: sentinel_master: expected a non-empty "
                 "string (the name the sentinels monitor), got \"\"\n"
                 "proxy.yaml:1:1: sentinel needs sentinel_master (the name "
                 "the sentinels monitor the master by)");
}

/* sentinel_tls follows upstream_tls unless set; without sentinels, no TLS
 * to them. */
Test(sentinel, sentinel_tls_defaults_to_upstream_tls)
{
    static const struct {
        const char *yaml;
        int want;
    } cases[] = {
        { "sentinel: [a:2]\nsentinel_master: m\n", 0 },
        { "sentinel: [a:2]\nsentinel_master: m\nupstream_tls: yes\n", 1 },
        { "sentinel: [a:2]\nsentinel_master: m\nupstream_tls: yes\n"
          "sentinel_tls: no\n",
          0 },
        { "sentinel: [a:2]\nsentinel_master: m\nsentinel_tls: yes\n", 1 },
        { "upstream: a:1\nupstream_tls: yes\n", 0 },
    };
    size_t i;

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct conf c;
        char err[512] = "";

        cr_assert_eq(conf_init(&c), CONF_OK);
        cr_assert_eq(
            conf_load_string(&c, "proxy.yaml", cases[i].yaml, err, sizeof(err)),
            CONF_OK, "%s: %s", cases[i].yaml, err);
        cr_assert_eq(conf_sentinel_tls(&c), cases[i].want, "%s", cases[i].yaml);
        conf_free(&c);
    }
}
