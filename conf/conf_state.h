/* proxy.yaml's keys of LIMITER's state format: the levels of an identity
 * live in one hash (algorithms/lua/hstate.lua); for one release a state
 * missing there is looked up at its old per-level key, so an upgrade
 * never forgets a limit. */
#ifndef PX_CONF_CONF_STATE_H
#define PX_CONF_CONF_STATE_H

struct conf_state {
    int read_old_keys; /* limiter_read_old_keys: yes (1, default) looks a
                          missing state up at its old key; no (0) for an
                          install that never had them, or upgraded longer
                          ago than its longest window */
};

#endif /* PX_CONF_CONF_STATE_H */
