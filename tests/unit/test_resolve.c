/* Which hosts are resolved off the loop: a literal address is converted at
 * once, a name is looked up. */
#include "tests/support/px_test.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include "proxy/core/resolve.h"

PX_TEST_SUITE(resolve);

Test(resolve, literal_addresses_need_no_lookup)
{
    struct resolve r = { 0 };
    const struct sockaddr_in *v4 = (const void *)&r.addr[0];
    const struct sockaddr_in6 *v6 = (const void *)&r.addr[0];

    cr_assert_eq(resolve_literal(&r, "127.0.0.1", 6379), 1);
    cr_assert_eq(r.naddr, 1);
    cr_assert_eq(v4->sin_family, AF_INET);
    cr_assert_eq(ntohs(v4->sin_port), 6379);
    cr_assert_eq(ntohl(v4->sin_addr.s_addr), 0x7f000001u);
    cr_assert_eq(resolve_literal(&r, "::1", 7000), 1);
    cr_assert_eq(v6->sin6_family, AF_INET6);
    cr_assert_eq(ntohs(v6->sin6_port), 7000);
}

Test(resolve, names_are_looked_up)
{
    struct resolve r = { 0 };

    cr_assert_eq(resolve_literal(&r, "localhost", 6379), 0);
    cr_assert_eq(resolve_literal(&r, "redis-0.cache.internal", 6379), 0);
    cr_assert_eq(resolve_literal(&r, "10.0.0", 6379), 0);
}

/* The lookup's end, seen by its callback. */
static int resolve_status = 1;

static void on_done(struct resolve *r, int status)
{
    (void)r;
    resolve_status = status;
}

/* A name is looked up on the thread pool and its callback runs on the
 * loop; one that does not resolve says so there too. */
Test(resolve, a_lookup_ends_on_the_loop)
{
    uv_loop_t loop;
    struct resolve r = { 0 };
    const struct sockaddr_in *v4 = (const void *)&r.addr[0];

    cr_assert_eq(uv_loop_init(&loop), 0);
    cr_assert_eq(resolve_start(&r, &loop, "localhost", 6380, on_done), 0);
    cr_assert(r.busy);
    uv_run(&loop, UV_RUN_DEFAULT);
    cr_assert_eq(resolve_status, 0, "%s", uv_strerror(resolve_status));
    cr_assert(!r.busy);
    cr_assert_geq(r.naddr, 1);
    cr_assert(v4->sin_family == AF_INET || v4->sin_family == AF_INET6);
    cr_assert_eq(ntohs(v4->sin_port), 6380);

    resolve_status = 1;
    cr_assert_eq(resolve_start(&r, &loop, "no-such-host.invalid", 1, on_done),
                 0);
    uv_run(&loop, UV_RUN_DEFAULT);
    cr_assert_lt(resolve_status, 0);
    cr_assert_eq(r.naddr, 0);

    /* A literal address needs no loop turn. */
    resolve_status = 1;
    cr_assert_eq(resolve_start(&r, &loop, "10.1.2.3", 6379, on_done), 1);
    cr_assert_eq(resolve_status, 1);
    cr_assert_eq(uv_loop_close(&loop), 0);
}
