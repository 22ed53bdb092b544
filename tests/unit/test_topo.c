/* The endpoint of a CLUSTER SLOTS node entry: what names a node, so one
 * server is one node however it is announced (Redis 7's hostname
 * endpoints, "?" with the address in the metadata, the unknown endpoint). */
#include "tests/support/px_test.h"

#include <stdio.h>
#include <string.h>

#include "parser/resp.h"
#include "parser/resp_value.h"
#include "proxy/core/topo.h"

PX_TEST_SUITE(topo);

/* The endpoint of the first master of a CLUSTER SLOTS reply `wire`, as
 * "host:port" in out, or the result when not OK. */
static enum topo_endpoint endpoint(const char *wire, const char *asked,
                                   char *out, size_t cap)
{
    struct resp_value v;
    size_t used;
    const char *host = NULL;
    size_t hlen = 0;
    int port = 0;
    enum topo_endpoint rc;

    cr_assert_eq(resp_value_parse(wire, strlen(wire), &v, &used), RESP_OK, "%s",
                 wire);
    cr_assert_eq(v.type, '*');
    cr_assert_geq(v.n, 1u);
    cr_assert_geq(v.elem[0].n, 3u);
    rc = topo_endpoint(&v.elem[0].elem[2], asked, &host, &hlen, &port);
    if (rc == TOPO_ENDPOINT_OK) {
        snprintf(out, cap, "%.*s:%d", (int)hlen, host, port);
    }
    resp_value_free(&v);
    return rc;
}

/* Redis 7.0 with the default endpoint type: the address first, the host
 * name (when announced) in the metadata; the node is its address. */
Test(topo, an_ip_endpoint_names_the_node_by_its_address)
{
    char ep[128];

    cr_assert_eq(endpoint("*1\r\n*3\r\n:0\r\n:5460\r\n"
                          "*4\r\n$9\r\n127.0.0.1\r\n:7000\r\n$4\r\nid01\r\n"
                          "*2\r\n$8\r\nhostname\r\n$9\r\nlocalhost\r\n",
                          "seed.example", ep, sizeof(ep)),
                 TOPO_ENDPOINT_OK);
    cr_assert_str_eq(ep, "127.0.0.1:7000");
    /* Redis 6: three fields, no metadata. */
    cr_assert_eq(endpoint("*1\r\n*3\r\n:0\r\n:5460\r\n"
                          "*3\r\n$8\r\n10.0.0.7\r\n:6379\r\n$4\r\nid01\r\n",
                          "seed.example", ep, sizeof(ep)),
                 TOPO_ENDPOINT_OK);
    cr_assert_str_eq(ep, "10.0.0.7:6379");
}

/* cluster-preferred-endpoint-type hostname: the host name first, the
 * address in the metadata; the node is named by its host name. */
Test(topo, a_hostname_endpoint_names_the_node_by_its_name)
{
    char ep[128];

    cr_assert_eq(endpoint("*1\r\n*3\r\n:0\r\n:5460\r\n"
                          "*4\r\n$14\r\nredis-0.svc.io\r\n:6379\r\n$4\r\nid01"
                          "\r\n*2\r\n$2\r\nip\r\n$8\r\n10.0.0.7\r\n",
                          "seed.example", ep, sizeof(ep)),
                 TOPO_ENDPOINT_OK);
    cr_assert_str_eq(ep, "redis-0.svc.io:6379");
}

/* "?": the node announces no host name; its address in the metadata
 * reaches it, and without one its slots wait for a later map. */
Test(topo, a_question_mark_falls_back_to_the_metadata_ip)
{
    char ep[128];

    cr_assert_eq(endpoint("*1\r\n*3\r\n:0\r\n:5460\r\n"
                          "*4\r\n$1\r\n?\r\n:7001\r\n$4\r\nid01\r\n"
                          "*2\r\n$2\r\nip\r\n$8\r\n10.0.0.8\r\n",
                          "seed.example", ep, sizeof(ep)),
                 TOPO_ENDPOINT_OK);
    cr_assert_str_eq(ep, "10.0.0.8:7001");
    cr_assert_eq(endpoint("*1\r\n*3\r\n:0\r\n:5460\r\n"
                          "*4\r\n$1\r\n?\r\n:7001\r\n$4\r\nid01\r\n*0\r\n",
                          "seed.example", ep, sizeof(ep)),
                 TOPO_ENDPOINT_UNKNOWN);
    cr_assert_eq(endpoint("*1\r\n*3\r\n:0\r\n:5460\r\n"
                          "*3\r\n$1\r\n?\r\n:7001\r\n$4\r\nid01\r\n",
                          "seed.example", ep, sizeof(ep)),
                 TOPO_ENDPOINT_UNKNOWN);
}

/* The unknown-endpoint type (a NULL endpoint) or an empty one: the node
 * is reached where the map was asked. */
Test(topo, a_null_endpoint_is_where_the_map_was_asked)
{
    char ep[128];

    cr_assert_eq(endpoint("*1\r\n*3\r\n:0\r\n:5460\r\n"
                          "*3\r\n$-1\r\n:7002\r\n$4\r\nid01\r\n",
                          "redis.example", ep, sizeof(ep)),
                 TOPO_ENDPOINT_OK);
    cr_assert_str_eq(ep, "redis.example:7002");
    cr_assert_eq(endpoint("*1\r\n*3\r\n:0\r\n:5460\r\n"
                          "*3\r\n$0\r\n\r\n:7002\r\n$4\r\nid01\r\n",
                          "redis.example", ep, sizeof(ep)),
                 TOPO_ENDPOINT_OK);
    cr_assert_str_eq(ep, "redis.example:7002");
}

Test(topo, malformed_node_entries_are_refused)
{
    static const char *const bad[] = {
        "*1\r\n*3\r\n:0\r\n:5460\r\n:5\r\n",            /* no array */
        "*1\r\n*3\r\n:0\r\n:5460\r\n*1\r\n$1\r\nh\r\n", /* no port */
        "*1\r\n*3\r\n:0\r\n:5460\r\n*2\r\n$1\r\nh\r\n$2\r\n12\r\n", /* text */
        "*1\r\n*3\r\n:0\r\n:5460\r\n*2\r\n$1\r\nh\r\n:0\r\n",       /* port 0 */
        "*1\r\n*3\r\n:0\r\n:5460\r\n*2\r\n$1\r\nh\r\n:65536\r\n",
    };
    char ep[128];

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        cr_assert_eq(endpoint(bad[i], "a", ep, sizeof(ep)), TOPO_ENDPOINT_BAD,
                     "case %zu", i);
    }
}
