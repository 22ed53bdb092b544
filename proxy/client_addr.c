/* client_addr.c: a client connection's addresses as text (client_addr.h).
 * uv_tcp_getpeername and uv_tcp_getsockname are asked each time rather
 * than the text kept per client: only CLIENT LIST/INFO/KILL and rare log
 * lines need it. */
#include "proxy/client_addr.h"

#include <stdio.h>
#include <string.h>
#include <uv.h>

#include "proxy/client.h"

/* "ip:port" of a socket address, as Redis prints it ("[v6]:port"). */
static void client_addr_format(const struct sockaddr_storage *sa, char *out,
                               size_t outlen)
{
    char ip[INET6_ADDRSTRLEN] = "?";

    if (sa->ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const void *)sa;
        uv_ip6_name(a, ip, sizeof(ip));
        snprintf(out, outlen, "[%s]:%u", ip, (unsigned)ntohs(a->sin6_port));
    } else if (sa->ss_family == AF_INET) {
        const struct sockaddr_in *a = (const void *)sa;
        uv_ip4_name(a, ip, sizeof(ip));
        snprintf(out, outlen, "%s:%u", ip, (unsigned)ntohs(a->sin_port));
    } else {
        snprintf(out, outlen, "?:0");
    }
}

void client_addr(const struct client *c, int local, char *out, size_t outlen)
{
    struct sockaddr_storage sa;
    int len = sizeof(sa);

    memset(&sa, 0, sizeof(sa));
    if (local) {
        uv_tcp_getsockname(&c->tcp, (struct sockaddr *)&sa, &len);
    } else {
        uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&sa, &len);
    }
    client_addr_format(&sa, out, outlen);
}
