/* CLIENT TRACKING and the commands that name other clients by id (CLIENT
 * UNBLOCK, TRACKING ... REDIRECT, GETREDIR, TRACKINGINFO, CACHING): the
 * client ids cellgate gives and the ids Redis knows its connections by are
 * translated both ways here. Part of the CLIENT family (session.c). */
#ifndef PX_PROXY_TRACKING_H
#define PX_PROXY_TRACKING_H

struct req;

/* CLIENT UNBLOCK: see tracking.c. */
void tracking_client_unblock(struct req *req);

/* CLIENT TRACKING: see tracking.c. */
void tracking_client_tracking(struct req *req);

/* CLIENT GETREDIR: see tracking.c. */
void tracking_client_getredir(struct req *req);

/* CLIENT TRACKINGINFO: see tracking.c. */
void tracking_client_trackinginfo(struct req *req);

/* CLIENT CACHING: see tracking.c. */
void tracking_client_caching(struct req *req);

#endif /* PX_PROXY_TRACKING_H */
