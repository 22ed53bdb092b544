/* The core's context: see core.h. */
#include "proxy/core/core.h"

#include <netdb.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "conf/conf.h"
#include "proxy/core/log.h"

void core_init(struct core *k, uv_loop_t *loop, const struct conf *conf)
{
    k->loop = loop;
    k->conf = conf;
    queue_init(&k->upstreams);
    queue_init(&k->dirty_upstreams);
    k->shutting_down = 0;
    k->metrics = NULL;
    k->secrets = NULL;
}

int core_listen(uv_loop_t *loop, uv_tcp_t *tcp, const struct conf_addr *a,
                int backlog, uv_connection_cb cb, const char *what)
{
    struct addrinfo hints, *res = NULL;
    char port[16];
    int rc;

    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    snprintf(port, sizeof(port), "%d", a->port);
    rc = getaddrinfo(a->host, port, &hints, &res);
    if (rc != 0 || res == NULL) {
        log_error("%s %s:%d: cannot resolve: %s", what, a->host, a->port,
                  gai_strerror(rc));
        return CORE_LISTEN_UNRESOLVED;
    }
    uv_tcp_init(loop, tcp);
    rc = uv_tcp_bind(tcp, res->ai_addr, 0);
    freeaddrinfo(res);
    if (rc == 0) {
        rc = uv_listen((uv_stream_t *)tcp, backlog, cb);
    }
    if (rc < 0) {
        log_error("%s %s:%d: %s", what, a->host, a->port, uv_strerror(rc));
        return CORE_LISTEN_FAILED;
    }
    return CORE_LISTEN_OK;
}
