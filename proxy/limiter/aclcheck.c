/* aclcheck: ACL DRYRUN probes of a node's users (see aclcheck.h).
 *
 *   aclcheck_node --> one ACL DRYRUN per probe, on lane 0
 *                 <-- each reply: +OK (allowed), a bulk (the refusal's
 *                     reason) or an error (DRYRUN unusable here)
 *   last reply    --> the node's verdict is logged, its state freed
 *
 * A probe of the client user is a problem when Redis allows it; a probe of
 * the limiter user when Redis refuses it. */
#include "proxy/limiter/aclcheck.h"

#include <stdio.h>
#include <string.h>

#include "conf/conf.h"
#include "parser/resp.h"
#include "proxy/core/cluster.h"
#include "proxy/core/log.h"
#include "proxy/core/req.h"
#include "proxy/core/util.h"

/* Most words of a probed command, and its NULL. */
#define ACLCHECK_WORDS 8

/* One question: may `user` run `argv`? "$K" stands for an identity's
 * state string (the key the scripts write LIMITER's states to), "$L" for
 * a limit key (what a call declares; the sorted sets' keys). The limiter
 * user's probes are the commands its scripts and its refusal cache send
 * on a state: SET ... NX GET PXAT reads and creates it, DEL deletes it
 * (RESET, a string left empty), GET and PEXPIRETIME track it. */
struct aclcheck_probe {
    int limiter;      /* asks about the limiter's user (else the client's) */
    const char *what; /* what the command would let the user do */
    const char *argv[ACLCHECK_WORDS]; /* NULL-ended */
};

static const struct aclcheck_probe aclcheck_probes[] = {
    { 0, "write limiter keys", { "SET", "$K", "v", NULL } },
    { 0, "read limiter keys", { "GET", "$K", NULL } },
    { 0, "flush every key (FLUSHALL)", { "FLUSHALL", NULL } },
    { 0, "swap databases (SWAPDB)", { "SWAPDB", "0", "1", NULL } },
    { 0,
      "replace the limiter's functions (FUNCTION LOAD)",
      { "FUNCTION", "LOAD", "x", NULL } },
    { 1, "call the limiter's functions", { "FCALL", "f", "1", "$L", NULL } },
    { 1, "load the limiter's functions", { "FUNCTION", "LOAD", "x", NULL } },
    { 1,
      "write limiter keys",
      { "SET", "$K", "v", "NX", "GET", "PXAT", "1", NULL } },
    { 1, "delete limiter keys", { "DEL", "$K", NULL } },
    { 1, "read limiter keys", { "GET", "$K", NULL } },
    { 1, "read limiter keys' expiry", { "PEXPIRETIME", "$K", NULL } },
    { 1,
      "write CL.THROTTLE's keys, which are any key",
      { "SET", "cellgate-acl-check", "v", NULL } },
    { 1, "track limiter keys", { "CLIENT", "TRACKING", "on", NULL } },
    { 1, "read the clock", { "TIME", NULL } },
};

/* The checks of one node in flight. Owned by their requests: the last
 * reply frees it. */
struct aclcheck_run {
    char node[300];        /* "host:port", for the log */
    char client[128];      /* the client traffic's user */
    char limiter[128];     /* the limiter's user */
    unsigned owed;         /* replies still to come */
    unsigned problems;     /* problems found */
    char bad[2][512];      /* what the client user may do (0) and the
                              limiter's may not (1), ", "-separated */
    unsigned unusable : 1; /* an error reply: logged once */
};

/* One reply (or the sender) is done with `run`; the last logs the
 * verdict and frees it. */
static void aclcheck_release(struct aclcheck_run *run)
{
    if (--run->owed > 0) {
        return;
    }
    if (run->problems == 0 && !run->unusable) {
        log_info("node %s: Redis users checked: '%s' cannot touch limiter "
                 "state, '%s' can run the limiter",
                 run->node, run->client, run->limiter);
    } else if (run->problems > 0) {
        const char *const user[2] = { run->client, run->limiter };
        const char *const bad[2] = { run->bad[0], run->bad[1] };
        char line[1400];

        aclcheck_verdict(line, sizeof(line), run->node, user, bad);
        log_warn("%s", line);
    }
    px_free(run);
}

static void aclcheck_on_reply(struct req *req, const char *frame, size_t len)
{
    struct aclcheck_run *run = req->ctx;
    const struct aclcheck_probe *p = &aclcheck_probes[req->part];
    int allowed = len >= 3 && memcmp(frame, "+OK", 3) == 0;

    if (len > 0 && frame[0] == '-') {
        if (!run->unusable) {
            log_info("node %s: cannot check the Redis users with ACL DRYRUN "
                     "(%.*s)",
                     run->node, (int)(len > 122 ? 120 : len - 3), frame + 1);
        }
        run->unusable = 1;
    } else if (allowed != p->limiter) {
        /* Gathered into the node's one line (aclcheck_release). */
        char *bad = run->bad[p->limiter];
        size_t used = strlen(bad);
        snprintf(bad + used, sizeof(run->bad[0]) - used, "%s%s",
                 used > 0 ? ", " : "", p->what);
        run->problems++;
    }
    aclcheck_release(run);
}

void aclcheck_verdict(char *out, size_t cap, const char *node,
                      const char *const user[2], const char *const bad[2])
{
    int n = snprintf(out, cap, "node %s: ", node);
    size_t used = n > 0 && (size_t)n < cap ? (size_t)n : cap - 1;

    if (bad[0][0] != '\0') {
        n = snprintf(out + used, cap - used,
                     "Redis user '%s' may %s: limiter state is guarded by "
                     "cellgate alone (cellgate --print-acl prints the two "
                     "users)%s",
                     user[0], bad[0], bad[1][0] != '\0' ? "; " : "");
        used = n > 0 && (size_t)n < cap - used ? used + (size_t)n : cap - 1;
    }
    if (bad[1][0] != '\0') {
        snprintf(out + used, cap - used,
                 "Redis user '%s' may not %s: limiter calls will fail", user[1],
                 bad[1]);
    }
}

void aclcheck_node(struct cluster *cl, const struct conf *conf,
                   struct node *node)
{
    struct aclcheck_run *run = px_calloc(1, sizeof(*run));
    char key[512], lkey[512];
    size_t i, k, n;

    snprintf(run->node, sizeof(run->node), "%s", node->name);
    snprintf(run->client, sizeof(run->client), "%s",
             conf->upstream_user != NULL ? conf->upstream_user : "default");
    snprintf(run->limiter, sizeof(run->limiter), "%s",
             conf->limiter_password == NULL ? run->client
             : conf->limiter_user != NULL   ? conf->limiter_user
                                            : "default");
    snprintf(key, sizeof(key), "%s{cellgate-acl-check}", conf->key_prefix);
    snprintf(lkey, sizeof(lkey), "%s{cellgate-acl-check}#0:gcra",
             conf->key_prefix);
    run->owed = 1; /* held while sending: a reply may come at once */
    for (i = 0; i < ARRAY_SIZE(aclcheck_probes); i++) {
        const struct aclcheck_probe *p = &aclcheck_probes[i];
        const char *argv[3 + ACLCHECK_WORDS] = { "ACL", "DRYRUN" };
        size_t lens[3 + ACLCHECK_WORDS];
        struct req *req;

        if (p->limiter && conf->limiter_password == NULL) {
            continue; /* one user for both: the client probes say it */
        }
        argv[2] = p->limiter ? run->limiter : run->client;
        for (k = 0; p->argv[k] != NULL; k++) {
            argv[3 + k] = strcmp(p->argv[k], "$K") == 0   ? key
                          : strcmp(p->argv[k], "$L") == 0 ? lkey
                                                          : p->argv[k];
        }
        for (k += 3, n = 0; n < k; n++) {
            lens[n] = strlen(argv[n]);
        }
        /* (More words than req_own_argv takes.) */
        req = req_own(resp_cmd_new((int)k, argv, lens), aclcheck_on_reply, run);
        req->part = (unsigned)i;
        req->limiter = 1;
        run->owed++;
        cluster_send(cl, node, req);
    }
    aclcheck_release(run);
}
