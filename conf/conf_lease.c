/* The lease section of proxy.yaml (conf_lease.h). */
#include "conf/conf_lease.h"

#include "conf/conf.h"
#include "conf/conf_keys.h"

const struct conf_command conf_lease_cmds[CONF_LEASE_NCMDS] = {
    CONF_CMD("limiter_lease_ms", conf_set_uint, lease.ms, 1, 60000,
             "an integer from 1 to 60000"),
};

int conf_lease_defaults(struct conf *c)
{
    c->lease.ms = CONF_LEASE_MS_DEFAULT;
    return CONF_OK;
}
