/* The cluster fixture and slot_for_key against a live Redis Cluster.
 *
 * The proxy's cluster tests trust two things checked here: that
 * slot_for_key agrees with Redis's own CLUSTER KEYSLOT, and that the
 * fixture's idea of the topology (who serves a slot, who replicates whom)
 * is what the cluster really does, before and after a failover, a kill -9
 * and a slot migration. Each check asks the nodes directly, with its own
 * parsing (CLUSTER SLOTS, ROLE, CLUSTER MYID, MOVED/ASK replies, where
 * writes land), so a fixture bug cannot hide behind the fixture's parser.
 * The last test drives scripts/cluster.sh, the same cluster for humans and
 * benchmarks. */
#include "tests/integration/cluster_fixture.h"
#include "tests/support/px_test.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "parser/slot.h"

PX_TEST_SUITE(it_cluster_fixture);

#define SUITE_TIMEOUT_S   60    /* per test: a cluster start takes ~4 s */
#define KEYSLOT_KEYS      4000  /* keys compared with CLUSTER KEYSLOT */
#define KEYSLOT_MAX_LEN   48    /* longest random key */
#define ROUTED_KEYS       300   /* keys written through the fixture's map */
#define MIGRATED_KEYS     20    /* keys of the migrated slot */
#define WAIT_REPL_MS      5000  /* bound of WAIT for one replica */
#define SEEDS_LEN         512   /* a seed list of 16 nodes fits */
#define SCRIPT_TIMEOUT_MS 45000 /* cluster.sh start: ~4 s, bounded inside */
#define SCRIPT_OUT_MAX    4096  /* stdout/stderr kept from cluster.sh */

/* ---------------- Helpers ---------------- */

/* xorshift32: a fixed-seed stream so failures reproduce. */
static uint32_t next_random(uint32_t *state)
{
    uint32_t x = *state;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    *state = x;
    return x;
}

/* Asserts an error reply equal to "<code> <slot> 127.0.0.1:<port of node>"
 * (a MOVED or ASK redirection to `node`), then frees it. */
static void check_redirect(const struct px_cluster *cl, redisReply *r,
                           const char *code, unsigned slot, int node)
{
    char want[64];
    snprintf(want, sizeof(want), "%s %u 127.0.0.1:%d", code, slot,
             px_cluster_port(cl, node));
    px_check_error(r, want);
}

/* The ROLE of a node: "master" or "slave". Asserts the reply shape. */
static void check_role(const struct px_cluster *cl, int node, const char *want)
{
    redisContext *c = px_cluster_connect(cl, node);
    redisReply *r = px_cmd(c, "ROLE");
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
    cr_assert_gt(r->elements, 0);
    cr_assert_str_eq(r->element[0]->str, want, "node %d is a %s, not a %s",
                     node, r->element[0]->str, want);
    freeReplyObject(r);
    redisFree(c);
}

/* Asserts that `WAIT 1` on a master returns 1: its replica has every
 * write made so far on this connection. */
static void wait_replicated(redisContext *c)
{
    px_check_int(px_cmd(c, "WAIT 1 %d", WAIT_REPL_MS), 1);
}

/* A running master other than `a` and `b` (which may be equal). */
static int other_master(const struct px_cluster *cl, int a, int b)
{
    for (int i = 0; i < cl->nnodes; i++) {
        if (i != a && i != b && px_cluster_is_running(cl, i) &&
            px_cluster_is_master(cl, i)) {
            return i;
        }
    }
    cr_assert_fail("no third master");
    return -1;
}

/* ---------------- Start and map ---------------- */

/* Checks one CLUSTER SLOTS range entry against the fixture's map: every
 * slot served by the listed master, and the listed replicas are exactly
 * the fixture's replicas of it. Returns the number of slots. */
static long check_slots_entry(const struct px_cluster *cl, const redisReply *e)
{
    cr_assert_eq(e->type, REDIS_REPLY_ARRAY);
    cr_assert_geq(e->elements, 3);
    long lo = (long)e->element[0]->integer, hi = (long)e->element[1]->integer;
    int master =
        px_cluster_node_by_port(cl, (int)e->element[2]->element[1]->integer);
    int replicas[PX_CLUSTER_MAX_NODES];
    int n = px_cluster_replicas_of(cl, master, replicas, PX_CLUSTER_MAX_NODES);

    cr_assert_geq(master, 0, "CLUSTER SLOTS names an unknown port");
    for (long s = lo; s <= hi; s++) {
        cr_assert_eq(px_cluster_master_of_slot(cl, (unsigned)s), master,
                     "slot %ld: fixture says %d, CLUSTER SLOTS says %d", s,
                     px_cluster_master_of_slot(cl, (unsigned)s), master);
    }
    cr_assert_eq((int)e->elements - 3, n, "master %d: %d replicas, not %d",
                 master, (int)e->elements - 3, n);
    for (size_t k = 3; k < e->elements; k++) {
        int r = px_cluster_node_by_port(
            cl, (int)e->element[k]->element[1]->integer);
        cr_assert_geq(r, 0);
        cr_assert_eq(cl->nodes[r].master, master,
                     "node %d replicates %d, fixture says %d", r, master,
                     cl->nodes[r].master);
    }
    return hi - lo + 1;
}

Test(it_cluster_fixture, start_leaves_every_node_ok_and_agreeing_with_the_map,
     .init = px_cluster_init, .fini = px_cluster_fini,
     .timeout = SUITE_TIMEOUT_S)
{
    struct px_cluster *cl = px_cluster();
    int masters = 0;

    cr_assert_eq(cl->nnodes, 6);
    for (int i = 0; i < cl->nnodes; i++) {
        int reps[PX_CLUSTER_MAX_NODES];
        if (px_cluster_is_master(cl, i)) {
            masters++;
            cr_assert_eq(px_cluster_replicas_of(cl, i, reps, 16), 1,
                         "master %d has no replica", i);
            cr_assert_geq(px_cluster_first_slot_of(cl, i), 0);
        }
    }
    cr_assert_eq(masters, 3);

    for (int i = 0; i < cl->nnodes; i++) {
        redisContext *c = px_cluster_connect(cl, i);
        redisReply *r = px_cmd(c, "CLUSTER INFO");
        cr_assert_eq(r->type, REDIS_REPLY_STRING);
        cr_assert_not_null(strstr(r->str, "cluster_state:ok\r\n"));
        cr_assert_not_null(strstr(r->str, "cluster_slots_assigned:16384\r\n"));
        cr_assert_not_null(strstr(r->str, "cluster_known_nodes:6\r\n"));
        freeReplyObject(r);

        r = px_cmd(c, "CLUSTER MYID");
        px_check_str(r, cl->nodes[i].id);

        r = px_cmd(c, "CLUSTER SLOTS");
        cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
        long covered = 0;
        for (size_t k = 0; k < r->elements; k++) {
            covered += check_slots_entry(cl, r->element[k]);
        }
        cr_assert_eq(covered, PX_CLUSTER_SLOTS);
        freeReplyObject(r);

        check_role(cl, i, px_cluster_is_master(cl, i) ? "master" : "slave");
        redisFree(c);
    }
}

Test(it_cluster_fixture, writes_to_the_looked_up_master_need_no_redirection,
     .init = px_cluster_init, .fini = px_cluster_fini,
     .timeout = SUITE_TIMEOUT_S)
{
    struct px_cluster *cl = px_cluster();
    redisContext *conn[PX_CLUSTER_MAX_NODES];
    long long total = 0;

    for (int i = 0; i < cl->nnodes; i++) {
        conn[i] = px_cluster_connect(cl, i);
    }
    for (int k = 0; k < ROUTED_KEYS; k++) {
        char key[64];
        snprintf(key, sizeof(key), k % 3 == 0 ? "{tag%d}x" : "key:%d", k);
        unsigned slot = slot_for_key(key, strlen(key));
        int m = px_cluster_master_of_key(cl, key, strlen(key));
        int other = other_master(cl, m, m);

        px_check_status(px_cmd(conn[m], "SET %s v%d", key, k), "OK");
        check_redirect(cl, px_cmd(conn[other], "GET %s", key), "MOVED", slot,
                       m);
    }
    for (int i = 0; i < cl->nnodes; i++) {
        if (!px_cluster_is_master(cl, i)) {
            continue;
        }
        redisReply *r = px_cmd(conn[i], "DBSIZE");
        cr_assert_eq(r->type, REDIS_REPLY_INTEGER);
        total += r->integer;
        freeReplyObject(r);
        wait_replicated(conn[i]);
    }
    cr_assert_eq(total, ROUTED_KEYS);

    /* Replicas of the looked-up master hold the key (READONLY reads). */
    for (int k = 0; k < ROUTED_KEYS; k += 7) {
        char key[64], want[16];
        int reps[PX_CLUSTER_MAX_NODES];
        snprintf(key, sizeof(key), k % 3 == 0 ? "{tag%d}x" : "key:%d", k);
        snprintf(want, sizeof(want), "v%d", k);
        int m = px_cluster_master_of_key(cl, key, strlen(key));
        cr_assert_eq(px_cluster_replicas_of(cl, m, reps, 16), 1);
        px_check_status(px_cmd(conn[reps[0]], "READONLY"), "OK");
        px_check_str(px_cmd(conn[reps[0]], "GET %s", key), want);
    }
    for (int i = 0; i < cl->nnodes; i++) {
        redisFree(conn[i]);
    }
}

/* ---------------- Hash slots ---------------- */

/* Fills key with a random key of the kind the proxy must hash: random
 * bytes (NUL, 0xff, braces included), or text around a hash tag. Returns
 * its length. */
static size_t random_key(uint32_t *seed, char *key)
{
    static const char alphabet[] = "ab{}{}\0\xff:x";
    size_t len = next_random(seed) % (KEYSLOT_MAX_LEN + 1);

    switch (next_random(seed) % 3) {
    case 0:
        for (size_t i = 0; i < len; i++) {
            key[i] = (char)next_random(seed);
        }
        return len;
    case 1:
        for (size_t i = 0; i < len; i++) {
            key[i] = alphabet[next_random(seed) % (sizeof(alphabet) - 1)];
        }
        return len;
    default:
        return (size_t)snprintf(
            key, KEYSLOT_MAX_LEN + 1, "u%u{%u}.%u", next_random(seed) % 100,
            next_random(seed) % 1000, next_random(seed) % 10);
    }
}

Test(it_cluster_fixture, slot_for_key_equals_cluster_keyslot,
     .fini = px_cluster_fini, .timeout = SUITE_TIMEOUT_S)
{
    struct px_cluster *cl = px_cluster();
    static char keys[KEYSLOT_KEYS][KEYSLOT_MAX_LEN + 1];
    static size_t lens[KEYSLOT_KEYS];
    uint32_t seed = 0xc0ffee11u;

    /* Three masters, no replica: also the fixture's replicas = 0 path. */
    px_cluster_start(cl, 3, 0);
    cr_assert_eq(cl->nnodes, 3);
    redisContext *c = px_cluster_connect(cl, 0);
    for (int k = 0; k < KEYSLOT_KEYS; k++) {
        const char *argv[] = { "CLUSTER", "KEYSLOT", keys[k] };
        size_t argl[] = { 7, 7, 0 };
        lens[k] = random_key(&seed, keys[k]);
        argl[2] = lens[k];
        cr_assert_eq(redisAppendCommandArgv(c, 3, argv, argl), REDIS_OK);
    }
    for (int k = 0; k < KEYSLOT_KEYS; k++) {
        redisReply *r = px_next(c);
        cr_assert_eq(r->type, REDIS_REPLY_INTEGER);
        cr_assert_eq(slot_for_key(keys[k], lens[k]), (unsigned)r->integer,
                     "key %d (%zu bytes): slot_for_key %u, redis %lld", k,
                     lens[k], slot_for_key(keys[k], lens[k]), r->integer);
        freeReplyObject(r);
    }

    /* px_cluster_key_in_slot builds keys where Redis puts them. */
    for (unsigned s = 0; s < PX_CLUSTER_SLOTS; s += 257) {
        char key[64];
        px_cluster_key_in_slot(s, ":suffix", key, sizeof(key));
        px_check_int(px_cmd(c, "CLUSTER KEYSLOT %s", key), s);
    }
    redisFree(c);
}

/* ---------------- Migration ---------------- */

/* Key i of the migrated slot. */
static void migrated_key(char *out, size_t outlen, int i)
{
    snprintf(out, outlen, "{mig}:%d", i);
}

/* Value stored under a migrated key: its number, the text after "{mig}:". */
static const char *migrated_value(const char *key)
{
    const char *colon = strrchr(key, ':');
    cr_assert_not_null(colon);
    return colon + 1;
}

/* A key the target already holds: the source answers -ASK towards the
 * target, which serves it after ASKING (and only then). */
static void check_moved_key_answers_ask(const struct px_cluster *cl,
                                        redisContext *src, redisContext *dst,
                                        const struct px_cluster_migration *m)
{
    redisReply *keys = px_cmd(dst, "CLUSTER GETKEYSINSLOT %u 1", m->slot);
    cr_assert_eq(keys->type, REDIS_REPLY_ARRAY);
    cr_assert_eq(keys->elements, 1);
    const char *key = keys->element[0]->str;

    check_redirect(cl, px_cmd(src, "GET %s", key), "ASK", m->slot, m->to);
    check_redirect(cl, px_cmd(dst, "GET %s", key), "MOVED", m->slot, m->from);
    px_check_status(px_cmd(dst, "ASKING"), "OK");
    px_check_str(px_cmd(dst, "GET %s", key), migrated_value(key));
    freeReplyObject(keys);
}

/* A key the source still holds is served there, without redirection. */
static void check_unmoved_key_is_served(redisContext *src, unsigned slot)
{
    redisReply *keys = px_cmd(src, "CLUSTER GETKEYSINSLOT %u 1", slot);
    cr_assert_eq(keys->type, REDIS_REPLY_ARRAY);
    cr_assert_eq(keys->elements, 1);
    const char *key = keys->element[0]->str;

    px_check_str(px_cmd(src, "GET %s", key), migrated_value(key));
    freeReplyObject(keys);
}

Test(it_cluster_fixture, migration_moves_keys_and_the_old_owner_answers_moved,
     .init = px_cluster_init, .fini = px_cluster_fini,
     .timeout = SUITE_TIMEOUT_S)
{
    struct px_cluster *cl = px_cluster();
    struct px_cluster_migration m;
    unsigned slot = slot_for_key("mig", 3);
    int from = px_cluster_master_of_slot(cl, slot);
    int to = other_master(cl, from, from);
    int third = other_master(cl, from, to);
    char key[32];

    redisContext *src = px_cluster_connect(cl, from);
    redisContext *dst = px_cluster_connect(cl, to);
    for (int i = 0; i < MIGRATED_KEYS; i++) {
        migrated_key(key, sizeof(key), i);
        px_check_status(px_cmd(src, "SET %s %d", key, i), "OK");
    }

    px_cluster_migrate_begin(cl, &m, slot, to);
    cr_assert_eq(m.from, from);
    /* Importing: the target still redirects plain requests to the source. */
    migrated_key(key, sizeof(key), 0);
    check_redirect(cl, px_cmd(dst, "GET %s", key), "MOVED", slot, from);
    px_check_str(px_cmd(src, "GET %s", key), "0");

    cr_assert_eq(px_cluster_migrate_keys(cl, &m, 5), 5);
    cr_assert_eq(m.moved, 5);
    px_check_int(px_cmd(src, "CLUSTER COUNTKEYSINSLOT %u", slot),
                 MIGRATED_KEYS - 5);
    px_check_int(px_cmd(dst, "CLUSTER COUNTKEYSINSLOT %u", slot), 5);
    /* A moved key: -ASK from the source, served by the target after
     * ASKING. A key not moved yet: still served by the source. */
    check_moved_key_answers_ask(cl, src, dst, &m);
    check_unmoved_key_is_served(src, slot);

    cr_assert_eq(px_cluster_migrate_keys(cl, &m, 0), MIGRATED_KEYS - 5);
    cr_assert_eq(px_cluster_migrate_keys(cl, &m, 0), 0);
    px_cluster_migrate_finish(cl, &m);

    cr_assert_eq(px_cluster_master_of_slot(cl, slot), to);
    redisContext *oth = px_cluster_connect(cl, third);
    for (int i = 0; i < MIGRATED_KEYS; i++) {
        char want[16];
        migrated_key(key, sizeof(key), i);
        snprintf(want, sizeof(want), "%d", i);
        check_redirect(cl, px_cmd(src, "GET %s", key), "MOVED", slot, to);
        check_redirect(cl, px_cmd(oth, "GET %s", key), "MOVED", slot, to);
        px_check_str(px_cmd(dst, "GET %s", key), want);
    }
    /* The target's replica follows, and learnt the new owner too. */
    int reps[PX_CLUSTER_MAX_NODES];
    cr_assert_eq(px_cluster_replicas_of(cl, to, reps, 16), 1);
    wait_replicated(dst);
    redisContext *rep = px_cluster_connect(cl, reps[0]);
    px_check_status(px_cmd(rep, "READONLY"), "OK");
    px_check_str(px_cmd(rep, "GET %s", key), "19");
    redisFree(rep);
    redisFree(oth);
    redisFree(src);
    redisFree(dst);
}

/* ---------------- Failover ---------------- */

Test(it_cluster_fixture, manual_failover_promotes_the_replica,
     .init = px_cluster_init, .fini = px_cluster_fini,
     .timeout = SUITE_TIMEOUT_S)
{
    struct px_cluster *cl = px_cluster();
    int old = px_cluster_master_of_slot(cl, 0), reps[PX_CLUSTER_MAX_NODES];
    char key[64];

    cr_assert_eq(px_cluster_replicas_of(cl, old, reps, 16), 1);
    int rep = reps[0];
    px_cluster_key_in_slot(0, "", key, sizeof(key));
    redisContext *c = px_cluster_connect(cl, old);
    px_check_status(px_cmd(c, "SET %s before", key), "OK");
    wait_replicated(c);
    redisFree(c);

    px_cluster_failover(cl, rep, NULL);

    cr_assert_eq(px_cluster_master_of_slot(cl, 0), rep);
    cr_assert(px_cluster_is_master(cl, rep));
    cr_assert_eq(cl->nodes[old].master, rep, "old master follows %d",
                 cl->nodes[old].master);
    check_role(cl, rep, "master");
    check_role(cl, old, "slave");
    c = px_cluster_connect(cl, rep);
    px_check_str(px_cmd(c, "GET %s", key), "before");
    px_check_status(px_cmd(c, "SET %s after", key), "OK");
    redisFree(c);
    c = px_cluster_connect(cl, old);
    check_redirect(cl, px_cmd(c, "SET %s x", key), "MOVED", 0, rep);
    redisFree(c);
}

Test(it_cluster_fixture, killed_master_is_replaced_and_rejoins_as_a_replica,
     .init = px_cluster_init, .fini = px_cluster_fini,
     .timeout = SUITE_TIMEOUT_S)
{
    struct px_cluster *cl = px_cluster();
    int old = px_cluster_master_of_key(cl, "victim", 6);
    int reps[PX_CLUSTER_MAX_NODES];
    unsigned slot = slot_for_key("victim", 6);

    cr_assert_eq(px_cluster_replicas_of(cl, old, reps, 16), 1);
    int rep = reps[0];
    redisContext *c = px_cluster_connect(cl, old);
    px_check_status(px_cmd(c, "SET victim survives"), "OK");
    wait_replicated(c);
    redisFree(c);

    long long t0 = px_now_ms();
    px_cluster_kill(cl, old);
    cr_assert(!px_cluster_is_running(cl, old));
    px_cluster_wait_ok(cl);
    fprintf(stderr, "failover after kill -9: %lld ms\n", px_now_ms() - t0);

    cr_assert_eq(px_cluster_master_of_slot(cl, slot), rep);
    check_role(cl, rep, "master");
    c = px_cluster_connect(cl, rep);
    px_check_str(px_cmd(c, "GET victim"), "survives");
    redisFree(c);
    int other = other_master(cl, rep, rep);
    c = px_cluster_connect(cl, other);
    check_redirect(cl, px_cmd(c, "GET victim"), "MOVED", slot, rep);
    redisFree(c);

    px_cluster_restart(cl, old);
    px_cluster_wait_ok(cl);
    cr_assert_eq(cl->nodes[old].master, rep);
    check_role(cl, old, "slave");
    cr_assert_eq(px_cluster_replicas_of(cl, rep, reps, 16), 1);
    cr_assert_eq(reps[0], old);
}

/* ---------------- Stop and seeds ---------------- */

/* True when something accepts TCP connections on the loopback port. */
static int port_is_open(int port)
{
    struct timeval tv = { .tv_sec = 1, .tv_usec = 0 };
    redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
    int open = c != NULL && c->err == 0;
    redisFree(c);
    return open;
}

Test(it_cluster_fixture, seeds_name_every_node_and_stop_kills_them_all,
     .fini = px_cluster_fini, .timeout = SUITE_TIMEOUT_S)
{
    struct px_cluster *cl = px_cluster();
    char seeds[SEEDS_LEN], want[32];
    pid_t pids[PX_CLUSTER_MAX_NODES];

    px_cluster_start(cl, 3, 0);
    px_cluster_seeds(cl, seeds, sizeof(seeds));
    for (int i = 0; i < cl->nnodes; i++) {
        snprintf(want, sizeof(want), "127.0.0.1:%d", px_cluster_port(cl, i));
        cr_assert_not_null(strstr(seeds, want), "%s not in %s", want, seeds);
        pids[i] = cl->nodes[i].proc.pid;
    }
    /* cellgate accepts the list as its --cluster flag. */
    const char *argv[] = { PX_CELLGATE_BIN, "--check-config", "--cluster",
                           seeds, NULL };
    struct px_run res;
    px_run(&res, argv);
    cr_assert_eq(res.status, 0, "cellgate --check-config --cluster %s: %s",
                 seeds, res.err);
    px_run_free(&res);

    /* A killed node leaves the seed list. */
    px_cluster_kill(cl, 2);
    px_cluster_seeds(cl, seeds, sizeof(seeds));
    snprintf(want, sizeof(want), "127.0.0.1:%d", px_cluster_port(cl, 2));
    cr_assert_null(strstr(seeds, want));

    px_cluster_stop(cl);
    for (int i = 0; i < cl->nnodes; i++) {
        cr_assert(!px_cluster_is_running(cl, i));
        cr_assert(kill(pids[i], 0) != 0 && errno == ESRCH,
                  "node %d (pid %d) still exists", i, (int)pids[i]);
        cr_assert(!port_is_open(px_cluster_port(cl, i)), "port %d still open",
                  px_cluster_port(cl, i));
    }
    px_cluster_stop(cl); /* idempotent */
}

/* ---------------- scripts/cluster.sh ---------------- */

static char script_dir[PX_PATH_MAX]; /* DIR of the script's cluster */

/* Reads a small file into a fresh NUL-terminated buffer (caller frees). */
static char *read_small_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    char *text = calloc(1, SCRIPT_OUT_MAX + 1);

    cr_assert_not_null(f, "cannot open %s", path);
    cr_assert_not_null(text);
    size_t n = fread(text, 1, SCRIPT_OUT_MAX, f);
    text[n] = '\0';
    fclose(f);
    return text;
}

/* Runs scripts/cluster.sh <verb> script_dir with stdout and stderr in the
 * temp dir, bounded by SCRIPT_TIMEOUT_MS (px_run's 10 s is too tight for a
 * start on a loaded machine). Asserts exit 0; returns stdout (owned). */
static char *run_script(const char *verb)
{
    char out[PX_PATH_MAX], err[PX_PATH_MAX];
    px_path(out, sizeof(out), "script.stdout");
    px_path(err, sizeof(err), "script.stderr");
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    cr_assert(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        /* Child: async-signal-safe calls only. */
        int o = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int e = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (o < 0 || e < 0 || dup2(o, 1) < 0 || dup2(e, 2) < 0) {
            _exit(126);
        }
        execlp("bash", "bash", PX_SOURCE_DIR "/scripts/cluster.sh", verb,
               script_dir, (char *)NULL);
        _exit(127);
    }
    int status = 0;
    long long deadline = px_now_ms() + SCRIPT_TIMEOUT_MS;
    while (waitpid(pid, &status, WNOHANG) == 0) {
        if (px_now_ms() >= deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            cr_assert_fail("cluster.sh %s ran over %d ms", verb,
                           SCRIPT_TIMEOUT_MS);
        }
        px_sleep_ms(20);
    }
    int ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (!ok) {
        char *text = read_small_file(err);
        fprintf(stderr, "cluster.sh %s stderr:\n%s\n", verb, text);
        free(text);
    }
    cr_assert(ok, "cluster.sh %s failed (status 0x%x)", verb, status);
    return read_small_file(out);
}

/* .fini: stops whatever the script started, removes its dir, then the
 * standard teardown. */
static void script_fini(void)
{
    if (script_dir[0] != '\0') {
        const char *stop[] = { "bash", PX_SOURCE_DIR "/scripts/cluster.sh",
                               "stop", script_dir, NULL };
        const char *rm[] = { "rm", "-rf", script_dir, NULL };
        struct px_run res;
        px_run(&res, stop);
        px_run_free(&res);
        px_run(&res, rm);
        px_run_free(&res);
    }
    px_cluster_fini();
}

Test(it_cluster_fixture, cluster_script_starts_a_ready_cluster_and_stops_it,
     .fini = script_fini, .timeout = SUITE_TIMEOUT_S)
{
    int ports[PX_CLUSTER_MAX_NODES], n = 0;

    px_path(script_dir, sizeof(script_dir), "script-cluster");
    char *seeds = run_script("start");
    /* stdout is exactly the seed list and a newline. */
    size_t len = strlen(seeds);
    cr_assert(len > 0 && seeds[len - 1] == '\n', "stdout: \"%s\"", seeds);
    seeds[len - 1] = '\0';
    for (char *save = NULL, *t = strtok_r(seeds, ",", &save); t != NULL;
         t = strtok_r(NULL, ",", &save)) {
        cr_assert(strncmp(t, "127.0.0.1:", 10) == 0, "bad seed %s", t);
        cr_assert_lt(n, PX_CLUSTER_MAX_NODES);
        ports[n++] = atoi(t + 10);
    }
    free(seeds);
    cr_assert_eq(n, 6);

    int masters = 0;
    for (int i = 0; i < n; i++) {
        redisContext *c = px_connect(ports[i]);
        redisReply *r = px_cmd(c, "CLUSTER INFO");
        cr_assert_eq(r->type, REDIS_REPLY_STRING);
        cr_assert_not_null(strstr(r->str, "cluster_state:ok\r\n"));
        cr_assert_not_null(strstr(r->str, "cluster_known_nodes:6\r\n"));
        cr_assert_not_null(strstr(r->str, "cluster_slots_assigned:16384\r\n"));
        freeReplyObject(r);
        r = px_cmd(c, "INFO replication");
        cr_assert_eq(r->type, REDIS_REPLY_STRING);
        if (strstr(r->str, "role:master\r\n") != NULL) {
            masters++;
            cr_assert_not_null(strstr(r->str, "connected_slaves:1\r\n"));
        } else {
            cr_assert_not_null(strstr(r->str, "master_link_status:up\r\n"));
        }
        freeReplyObject(r);
        redisFree(c);
    }
    cr_assert_eq(masters, 3);

    /* "seeds" prints the same list again while it runs. */
    char *again = run_script("seeds");
    cr_assert_eq(atoi(strrchr(again, ':') + 1), ports[n - 1]);
    free(again);

    free(run_script("stop"));
    for (int i = 0; i < n; i++) {
        cr_assert(!port_is_open(ports[i]), "port %d still open", ports[i]);
    }
    /* A second stop finds nothing to do and still succeeds. */
    free(run_script("stop"));
}
