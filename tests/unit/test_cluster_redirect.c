/* Parsing Redis Cluster's redirections: -MOVED and -ASK as nodes send
 * them, host names, Redis 7's unknown endpoints and IPv6 included, and
 * every malformed one refused. */
#include "tests/support/px_test.h"

#include <string.h>

#include "proxy/core/topo.h"

PX_TEST_SUITE(cluster_redirect);

/* Parses `text` (an error's text after '-', without CRLF). */
static int parse(const char *text, unsigned *slot, char *host, int *port)
{
    const char *h;
    size_t hlen;
    int rc = topo_parse_redirect(text, strlen(text), slot, &h, &hlen, port);

    if (rc == 0) {
        memcpy(host, h, hlen);
        host[hlen] = '\0';
    }
    return rc;
}

Test(cluster_redirect, moved_and_ask_give_slot_host_and_port)
{
    unsigned slot;
    char host[64];
    int port;

    cr_assert_eq(parse("MOVED 3999 127.0.0.1:6381", &slot, host, &port), 0);
    cr_assert_eq(slot, 3999u);
    cr_assert_str_eq(host, "127.0.0.1");
    cr_assert_eq(port, 6381);
    cr_assert_eq(parse("ASK 0 10.1.2.3:7000", &slot, host, &port), 0);
    cr_assert_eq(slot, 0u);
    cr_assert_str_eq(host, "10.1.2.3");
    cr_assert_eq(port, 7000);
    cr_assert_eq(parse("MOVED 16383 redis-2.local:6379", &slot, host, &port),
                 0);
    cr_assert_eq(slot, 16383u);
    cr_assert_str_eq(host, "redis-2.local");
}

Test(cluster_redirect, the_port_follows_the_last_colon_of_an_ipv6_address)
{
    unsigned slot;
    char host[64];
    int port;

    cr_assert_eq(parse("MOVED 12 ::1:7001", &slot, host, &port), 0);
    cr_assert_str_eq(host, "::1");
    cr_assert_eq(port, 7001);
    cr_assert_eq(parse("ASK 5 fe80::1:2:6379", &slot, host, &port), 0);
    cr_assert_str_eq(host, "fe80::1:2");
    cr_assert_eq(port, 6379);
}

Test(cluster_redirect, malformed_redirections_are_refused)
{
    static const char *const bad[] = {
        "MOVED",           /* nothing after the word */
        "MOVED 16384 h:1", /* slot out of range */
        "MOVED 99999999999 h:1",
        "MOVED 12",         /* no address */
        "MOVED 12x h:1",    /* slot not a number */
        "MOVED 12 h",       /* no port */
        "MOVED 12 h:",      /* no port */
        "MOVED 12 h:0",     /* port 0 */
        "MOVED 12 h:12x",   /* port not a number */
        "MOVED  h:1",       /* no slot */
        "MOVED 12 h:70000", /* port out of range */
    };
    unsigned slot;
    char host[64];
    int port;

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        cr_assert_eq(parse(bad[i], &slot, host, &port), -1, "%s", bad[i]);
    }
}

Test(cluster_redirect, host_names_and_unknown_endpoints_parse)
{
    unsigned slot;
    char host[64];
    int port;

    cr_assert_eq(
        parse("MOVED 7 redis-node-2.cache.internal:6380", &slot, host, &port),
        0);
    cr_assert_str_eq(host, "redis-node-2.cache.internal");
    cr_assert_eq(port, 6380);
    /* Redis 7: "?" is a node that announces no host name, "" one whose
     * endpoint is where the client asked. */
    cr_assert_eq(parse("ASK 8 ?:7001", &slot, host, &port), 0);
    cr_assert_str_eq(host, "?");
    cr_assert_eq(port, 7001);
    cr_assert_eq(parse("MOVED 9 :7002", &slot, host, &port), 0);
    cr_assert_str_eq(host, "");
    cr_assert_eq(port, 7002);
}

/* Where a parsed host sends the request: as given, the redirecting
 * connection's host for "", nowhere yet for "?". */
Test(cluster_redirect, empty_host_is_the_connections_and_unknown_refreshes)
{
    const char *h = "localhost";
    size_t hlen = 9;

    cr_assert_eq(topo_redirect_host(&h, &hlen, "10.0.0.1"), 0);
    cr_assert_eq(hlen, 9);
    cr_assert_eq(memcmp(h, "localhost", 9), 0);
    h = "";
    hlen = 0;
    cr_assert_eq(topo_redirect_host(&h, &hlen, "redis-0.svc"), 0);
    cr_assert_eq(hlen, 11);
    cr_assert_eq(memcmp(h, "redis-0.svc", 11), 0);
    h = "?";
    hlen = 1;
    cr_assert_eq(topo_redirect_host(&h, &hlen, "redis-0.svc"), -1);
    h = "";
    hlen = 0;
    cr_assert_eq(topo_redirect_host(&h, &hlen, ""), -1);
}
