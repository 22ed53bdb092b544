/* proxy.yaml's lease keys: how long a proxy keeps the units a lease took
 * for a hot identity (limits.yaml `lease: N`, proxy/limiter/limiter_lease.h)
 * before it gives back what is left. */
#ifndef PX_CONF_CONF_LEASE_H
#define PX_CONF_CONF_LEASE_H

/* limiter_lease_ms when the file does not set it. */
#define CONF_LEASE_MS_DEFAULT 100

struct conf_lease {
    unsigned ms; /* limiter_lease_ms: a lease's life, 1 .. 60000 */
};

#endif /* PX_CONF_CONF_LEASE_H */
