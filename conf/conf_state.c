/* The state-format section of proxy.yaml (conf_state.h). */
#include "conf/conf_state.h"

#include "conf/conf.h"
#include "conf/conf_keys.h"

const struct conf_command conf_state_cmds[CONF_STATE_NCMDS] = {
    CONF_CMD("limiter_read_old_keys", conf_set_bool, state.read_old_keys, 0, 1,
             "yes or no"),
};

int conf_state_defaults(struct conf *c)
{
    c->state.read_old_keys = 1;
    return CONF_OK;
}
