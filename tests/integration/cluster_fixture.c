/* Integration test fixture: a local Redis Cluster (see cluster_fixture.h).
 *
 * Readiness is judged from the nodes themselves, polled every
 * POLL_STEP_MS: each running node's CLUSTER INFO (state), CLUSTER NODES
 * (its view: slot owners, roles, failure flags) and CLUSTER SLOTS (what a
 * cluster client reads: it must say the same, replicas included), and each
 * running replica's INFO replication (link up, right master). Views are
 * compared node by node; the agreed view becomes the fixture's map. Between
 * polls nothing is cached, so a killed or restarted node is seen at the
 * next poll.
 *
 *   start: free ports -> redis-server x N (px_redis_start) ->
 *          redis-cli --cluster create -> poll until ready -> register
 *   fini:  kill every registered cluster -> px_env_fini
 */
#include "tests/integration/cluster_fixture.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "parser/slot.h"

#define POLL_STEP_MS     50   /* between two readiness polls */
#define PROBE_TIMEOUT_MS 1000 /* connect/read bound of one poll request */
#define MIGRATE_BATCH    100  /* keys per MIGRATE, as redis-cli reshard */
#define MIGRATE_TIMEOUT  5000 /* ms, MIGRATE's own I/O timeout argument */
#define MAX_CLUSTERS     4    /* clusters one test may run at once */
#define WHY_LEN          256  /* reason a poll found the cluster not ready */
#define ARRAY_LEN(a)     (sizeof(a) / sizeof(*(a)))
#define STR(x)           #x
#define XSTR(x)          STR(x)

static struct px_cluster cluster;                /* px_cluster() */
static struct px_cluster *running[MAX_CLUSTERS]; /* stopped by the fini */
static px_cluster_args_fn *node_args;            /* px_cluster_set_node_args */

/* One node's view of the cluster, parsed from its CLUSTER NODES. */
struct view {
    int self;                          /* index of the node that answered */
    int known;                         /* entries in its table */
    int failing[PX_CLUSTER_MAX_NODES]; /* flagged fail, fail?, handshake */
    int master[PX_CLUSTER_MAX_NODES];  /* -1 master, else its master */
    char id[PX_CLUSTER_MAX_NODES][PX_CLUSTER_ID_LEN + 1]; /* node ids */
    short owner[PX_CLUSTER_SLOTS]; /* node index per slot, -1: none */
};

/* ---------------- Small helpers ---------------- */

/* Formats a reason into why (WHY_LEN bytes). Returns 0, for "not ready". */
static int not_ready(char *why, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static int not_ready(char *why, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, WHY_LEN, fmt, ap);
    va_end(ap);
    return 0;
}

/* A connection with a short timeout, or NULL when the node does not
 * answer (a poll treats that as "not ready", not as a failure). */
static redisContext *probe_connect(int port)
{
    struct timeval tv = {
        .tv_sec = PROBE_TIMEOUT_MS / 1000,
        .tv_usec = (PROBE_TIMEOUT_MS % 1000) * 1000,
    };
    redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
    if (c == NULL) {
        return NULL;
    }
    if (c->err != 0 || redisSetTimeout(c, tv) != REDIS_OK) {
        redisFree(c);
        return NULL;
    }
    return c;
}

/* The text of a bulk or status reply to cmd, owned by the caller, or NULL
 * on any error. */
static char *probe_text(redisContext *c, const char *cmd)
{
    redisReply *r = redisCommand(c, cmd);
    char *text = NULL;
    if (r == NULL) {
        return NULL;
    }
    if (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS) {
        text = malloc(r->len + 1);
        cr_assert_not_null(text);
        memcpy(text, r->str, r->len);
        text[r->len] = '\0';
    }
    freeReplyObject(r);
    return text;
}

/* True when an INFO-style text holds the line "field:value". */
static int has_field(const char *text, const char *field, const char *value)
{
    char line[128];
    snprintf(line, sizeof(line), "%s:%s\r\n", field, value);
    return strstr(text, line) != NULL;
}

/* Asserts a status reply "OK", naming the node and command on failure. */
static void check_ok(const struct px_cluster *cl, int node, redisReply *r,
                     const char *what)
{
    int ok = r->type == REDIS_REPLY_STATUS && strcmp(r->str, "OK") == 0;
    char text[256];
    snprintf(text, sizeof(text), "%.*s",
             r->str != NULL ? (int)(r->len > 200 ? 200 : r->len) : 0,
             r->str != NULL ? r->str : "");
    freeReplyObject(r);
    cr_assert(ok, "%s on node %d (port %d): %s", what, node,
              px_cluster_port(cl, node), text);
}

/* Asserts 0 <= node < nnodes. */
static void check_index(const struct px_cluster *cl, int node)
{
    cr_assert(node >= 0 && node < cl->nnodes, "no node %d (cluster of %d)",
              node, cl->nnodes);
}

/* ---------------- Views ---------------- */

/* Parses "a-b" or "a" into a slot range. Returns 0, or -1 for anything
 * else ("[slot->-id]" migration markers, garbage). */
static int parse_range(const char *tok, long *lo, long *hi)
{
    char *end;
    if (tok[0] < '0' || tok[0] > '9') {
        return -1;
    }
    *lo = strtol(tok, &end, 10);
    *hi = *lo;
    if (*end == '-') {
        *hi = strtol(end + 1, &end, 10);
    }
    if (*end != '\0' || *lo < 0 || *hi < *lo || *hi >= PX_CLUSTER_SLOTS) {
        return -1;
    }
    return 0;
}

/* Port of a CLUSTER NODES address "ip:port@cport[,hostname]", or -1. */
static int parse_addr_port(const char *addr)
{
    const char *at = strchr(addr, '@');
    const char *colon = NULL;
    for (const char *p = addr; p < at && at != NULL; p++) {
        if (*p == ':') {
            colon = p;
        }
    }
    if (colon == NULL) {
        return -1;
    }
    return (int)strtol(colon + 1, NULL, 10);
}

/* True when the comma-separated flags hold `flag` exactly. */
static int has_flag(const char *flags, const char *flag)
{
    size_t n = strlen(flag);
    for (const char *p = flags; p != NULL && *p != '\0';) {
        const char *comma = strchr(p, ',');
        size_t len = comma != NULL ? (size_t)(comma - p) : strlen(p);
        if (len == n && memcmp(p, flag, n) == 0) {
            return 1;
        }
        p = comma != NULL ? comma + 1 : NULL;
    }
    return 0;
}

/* Index of the view's node with `id`, or -1. */
static int view_find_id(const struct px_cluster *cl, const struct view *v,
                        const char *id)
{
    for (int i = 0; i < cl->nnodes; i++) {
        if (strcmp(v->id[i], id) == 0) {
            return i;
        }
    }
    return -1;
}

/* Parses one CLUSTER NODES line into v. masters[idx] receives the master id
 * field, resolved once every line is known. Returns 1, or 0 with why. */
static int view_add_line(const struct px_cluster *cl, struct view *v,
                         char *line, char masters[][PX_CLUSTER_ID_LEN + 1],
                         char *why)
{
    char *save = NULL, *f[8];
    for (int i = 0; i < 8; i++) {
        f[i] = strtok_r(i == 0 ? line : NULL, " ", &save);
        if (f[i] == NULL) {
            return not_ready(why, "short CLUSTER NODES line");
        }
    }
    int idx = px_cluster_node_by_port(cl, parse_addr_port(f[1]));
    if (idx < 0) {
        return not_ready(why, "unknown node address %s", f[1]);
    }
    v->known++;
    snprintf(v->id[idx], sizeof(v->id[idx]), "%s", f[0]);
    snprintf(masters[idx], sizeof(masters[idx]), "%s", f[3]);
    v->failing[idx] = has_flag(f[2], "fail") || has_flag(f[2], "fail?") ||
                      has_flag(f[2], "handshake") || has_flag(f[2], "noaddr");
    if (has_flag(f[2], "myself")) {
        v->self = idx;
    }
    for (char *t = strtok_r(NULL, " ", &save); t != NULL;
         t = strtok_r(NULL, " ", &save)) {
        long lo, hi;
        if (parse_range(t, &lo, &hi) != 0) {
            continue; /* an importing/migrating marker */
        }
        for (long s = lo; s <= hi; s++) {
            v->owner[s] = (short)idx;
        }
    }
    return 1;
}

/* Fills v from the CLUSTER NODES text of one node. Returns 1, or 0 with
 * why. */
static int view_parse(const struct px_cluster *cl, struct view *v, char *text,
                      char *why)
{
    char masters[PX_CLUSTER_MAX_NODES][PX_CLUSTER_ID_LEN + 1];
    char *save = NULL;

    memset(v, 0, sizeof(*v));
    memset(masters, 0, sizeof(masters));
    v->self = -1;
    for (int s = 0; s < PX_CLUSTER_SLOTS; s++) {
        v->owner[s] = -1;
    }
    for (char *line = strtok_r(text, "\n", &save); line != NULL;
         line = strtok_r(NULL, "\n", &save)) {
        if (!view_add_line(cl, v, line, masters, why)) {
            return 0;
        }
    }
    for (int i = 0; i < cl->nnodes; i++) {
        v->master[i] = -1;
        if (v->id[i][0] != '\0' && strcmp(masters[i], "-") != 0) {
            v->master[i] = view_find_id(cl, v, masters[i]);
            if (v->master[i] < 0) {
                return not_ready(why, "node %d replicates unknown %s", i,
                                 masters[i]);
            }
        }
    }
    if (v->self < 0) {
        return not_ready(why, "no myself line");
    }
    return 1;
}

/* Port of a CLUSTER SLOTS node entry [ip, port, id, ...], or -1. */
static int slots_entry_port(const redisReply *node)
{
    if (node->type != REDIS_REPLY_ARRAY || node->elements < 2 ||
        node->element[1]->type != REDIS_REPLY_INTEGER) {
        return -1;
    }
    return (int)node->element[1]->integer;
}

/* Checks one CLUSTER SLOTS range [lo, hi, master, replicas...] against the
 * view: same master for every slot, and exactly its running replicas
 * (Redis lists a replica only once its replication offset has been
 * gossiped, so a fresh replica may be missing for a moment). */
static int slots_entry_matches(const struct px_cluster *cl,
                               const struct view *v, const redisReply *e,
                               char *why)
{
    if (e->type != REDIS_REPLY_ARRAY || e->elements < 3) {
        return not_ready(why, "malformed CLUSTER SLOTS entry");
    }
    long long lo = e->element[0]->integer, hi = e->element[1]->integer;
    int m = px_cluster_node_by_port(cl, slots_entry_port(e->element[2]));
    int want = 0;

    if (m < 0 || lo < 0 || hi < lo || hi >= PX_CLUSTER_SLOTS) {
        return not_ready(why, "malformed CLUSTER SLOTS entry");
    }
    for (long long s = lo; s <= hi; s++) {
        if (v->owner[s] != m) {
            return not_ready(why,
                             "node %d: CLUSTER SLOTS and NODES differ "
                             "on slot %lld",
                             v->self, s);
        }
    }
    for (int i = 0; i < cl->nnodes; i++) {
        want += v->master[i] == m && px_cluster_is_running(cl, i);
    }
    if ((int)e->elements - 3 != want) {
        return not_ready(why, "node %d lists %d replicas of node %d, not %d",
                         v->self, (int)e->elements - 3, m, want);
    }
    for (size_t k = 3; k < e->elements; k++) {
        int r = px_cluster_node_by_port(cl, slots_entry_port(e->element[k]));
        if (r < 0 || v->master[r] != m) {
            return not_ready(why, "node %d lists a wrong replica of node %d",
                             v->self, m);
        }
    }
    return 1;
}

/* True when the node's CLUSTER SLOTS, what a cluster client reads, says
 * what its CLUSTER NODES says. */
static int slots_match(const struct px_cluster *cl, redisContext *c,
                       const struct view *v, char *why)
{
    redisReply *r = redisCommand(c, "CLUSTER SLOTS");
    int ok = r != NULL && r->type == REDIS_REPLY_ARRAY;

    if (!ok) {
        not_ready(why, "node %d: no CLUSTER SLOTS", v->self);
    }
    for (size_t k = 0; ok && k < r->elements; k++) {
        ok = slots_entry_matches(cl, v, r->element[k], why);
    }
    if (r != NULL) {
        freeReplyObject(r);
    }
    return ok;
}

/* Reads the view of a running node: it must answer, be in state ok, know
 * every node, see no running node as failing, and say the same in CLUSTER
 * SLOTS. Returns 1, or 0 with why. */
static int view_read(struct px_cluster *cl, int node, struct view *v, char *why)
{
    int port = px_cluster_port(cl, node), ok = 0;
    redisContext *c = probe_connect(port);
    char *info = NULL, *nodes = NULL;

    if (c == NULL) {
        return not_ready(why, "node %d (port %d) does not answer", node, port);
    }
    info = probe_text(c, "CLUSTER INFO");
    nodes = probe_text(c, "CLUSTER NODES");
    if (info == NULL || nodes == NULL) {
        ok = not_ready(why, "node %d (port %d): no CLUSTER INFO/NODES", node,
                       port);
    } else if (!has_field(info, "cluster_state", "ok")) {
        ok = not_ready(why, "node %d (port %d): cluster_state is not ok", node,
                       port);
    } else if (view_parse(cl, v, nodes, why)) {
        ok = 1;
        if (v->known != cl->nnodes) {
            ok = not_ready(why, "node %d knows %d nodes, not %d", node,
                           v->known, cl->nnodes);
        }
        for (int j = 0; ok && j < cl->nnodes; j++) {
            if (px_cluster_is_running(cl, j) && v->failing[j]) {
                ok =
                    not_ready(why, "node %d flags node %d as failing", node, j);
            }
        }
        ok = ok && slots_match(cl, c, v, why);
    }
    redisFree(c);
    free(info);
    free(nodes);
    return ok;
}

/* True when views a and b (of nodes na and nb) agree on every slot owner
 * and on the role of every running node. Else 0 with why. */
static int views_agree(const struct px_cluster *cl, const struct view *a,
                       const struct view *b, char *why)
{
    for (int s = 0; s < PX_CLUSTER_SLOTS; s++) {
        if (a->owner[s] != b->owner[s]) {
            return not_ready(why, "nodes %d and %d disagree on slot %d",
                             a->self, b->self, s);
        }
    }
    for (int i = 0; i < cl->nnodes; i++) {
        if (px_cluster_is_running(cl, i) && a->master[i] != b->master[i]) {
            return not_ready(why, "nodes %d and %d disagree on node %d's role",
                             a->self, b->self, i);
        }
    }
    return 1;
}

/* True when a running replica's link to `master` is up and in sync. */
static int replica_attached(const struct px_cluster *cl, int node, int master,
                            char *why)
{
    redisContext *c = probe_connect(px_cluster_port(cl, node));
    char *info = NULL, port[16];
    int ok;

    if (c == NULL) {
        return not_ready(why, "replica %d does not answer", node);
    }
    info = probe_text(c, "INFO replication");
    redisFree(c);
    snprintf(port, sizeof(port), "%d", px_cluster_port(cl, master));
    ok = info != NULL && has_field(info, "master_link_status", "up") &&
         has_field(info, "master_port", port) &&
         has_field(info, "master_sync_in_progress", "0");
    free(info);
    if (!ok) {
        return not_ready(why, "replica %d is not attached to node %d", node,
                         master);
    }
    return 1;
}

/* Checks the agreed view `v`: every slot served by a running master, and
 * every running replica attached to its running master. */
static int view_is_served(struct px_cluster *cl, const struct view *v,
                          char *why)
{
    for (int s = 0; s < PX_CLUSTER_SLOTS; s++) {
        int o = v->owner[s];
        if (o < 0 || !px_cluster_is_running(cl, o) || v->master[o] != -1) {
            return not_ready(why, "slot %d is not served (owner %d)", s, o);
        }
    }
    for (int i = 0; i < cl->nnodes; i++) {
        int m = v->master[i];
        if (!px_cluster_is_running(cl, i) || m < 0) {
            continue;
        }
        if (!px_cluster_is_running(cl, m)) {
            return not_ready(why, "replica %d follows stopped node %d", i, m);
        }
        if (!replica_attached(cl, i, m, why)) {
            return 0;
        }
    }
    return 1;
}

/* One readiness poll. On success copies the agreed view into the fixture's
 * map and returns 1; else returns 0 with why. */
static int cluster_poll(struct px_cluster *cl, char *why)
{
    struct view *ref = calloc(1, sizeof(*ref));
    struct view *v = calloc(1, sizeof(*v));
    int have_ref = 0, ok = 1;

    cr_assert(ref != NULL && v != NULL);
    for (int i = 0; ok && i < cl->nnodes; i++) {
        if (!px_child_alive(&cl->nodes[i].proc)) {
            continue;
        }
        ok = view_read(cl, i, have_ref ? v : ref, why);
        if (ok && have_ref) {
            ok = views_agree(cl, ref, v, why);
        }
        have_ref = have_ref || ok;
    }
    if (ok && !have_ref) {
        ok = not_ready(why, "no node is running");
    }
    if (ok) {
        ok = view_is_served(cl, ref, why);
    }
    if (ok) {
        memcpy(cl->owner, ref->owner, sizeof(cl->owner));
        for (int i = 0; i < cl->nnodes; i++) {
            memcpy(cl->nodes[i].id, ref->id[i], sizeof(cl->nodes[i].id));
            cl->nodes[i].master = ref->master[i];
        }
    }
    free(ref);
    free(v);
    return ok;
}

/* An extra condition on the agreed map, checked after a successful poll. */
typedef int cluster_until_fn(const struct px_cluster *cl, const void *arg);

/* Polls until the cluster is ready and until(cl, arg) holds (when until is
 * not NULL), or PX_CLUSTER_WAIT_MS passed: then writes the last reason to
 * why. Returns 1 when ready. */
static int cluster_wait(struct px_cluster *cl, cluster_until_fn *until,
                        const void *arg, char *why)
{
    long long deadline = px_now_ms() + PX_CLUSTER_WAIT_MS;
    for (;;) {
        if (cluster_poll(cl, why)) {
            if (until == NULL || until(cl, arg)) {
                return 1;
            }
            not_ready(why, "the cluster is ok but not in the expected state");
        }
        if (px_now_ms() >= deadline) {
            return 0;
        }
        px_sleep_ms(POLL_STEP_MS);
    }
}

/* ---------------- Lifecycle ---------------- */

struct px_cluster *px_cluster(void)
{
    return &cluster;
}

/* Adds cl to the clusters the fini stops (once). */
static void register_cluster(struct px_cluster *cl)
{
    for (size_t i = 0; i < ARRAY_LEN(running); i++) {
        if (running[i] == cl) {
            return;
        }
    }
    for (size_t i = 0; i < ARRAY_LEN(running); i++) {
        if (running[i] == NULL) {
            running[i] = cl;
            return;
        }
    }
    cr_assert_fail("more than %d clusters in one test", MAX_CLUSTERS);
}

void px_cluster_stop(struct px_cluster *cl)
{
    for (int i = 0; i < cl->nnodes; i++) {
        px_redis_kill(&cl->nodes[i].proc, SIGKILL);
    }
    for (size_t i = 0; i < ARRAY_LEN(running); i++) {
        if (running[i] == cl) {
            running[i] = NULL;
        }
    }
}

void px_cluster_fini(void)
{
    for (size_t i = 0; i < ARRAY_LEN(running); i++) {
        if (running[i] != NULL) {
            px_cluster_stop(running[i]);
        }
    }
    px_env_fini();
}

void px_cluster_init(void)
{
    px_cluster_start(&cluster, PX_CLUSTER_DEFAULT_MASTERS,
                     PX_CLUSTER_DEFAULT_REPLICAS);
}

/* True when port is one of the first n ports already taken by cl. */
static int port_taken(const struct px_cluster *cl, int n, int port)
{
    for (int i = 0; i < n; i++) {
        if (cl->nodes[i].proc.port == port || cl->nodes[i].bus_port == port) {
            return 1;
        }
    }
    return 0;
}

/* A free port not yet given to another node of cl (px_free_port may hand
 * out a port twice, as the kernel recycles them). */
static int unique_free_port(const struct px_cluster *cl, int n, int also)
{
    for (int tries = 0; tries < 100; tries++) {
        int port = px_free_port();
        if (port != also && !port_taken(cl, n, port)) {
            return port;
        }
    }
    cr_assert_fail("no distinct free port after 100 tries");
    return -1;
}

/* Starts node i: cluster mode, its own bus port, nodes.conf and RDB file
 * (a replica saves what it syncs; nodes share the temp dir) in the temp
 * dir, replicas that sync at once (no diskless delay) and may always fail
 * over (validity factor 0: tests kill masters on purpose). Masters ping
 * their replicas every second, not every 10: CLUSTER SLOTS hides a replica
 * until its replication offset is non-zero, and on an idle master only
 * those pings move it. */
static void start_node(struct px_cluster *cl, int i)
{
    struct px_cluster_node *n = &cl->nodes[i];
    n->proc.port = unique_free_port(cl, i, -1);
    n->bus_port = unique_free_port(cl, i, n->proc.port);
    n->master = -1;
    snprintf(n->arg_bus, sizeof(n->arg_bus), "%d", n->bus_port);
    snprintf(n->arg_conf, sizeof(n->arg_conf), "nodes-%d.conf", n->proc.port);
    snprintf(n->arg_rdb, sizeof(n->arg_rdb), "dump-%d.rdb", n->proc.port);
    const char *const extra[] = {
        "--cluster-enabled",
        "yes",
        "--cluster-port",
        n->arg_bus,
        "--cluster-config-file",
        n->arg_conf,
        "--cluster-node-timeout",
        XSTR(PX_CLUSTER_NODE_TIMEOUT_MS),
        "--cluster-replica-validity-factor",
        "0",
        "--repl-diskless-sync-delay",
        "0",
        "--repl-ping-replica-period",
        "1",
        "--dbfilename",
        n->arg_rdb,
        "--dir",
        px_env()->dir,
        NULL,
    };
    const char *argv[PX_MAX_ARGS];
    size_t k = 0;
    for (; extra[k] != NULL; k++) {
        argv[k] = extra[k];
    }
    for (const char *const *a = node_args != NULL ? node_args(i) : NULL;
         a != NULL && *a != NULL; a++) {
        cr_assert(k + 1 < PX_MAX_ARGS, "too many node arguments");
        argv[k++] = *a;
    }
    argv[k] = NULL;
    px_redis_start(&n->proc, argv);
}

void px_cluster_set_node_args(px_cluster_args_fn *fn)
{
    node_args = fn;
}

/* Prints the end of every node's log and the create output, kills the
 * nodes, removes the temp dir, and fails the test. */
static void start_failed(struct px_cluster *cl, const char *what,
                         const char *why)
{
    for (int i = 0; i < cl->nnodes; i++) {
        fprintf(stderr, "--- node %d: port %d, log %s\n", i,
                cl->nodes[i].proc.port, cl->nodes[i].proc.log);
    }
    px_cluster_stop(cl);
    px_env_fini();
    cr_assert_fail("cluster start: %s: %s", what, why);
}

/* Runs redis-cli --cluster create over every node, masters first. */
static void create_cluster(struct px_cluster *cl)
{
    const char *argv[PX_CLUSTER_MAX_NODES + 8];
    char addr[PX_CLUSTER_MAX_NODES][32], replicas[16];
    size_t n = 0;
    struct px_run res;

    argv[n++] = "redis-cli";
    argv[n++] = "--cluster";
    argv[n++] = "create";
    for (int i = 0; i < cl->nnodes; i++) {
        snprintf(addr[i], sizeof(addr[i]), "127.0.0.1:%d",
                 cl->nodes[i].proc.port);
        argv[n++] = addr[i];
    }
    snprintf(replicas, sizeof(replicas), "%d", cl->nreplicas);
    argv[n++] = "--cluster-replicas";
    argv[n++] = replicas;
    argv[n++] = "--cluster-yes";
    argv[n] = NULL;
    px_run(&res, argv);
    if (res.status != 0) {
        fprintf(stderr, "--- redis-cli --cluster create:\n%s%s\n", res.out,
                res.err);
        px_run_free(&res);
        start_failed(cl, "redis-cli --cluster create", "non-zero exit");
    }
    px_run_free(&res);
}

void px_cluster_start(struct px_cluster *cl, int masters, int replicas)
{
    char why[WHY_LEN] = "";

    cr_assert(masters >= 3, "redis-cli needs at least 3 masters");
    cr_assert(replicas >= 0 && masters * (1 + replicas) <= PX_CLUSTER_MAX_NODES,
              "%d masters with %d replicas: too many nodes", masters, replicas);
    px_env_prepare();
    memset(cl, 0, sizeof(*cl));
    cl->nmasters = masters;
    cl->nreplicas = replicas;
    for (int s = 0; s < PX_CLUSTER_SLOTS; s++) {
        cl->owner[s] = -1;
    }
    register_cluster(cl);
    for (int i = 0; i < masters * (1 + replicas); i++) {
        cl->nnodes = i + 1;
        start_node(cl, i);
    }
    create_cluster(cl);
    if (!cluster_wait(cl, NULL, NULL, why)) {
        start_failed(cl, "not ready", why);
    }
}

void px_cluster_seeds(const struct px_cluster *cl, char *out, size_t outlen)
{
    size_t len = 0;

    cr_assert(outlen > 0);
    out[0] = '\0';
    for (int i = 0; i < cl->nnodes; i++) {
        if (!px_cluster_is_running(cl, i)) {
            continue;
        }
        int n = snprintf(out + len, outlen - len, "%s127.0.0.1:%d",
                         len > 0 ? "," : "", px_cluster_port(cl, i));
        cr_assert(n > 0 && (size_t)n < outlen - len, "seed list too long");
        len += (size_t)n;
    }
}

void px_cluster_proxy_start(struct px_child *p, const struct px_cluster *cl,
                            const char *yaml_extra)
{
    char seeds[PX_CLUSTER_MAX_NODES * 24], yaml[4096];

    px_cluster_seeds(cl, seeds, sizeof(seeds));
    int n = snprintf(yaml, sizeof(yaml), "cluster: \"%s\"\n%s", seeds,
                     yaml_extra != NULL ? yaml_extra : "");
    cr_assert(n > 0 && (size_t)n < sizeof(yaml), "yaml too long");
    px_proxy_start(p, yaml, NULL);
}

/* ---------------- Topology ---------------- */

int px_cluster_port(const struct px_cluster *cl, int node)
{
    check_index(cl, node);
    return cl->nodes[node].proc.port;
}

int px_cluster_node_by_port(const struct px_cluster *cl, int port)
{
    for (int i = 0; i < cl->nnodes; i++) {
        if (cl->nodes[i].proc.port == port) {
            return i;
        }
    }
    return -1;
}

int px_cluster_is_master(const struct px_cluster *cl, int node)
{
    check_index(cl, node);
    return cl->nodes[node].master < 0;
}

int px_cluster_is_running(const struct px_cluster *cl, int node)
{
    check_index(cl, node);
    return cl->nodes[node].proc.pid > 0;
}

int px_cluster_master_of_slot(const struct px_cluster *cl, unsigned slot)
{
    cr_assert_lt(slot, PX_CLUSTER_SLOTS);
    return cl->owner[slot];
}

int px_cluster_master_of_key(const struct px_cluster *cl, const char *key,
                             size_t len)
{
    return px_cluster_master_of_slot(cl, slot_for_key(key, len));
}

int px_cluster_replicas_of(const struct px_cluster *cl, int master, int *out,
                           int max)
{
    int n = 0;

    check_index(cl, master);
    for (int i = 0; i < cl->nnodes; i++) {
        if (cl->nodes[i].master == master && px_cluster_is_running(cl, i)) {
            if (n < max) {
                out[n] = i;
            }
            n++;
        }
    }
    return n;
}

int px_cluster_first_slot_of(const struct px_cluster *cl, int master)
{
    check_index(cl, master);
    for (int s = 0; s < PX_CLUSTER_SLOTS; s++) {
        if (cl->owner[s] == master) {
            return s;
        }
    }
    return -1;
}

void px_cluster_key_in_slot(unsigned slot, const char *suffix, char *out,
                            size_t outlen)
{
    char tag[16];

    cr_assert_lt(slot, PX_CLUSTER_SLOTS);
    /* CRC16 spreads short decimal strings over every slot well before
     * this bound (the worst slot needs a few hundred thousand tries). */
    for (unsigned long t = 0; t < 100000000UL; t++) {
        int len = snprintf(tag, sizeof(tag), "%lu", t);
        if (slot_for_key(tag, (size_t)len) == slot) {
            int n = snprintf(out, outlen, "{%s}%s", tag, suffix);
            cr_assert(n > 0 && (size_t)n < outlen, "key too long");
            return;
        }
    }
    cr_assert_fail("no decimal tag hashes to slot %u", slot);
}

redisContext *px_cluster_connect(const struct px_cluster *cl, int node)
{
    return px_connect(px_cluster_port(cl, node));
}

/* ---------------- Waiting and faults ---------------- */

void px_cluster_wait_ok(struct px_cluster *cl)
{
    char why[WHY_LEN] = "";
    cr_assert(cluster_wait(cl, NULL, NULL, why),
              "cluster not ok after %d ms: %s", PX_CLUSTER_WAIT_MS, why);
}

void px_cluster_kill(struct px_cluster *cl, int node)
{
    check_index(cl, node);
    cr_assert(px_cluster_is_running(cl, node), "node %d is not running", node);
    px_redis_kill(&cl->nodes[node].proc, SIGKILL);
}

void px_cluster_restart(struct px_cluster *cl, int node)
{
    check_index(cl, node);
    cr_assert(!px_cluster_is_running(cl, node), "node %d is running", node);
    px_redis_restart(&cl->nodes[node].proc);
}

/* until-condition of px_cluster_failover: *node is a master with slots. */
static int is_serving_master(const struct px_cluster *cl, const void *node)
{
    int i = *(const int *)node;
    return cl->nodes[i].master < 0 && px_cluster_first_slot_of(cl, i) >= 0;
}

void px_cluster_failover(struct px_cluster *cl, int replica, const char *mode)
{
    char why[WHY_LEN] = "";

    check_index(cl, replica);
    cr_assert(!px_cluster_is_master(cl, replica), "node %d is a master",
              replica);
    redisContext *c = px_cluster_connect(cl, replica);
    redisReply *r = mode != NULL ? px_cmd(c, "CLUSTER FAILOVER %s", mode)
                                 : px_cmd(c, "CLUSTER FAILOVER");
    check_ok(cl, replica, r, "CLUSTER FAILOVER");
    redisFree(c);
    cr_assert(cluster_wait(cl, is_serving_master, &replica, why),
              "node %d not a serving master after %d ms: %s", replica,
              PX_CLUSTER_WAIT_MS, why);
}

/* ---------------- Slot migration ---------------- */

void px_cluster_migrate_begin(struct px_cluster *cl,
                              struct px_cluster_migration *m, unsigned slot,
                              int to)
{
    int from = px_cluster_master_of_slot(cl, slot);

    check_index(cl, to);
    cr_assert(from >= 0, "slot %u has no master", slot);
    cr_assert(px_cluster_is_master(cl, to), "node %d is not a master", to);
    cr_assert_neq(from, to, "node %d already serves slot %u", to, slot);
    m->slot = slot;
    m->from = from;
    m->to = to;
    m->moved = 0;

    /* Importing first: a client sent -ASK by the source finds the target
     * ready to accept ASKING. */
    redisContext *c = px_cluster_connect(cl, to);
    check_ok(
        cl, to,
        px_cmd(c, "CLUSTER SETSLOT %u IMPORTING %s", slot, cl->nodes[from].id),
        "CLUSTER SETSLOT IMPORTING");
    redisFree(c);
    c = px_cluster_connect(cl, from);
    check_ok(
        cl, from,
        px_cmd(c, "CLUSTER SETSLOT %u MIGRATING %s", slot, cl->nodes[to].id),
        "CLUSTER SETSLOT MIGRATING");
    redisFree(c);
}

/* MIGRATEs the keys of one GETKEYSINSLOT reply. */
static void migrate_batch(struct px_cluster *cl,
                          const struct px_cluster_migration *m, redisContext *c,
                          const redisReply *keys)
{
    size_t argc = 8 + keys->elements;
    const char **argv = calloc(argc, sizeof(*argv));
    size_t *lens = calloc(argc, sizeof(*lens));
    char port[16], timeout[16];

    cr_assert(argv != NULL && lens != NULL);
    snprintf(port, sizeof(port), "%d", px_cluster_port(cl, m->to));
    snprintf(timeout, sizeof(timeout), "%d", MIGRATE_TIMEOUT);
    const char *fixed[] = { "MIGRATE", "127.0.0.1", port,      "",
                            "0",       timeout,     "REPLACE", "KEYS" };
    for (size_t i = 0; i < ARRAY_LEN(fixed); i++) {
        argv[i] = fixed[i];
        lens[i] = strlen(fixed[i]);
    }
    for (size_t i = 0; i < keys->elements; i++) {
        argv[8 + i] = keys->element[i]->str;
        lens[8 + i] = keys->element[i]->len;
    }
    redisReply *r = redisCommandArgv(c, (int)argc, argv, lens);
    cr_assert_not_null(r, "MIGRATE: %s", c->errstr);
    free(argv);
    free(lens);
    check_ok(cl, m->from, r, "MIGRATE");
}

size_t px_cluster_migrate_keys(struct px_cluster *cl,
                               struct px_cluster_migration *m, size_t max_keys)
{
    redisContext *c = px_cluster_connect(cl, m->from);
    size_t moved = 0;

    for (;;) {
        size_t want = MIGRATE_BATCH;
        if (max_keys > 0 && max_keys - moved < want) {
            want = max_keys - moved;
        }
        if (want == 0) {
            break;
        }
        redisReply *keys =
            px_cmd(c, "CLUSTER GETKEYSINSLOT %u %u", m->slot, (unsigned)want);
        cr_assert_eq(keys->type, REDIS_REPLY_ARRAY, "GETKEYSINSLOT: %s",
                     keys->str != NULL ? keys->str : "?");
        size_t got = keys->elements;
        if (got > 0) {
            migrate_batch(cl, m, c, keys);
        }
        freeReplyObject(keys);
        moved += got;
        if (got < want) {
            break;
        }
    }
    redisFree(c);
    m->moved += moved;
    return moved;
}

/* until-condition of px_cluster_migrate_finish: every node agrees that
 * the migration's target serves its slot. */
static int slot_moved(const struct px_cluster *cl, const void *migration)
{
    const struct px_cluster_migration *m = migration;
    return cl->owner[m->slot] == m->to;
}

/* Sends CLUSTER SETSLOT <slot> NODE <target id> to one master. */
static void setslot_node(struct px_cluster *cl,
                         const struct px_cluster_migration *m, int node)
{
    redisContext *c = px_cluster_connect(cl, node);
    check_ok(
        cl, node,
        px_cmd(c, "CLUSTER SETSLOT %u NODE %s", m->slot, cl->nodes[m->to].id),
        "CLUSTER SETSLOT NODE");
    redisFree(c);
}

void px_cluster_migrate_finish(struct px_cluster *cl,
                               struct px_cluster_migration *m)
{
    char why[WHY_LEN] = "";
    redisContext *c = px_cluster_connect(cl, m->from);
    redisReply *r = px_cmd(c, "CLUSTER COUNTKEYSINSLOT %u", m->slot);
    long long left = r->type == REDIS_REPLY_INTEGER ? r->integer : -1;

    freeReplyObject(r);
    redisFree(c);
    cr_assert_eq(left, 0,
                 "node %d still holds %lld keys of slot %u: migrate them "
                 "first (px_cluster_migrate_keys)",
                 m->from, left, m->slot);
    /* Target first (it leaves importing and bumps its epoch), then the
     * source, then the rest, as the Redis Cluster specification orders. */
    setslot_node(cl, m, m->to);
    setslot_node(cl, m, m->from);
    for (int i = 0; i < cl->nnodes; i++) {
        if (i != m->to && i != m->from && px_cluster_is_running(cl, i) &&
            px_cluster_is_master(cl, i)) {
            setslot_node(cl, m, i);
        }
    }
    cr_assert(cluster_wait(cl, slot_moved, m, why),
              "slot %u not on node %d after %d ms: %s", m->slot, m->to,
              PX_CLUSTER_WAIT_MS, why);
}

void px_cluster_migrate_slot(struct px_cluster *cl, unsigned slot, int to)
{
    struct px_cluster_migration m;

    px_cluster_migrate_begin(cl, &m, slot, to);
    px_cluster_migrate_keys(cl, &m, 0);
    px_cluster_migrate_finish(cl, &m);
}
