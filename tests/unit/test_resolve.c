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
