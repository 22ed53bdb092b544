/* The core's context: see core.h. */
#include "proxy/core/core.h"

void core_init(struct core *k, uv_loop_t *loop, const struct conf *conf)
{
    k->loop = loop;
    k->conf = conf;
    queue_init(&k->upstreams);
    queue_init(&k->dirty_upstreams);
    k->shutting_down = 0;
    k->metrics = NULL;
}
