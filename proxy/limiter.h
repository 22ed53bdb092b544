/* Handlers of the limiter commands (CL.THROTTLE, LIMITER). See limiter.c
 * for the flow of one call. */
#ifndef PX_PROXY_LIMITER_H
#define PX_PROXY_LIMITER_H

struct req;

/* CL.THROTTLE <key> <max_burst> <count> <period> [<quantity>]. */
void limiter_throttle(struct req *req);

/* LIMITER <key> <max_burst> <count> <period> [<quantity>], and the
 * subcommands of the limits tree. */
void limiter_command(struct req *req);

#endif /* PX_PROXY_LIMITER_H */
