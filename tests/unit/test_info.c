/* info_render and the Prometheus renderer on hand-built snapshots: the
 * exact lines for given numbers, the sections the mask picks, and nothing
 * rendered twice. */
#include "tests/support/px_test.h"

#include <stdio.h>
#include <string.h>

#include "parser/buf.h"
#include "proxy/core/metrics.h"
#include "proxy/core/util.h"
#include "proxy/info.h"
#include "proxy/metrics_text.h"

PX_TEST_SUITE(info);

/* A snapshot and the counters it borrows, built by hand. */
struct fixture {
    struct info_snapshot snap;
    struct metrics m;
    struct metrics_rule rules[2];
    struct metrics_rule *rule_ptrs[2];
    struct metrics_node nodes[2];
    struct metrics_node *node_ptrs[2];
    struct info_held held[2];
};

static void fixture_init(struct fixture *f)
{
    static char throttle[] = "cl.throttle", user[] = "user:*,x=y";
    struct info_snapshot *s = &f->snap;
    unsigned i;

    memset(f, 0, sizeof(*f));
    s->version = "9.8.7";
    s->mode = "cluster";
    s->clients = 4;
    s->connections = 11;
    s->commands = 12;
    s->tls_clients = 1;
    s->tls_failures = 2;
    s->errors = 3;
    s->rejected_conns = 5;
    s->output_limit = 6;
    s->output_bytes = 7;
    s->auth_failures = 8;
    s->fail_open = 13;
    s->shadow_limited = 14;
    s->store = (struct store_stats){
        .refusal_hits = 21,
        .refusal_keys = 22,
        .refusal_invalidations = 23,
        .embedded_keys = 24,
        .embedded_evicted_expired = 25,
        .embedded_bytes = 26,
        .embedded_full_refused = 27,
        .override_bytes = 28,
        .override_refused = 29,
        .refusal_bytes = 30,
        .refusal_skipped = 31,
        .pending_bytes = 32,
        .pending_refused = 33,
    };
    s->wait = (struct limiter_wait_counts){ 41, 42, 43 };
    s->nodes = 3;
    s->masters = 2;
    s->slots_covered = 16000;
    s->private_conns = 3;
    s->private_refused = 9;
    f->held[0] = (struct info_held){ "10.0.0.1:6379", 1 };
    f->held[1] = (struct info_held){ "10.0.0.2:6379", 2 };
    s->held = f->held;
    s->nheld = 2;
    s->libs.names[0] = "redis-py";
    s->libs.counts[0] = 2;
    s->libs.names[1] = "go:redis,v=9";
    s->libs.counts[1] = 1;
    s->libs.n = 2;
    s->libs.none = 1;

    f->m.near_ratio = 0.8;
    f->m.reloads_ok = 2;
    f->m.reloads_failed = 1;
    snprintf(f->m.sha256, sizeof(f->m.sha256), "%s", "ab12");
    f->rules[0].path = throttle;
    f->rules[1].path = user;
    for (i = 0; i < METRICS_RESULTS; i++) {
        f->rules[0].n[i] = i;
        f->rules[1].n[i] = 10 + i;
    }
    f->rule_ptrs[0] = &f->rules[0];
    f->rule_ptrs[1] = &f->rules[1];
    f->m.rules = f->rule_ptrs;
    f->m.nrules = 2;
    snprintf(f->nodes[0].name, sizeof(f->nodes[0].name), "%s", "h1:1");
    snprintf(f->nodes[1].name, sizeof(f->nodes[1].name), "%s", "h\"2:2");
    for (i = 0; i < 2; i++) {
        f->nodes[i].connected = 1 + i;
        f->nodes[i].reconnects = 2 + i;
        f->nodes[i].timeouts = 3 + i;
        f->nodes[i].moved = 4 + i;
        f->nodes[i].ask = 5 + i;
        f->nodes[i].requests = 6 + i;
        f->nodes[i].errors = 7 + i;
        f->node_ptrs[i] = &f->nodes[i];
    }
    f->m.nodes = f->node_ptrs;
    f->m.nnodes = 2;
    f->m.decision.bucket[0] = 1;
    f->m.decision.bucket[2] = 2;
    f->m.decision.count = 4; /* one above the last bound */
    f->m.decision.sum_ns = 1500000000;
    s->metrics = &f->m;
}

/* `sections` of `s` rendered, as a NUL-ended string (caller frees). */
static char *rendered(unsigned sections, const struct info_snapshot *s)
{
    struct buf out;
    char *text;

    buf_init(&out);
    info_render(&out, sections, s);
    text = px_calloc(out.len + 1, 1);
    if (out.len > 0) {
        memcpy(text, out.data, out.len);
    }
    buf_free(&out);
    return text;
}

static void text_is(const char *got, const char *want)
{
    cr_assert(strcmp(got, want) == 0, "got\n%s\nwant\n%s", got, want);
}

/* How often `needle` occurs in `hay`. */
static unsigned count_of(const char *hay, const char *needle)
{
    unsigned n = 0;

    for (hay = strstr(hay, needle); hay != NULL;
         hay = strstr(hay + 1, needle)) {
        n++;
    }
    return n;
}

Test(info, proxy_section_has_every_line_with_its_number)
{
    struct fixture f;
    char *t;

    fixture_init(&f);
    f.snap.adjusts = 15;
    f.snap.leases[0] = 51;
    f.snap.leases[1] = 52;
    f.snap.leases[2] = 53;
    f.snap.leases[3] = 54;
    t = rendered(INFO_PROXY, &f.snap);
    text_is(t, "# Proxy\r\n"
               "cellgate_version:9.8.7\r\n"
               "proxy_mode:cluster\r\n"
               "connected_clients:4\r\n"
               "total_connections_received:11\r\n"
               "total_commands_processed:12\r\n"
               "connected_tls_clients:1\r\n"
               "tls_handshake_failures:2\r\n"
               "proxy_error_replies:3\r\n"
               "rejected_connections:5\r\n"
               "client_output_limit_disconnections:6\r\n"
               "client_output_bytes:7\r\n"
               "limiter_fail_open:13\r\n"
               "limiter_shadow_limited:14\r\n"
               "limiter_refusal_cache_hits:21\r\n"
               "limiter_refusal_cache_keys:22\r\n"
               "limiter_refusal_cache_invalidations:23\r\n"
               "limiter_adjusts:15\r\n"
               "limiter_lease_hits:51\r\n"
               "limiter_lease_takes:52\r\n"
               "limiter_lease_returned_units:53\r\n"
               "limiter_lease_waits:54\r\n"
               "limiter_embedded_keys:24\r\n"
               "limiter_embedded_evicted_expired:25\r\n"
               "limiter_waits:41\r\n"
               "limiter_waits_refused_identity:42\r\n"
               "limiter_waits_refused_total:43\r\n"
               "limiter_embedded_bytes:26\r\n"
               "limiter_embedded_full_refused:27\r\n"
               "limiter_override_bytes:28\r\n"
               "limiter_override_refused:29\r\n"
               "limiter_refusal_cache_bytes:30\r\n"
               "limiter_refusal_cache_skipped:31\r\n"
               "limiter_pending_bytes:32\r\n"
               "limiter_pending_refused:33\r\n"
               "upstream_nodes:3\r\n"
               "upstream_masters:2\r\n"
               "cluster_slots_covered:16000\r\n"
               "private_connections:3\r\n"
               "private_connections_refused:9\r\n"
               "acl_access_denied_auth:8\r\n"
               "private_connections_by_node:10.0.0.1:6379=1,"
               "10.0.0.2:6379=2\r\n"
               "clients_by_lib_name:redis-py=2,go_redis_v_9=1,(none)=1\r\n");
    px_free(t);
}

Test(info, sentinel_lines_only_in_sentinel_mode)
{
    struct fixture f;
    char *t;

    fixture_init(&f);
    t = rendered(INFO_PROXY, &f.snap);
    cr_assert_eq(count_of(t, "sentinel_"), 0);
    px_free(t);

    f.snap.mode = "sentinel";
    f.snap.sentinel = 1;
    f.snap.sentinel_name = "mymaster";
    f.snap.sentinel_addr = "";
    f.snap.sentinel_watching = "";
    f.snap.sentinel_switches = 0;
    t = rendered(INFO_PROXY, &f.snap);
    cr_assert(strstr(t, "cluster_slots_covered:16000\r\n"
                        "sentinel_master_name:mymaster\r\n"
                        "sentinel_master_addr:\r\n"
                        "sentinel_known:0\r\n"
                        "sentinel_switches:0\r\n"
                        "sentinel_watching:\r\n"
                        "private_connections:3\r\n") != NULL,
              "%s", t);
    px_free(t);

    f.snap.sentinel_addr = "10.0.0.9:6379";
    f.snap.sentinel_watching = "10.0.0.5:26379";
    f.snap.sentinel_switches = 3;
    t = rendered(INFO_PROXY, &f.snap);
    cr_assert(strstr(t, "sentinel_master_addr:10.0.0.9:6379\r\n"
                        "sentinel_known:1\r\n"
                        "sentinel_switches:3\r\n"
                        "sentinel_watching:10.0.0.5:26379\r\n") != NULL,
              "%s", t);
    px_free(t);
}

Test(info, census_line_cleans_names_and_counts_the_rest)
{
    static char longname[200];
    struct fixture f;
    char *t, want[256];

    fixture_init(&f);
    memset(longname, 'x', sizeof(longname) - 1);
    f.snap.libs.names[1] = longname;
    f.snap.libs.other = 5;
    f.snap.libs.none = 0;
    f.snap.nheld = 0;
    t = rendered(INFO_PROXY, &f.snap);
    /* A long name shows its first 79 bytes. */
    snprintf(want, sizeof(want),
             "private_connections_by_node:\r\n"
             "clients_by_lib_name:redis-py=2,%.79s=1,(other)=5,(none)=0\r\n",
             longname);
    cr_assert(strstr(t, want) != NULL, "%s", t);
    px_free(t);
}

Test(info, limiter_latency_and_nodes_sections)
{
    struct fixture f;
    char *t;

    fixture_init(&f);
    t = rendered(INFO_LIMITER | INFO_LATENCY | INFO_NODES, &f.snap);
    text_is(t, "# Limiter\r\n"
               "limiter_near_limit_ratio:0.8\r\n"
               "config_reloads_ok:2\r\n"
               "config_reloads_failed:1\r\n"
               "limits_file_sha256:ab12\r\n"
               "limiter_rule_0:rule=cl.throttle,allowed=0,limited=1,"
               "near_limit=2,shadow_limited=3,errors=4,fail_open=5\r\n"
               "limiter_rule_1:rule=user:*_x_y,allowed=10,limited=11,"
               "near_limit=12,shadow_limited=13,errors=14,fail_open=15\r\n"
               "\r\n# Latency\r\n"
               "decision_latency_seconds:count=4,sum=1.500000000,"
               "le_0.00005=1,le_0.0001=1,le_0.00025=3,le_0.0005=3,"
               "le_0.001=3,le_0.0025=3,le_0.005=3,le_0.01=3,le_0.025=3,"
               "le_0.05=3,le_0.1=3,le_0.25=3,le_0.5=3,le_1=3,le_2.5=3,"
               "le_5=3,le_10=3,le_+Inf=4\r\n"
               "forward_latency_seconds:count=0,sum=0.000000000,"
               "le_0.00005=0,le_0.0001=0,le_0.00025=0,le_0.0005=0,"
               "le_0.001=0,le_0.0025=0,le_0.005=0,le_0.01=0,le_0.025=0,"
               "le_0.05=0,le_0.1=0,le_0.25=0,le_0.5=0,le_1=0,le_2.5=0,"
               "le_5=0,le_10=0,le_+Inf=0\r\n"
               "\r\n# Nodes\r\n"
               "node_0:node=h1:1,connected=1,reconnects=2,timeouts=3,"
               "moved=4,ask=5,requests=6,errors=7\r\n"
               "node_1:node=h\"2:2,connected=2,reconnects=3,timeouts=4,"
               "moved=5,ask=6,requests=7,errors=8\r\n");
    px_free(t);
}

Test(info, limiter_section_lists_at_most_1000_rules)
{
    static struct metrics_rule rules[1003];
    static struct metrics_rule *ptrs[1003];
    static char paths[1003][16];
    struct fixture f;
    char *t;
    unsigned i;

    fixture_init(&f);
    for (i = 0; i < 1003; i++) {
        snprintf(paths[i], sizeof(paths[i]), "r%u", i);
        rules[i].path = paths[i];
        ptrs[i] = &rules[i];
    }
    f.m.rules = ptrs;
    f.m.nrules = 1003;
    t = rendered(INFO_LIMITER, &f.snap);
    cr_assert(strstr(t, "limiter_rule_999:rule=r999,") != NULL);
    cr_assert(strstr(t, "limiter_rule_1000:") == NULL);
    cr_assert(strstr(t, "\r\nlimiter_rules_omitted:3\r\n") != NULL);
    px_free(t);
}

/* Each section is chosen by its bit alone, and only it is rendered. */
Test(info, the_mask_picks_the_sections)
{
    static const struct {
        unsigned bit;
        const char *header;
    } sec[] = {
        { INFO_PROXY, "# Proxy\r\n" },
        { INFO_LIMITER, "# Limiter\r\n" },
        { INFO_LATENCY, "# Latency\r\n" },
        { INFO_NODES, "# Nodes\r\n" },
    };
    struct fixture f;
    unsigned mask, k;

    fixture_init(&f);
    for (mask = 0; mask <= INFO_ALL; mask++) {
        char *t = rendered(mask, &f.snap);
        const char *prev = t;
        for (k = 0; k < 4; k++) {
            const char *at = strstr(t, sec[k].header);
            unsigned want = (mask & sec[k].bit) ? 1 : 0;
            cr_assert_eq(count_of(t, sec[k].header), want, "mask %u, %s: %s",
                         mask, sec[k].header, t);
            if (at != NULL) {
                /* In the order Proxy, Limiter, Latency, Nodes. */
                cr_assert(at >= prev, "mask %u: %s out of order", mask,
                          sec[k].header);
                prev = at;
            }
        }
        if (mask == 0) {
            cr_assert_str_empty(t);
        } else {
            /* The first section opens the text, with no blank line. */
            cr_assert_eq(t[0], '#', "mask %u: %s", mask, t);
        }
        px_free(t);
    }
}

/* The keys of `text`'s lines split at `sep` ("name" of "name:value" when
 * `colon`, else the whole line), empty lines left out, into keys[]
 * (pointers into `copy`, which the caller frees). Returns how many. */
static size_t keys_of(const char *text, const char *sep, int colon, char **copy,
                      char **keys, size_t max)
{
    char *line, *save = NULL;
    size_t n = 0;

    *copy = px_calloc(strlen(text) + 1, 1);
    memcpy(*copy, text, strlen(text));
    for (line = strtok_r(*copy, sep, &save); line != NULL && n < max;
         line = strtok_r(NULL, sep, &save)) {
        if (colon && line[0] != '#') {
            line[strcspn(line, ":")] = '\0';
        }
        keys[n++] = line;
    }
    return n;
}

/* No two of keys[0..n) are the same. */
static void keys_unique(char **keys, size_t n)
{
    size_t i, k;

    cr_assert_gt(n, 10);
    for (i = 0; i < n; i++) {
        for (k = i + 1; k < n; k++) {
            if (strcmp(keys[i], keys[k]) == 0) {
                cr_assert_fail("'%s' twice", keys[i]);
            }
        }
    }
}

/* Every field and header of every section appears once. */
Test(info, nothing_is_rendered_twice)
{
    struct fixture f;
    char *t, *copy, *keys[256];
    size_t n;

    fixture_init(&f);
    f.snap.sentinel = 1;
    f.snap.sentinel_name = "m";
    f.snap.sentinel_addr = "a:1";
    f.snap.sentinel_watching = "";
    t = rendered(INFO_ALL, &f.snap);
    n = keys_of(t, "\r\n", 1, &copy, keys, 256);
    cr_assert_eq(n, 61, "%zu lines:\n%s", n, t);
    keys_unique(keys, n);
    px_free(copy);
    px_free(t);
}

/* The whole Prometheus text of `s`, as a NUL-ended string. */
static char *prometheus(const struct info_snapshot *s)
{
    struct buf out;
    char *text;

    buf_init(&out);
    metrics_text_prometheus(&out, s);
    text = px_calloc(out.len + 1, 1);
    memcpy(text, out.data, out.len);
    buf_free(&out);
    return text;
}

Test(info, prometheus_lines_for_given_numbers)
{
    struct fixture f;
    const char *want;
    char *t;

    fixture_init(&f);
    f.snap.sentinel = 1;
    f.snap.sentinel_name = "my\"master";
    f.snap.sentinel_addr = "10.0.0.9:6379";
    f.snap.sentinel_watching = "";
    f.snap.sentinel_switches = 3;
    t = prometheus(&f.snap);
    want = "# HELP cellgate_limiter_decisions_total Limiter decisions by "
           "rule (tree path; cl.throttle for CL.THROTTLE) and result.\n"
           "# TYPE cellgate_limiter_decisions_total counter\n"
           "cellgate_limiter_decisions_total{rule=\"cl.throttle\","
           "result=\"allowed\"} 0\n"
           "cellgate_limiter_decisions_total{rule=\"cl.throttle\","
           "result=\"limited\"} 1\n";
    cr_assert(strncmp(t, want, strlen(want)) == 0, "%s", t);
    cr_assert(strstr(t, "cellgate_limiter_decisions_total{rule=\"user:*,x=y\","
                        "result=\"fail_open\"} 15\n"
                        "# HELP cellgate_decision_duration_seconds") != NULL,
              "%s", t);
    cr_assert(strstr(t, "cellgate_decision_duration_seconds_bucket{le="
                        "\"0.00025\"} 3\n") != NULL);
    cr_assert(strstr(t,
                     "cellgate_decision_duration_seconds_bucket{le="
                     "\"+Inf\"} 4\n"
                     "cellgate_decision_duration_seconds_sum 1.500000000\n"
                     "cellgate_decision_duration_seconds_count 4\n") != NULL);
    cr_assert(strstr(t,
                     "cellgate_node_connected{node=\"h1:1\"} 1\n"
                     "cellgate_node_connected{node=\"h\\\"2:2\"} 2\n") != NULL,
              "%s", t);
    cr_assert(strstr(t, "cellgate_node_errors_total{node=\"h\\\"2:2\"} 8\n") !=
              NULL);
    cr_assert(strstr(t, "# TYPE cellgate_clients gauge\n"
                        "cellgate_clients{lib=\"redis-py\"} 2\n"
                        "cellgate_clients{lib=\"go:redis,v=9\"} 1\n"
                        "cellgate_clients{lib=\"(other)\"} 0\n"
                        "cellgate_clients{lib=\"(none)\"} 1\n") != NULL,
              "%s", t);
    cr_assert(strstr(t, "cellgate_config_reloads_total{result=\"ok\"} 2\n"
                        "cellgate_config_reloads_total{result=\"failed\"} "
                        "1\n") != NULL);
    cr_assert(strstr(t, "cellgate_auth_failures_total 8\n") != NULL);
    cr_assert(strstr(t,
                     "cellgate_limiter_bytes{what=\"embedded\"} 26\n"
                     "cellgate_limiter_bytes{what=\"refusal_cache\"} 30\n"
                     "cellgate_limiter_bytes{what=\"override\"} 28\n"
                     "cellgate_limiter_bytes{what=\"pending\"} 32\n") != NULL);
    cr_assert(
        strstr(t, "cellgate_limiter_no_room_total{what=\"embedded\"} 27\n"
                  "cellgate_limiter_no_room_total{what=\"refusal_cache\"} 31\n"
                  "cellgate_limiter_no_room_total{what=\"override\"} 29\n"
                  "cellgate_limiter_no_room_total{what=\"pending\"} 33\n") !=
        NULL);
    cr_assert(strstr(t, "cellgate_sentinel_switches_total 3\n") != NULL);
    cr_assert(strstr(t, "cellgate_sentinel_master_info{name=\"my\\\"master\","
                        "addr=\"10.0.0.9:6379\"} 1\n") != NULL,
              "%s", t);
    /* The limits file's hash ends the text. */
    cr_assert(strstr(t, "cellgate_config_info{sha256=\"ab12\"} 1\n") ==
              t + strlen(t) -
                  strlen("cellgate_config_info{sha256=\"ab12\"} "
                         "1\n"));
    px_free(t);
}

/* Without a master named, sentinel mode shows the switches only; without
 * sentinels and without a limits file, neither series. */
Test(info, prometheus_leaves_out_what_the_snapshot_lacks)
{
    struct fixture f;
    char *t;

    fixture_init(&f);
    f.snap.sentinel = 1;
    f.snap.sentinel_name = "m";
    f.snap.sentinel_addr = "";
    f.snap.sentinel_watching = "";
    t = prometheus(&f.snap);
    cr_assert(strstr(t, "cellgate_sentinel_switches_total 0\n") != NULL);
    cr_assert(strstr(t, "cellgate_sentinel_master_info") == NULL);
    px_free(t);

    f.snap.sentinel = 0;
    f.m.sha256[0] = '\0';
    t = prometheus(&f.snap);
    cr_assert(strstr(t, "sentinel") == NULL);
    cr_assert(strstr(t, "cellgate_config_info") == NULL);
    px_free(t);
}

/* Each family's HELP and TYPE once; every series line once. */
Test(info, prometheus_renders_nothing_twice)
{
    struct fixture f;
    char *t, *copy, *keys[256];
    size_t n;

    fixture_init(&f);
    f.snap.sentinel = 1;
    f.snap.sentinel_name = "m";
    f.snap.sentinel_addr = "a:1";
    f.snap.sentinel_watching = "";
    t = prometheus(&f.snap);
    n = keys_of(t, "\n", 0, &copy, keys, 256);
    cr_assert_eq(n, 120, "%zu lines:\n%s", n, t);
    keys_unique(keys, n);
    px_free(copy);
    px_free(t);
}

/* A scrape in slices of a few bytes is the whole text, piece by piece. */
Test(info, prometheus_slices_add_up_to_the_whole)
{
    struct fixture f;
    struct metrics_text_cursor cur = { 0, 0 };
    struct buf whole, sliced;
    unsigned slices = 0;

    fixture_init(&f);
    buf_init(&whole);
    buf_init(&sliced);
    metrics_text_prometheus(&whole, &f.snap);
    while (!metrics_text_prometheus_rules(&cur, &sliced, 1, &f.m)) {
        slices++;
    }
    metrics_text_prometheus_rest(&sliced, &f.snap);
    /* The header and the first rule, the second rule, then the rest. */
    cr_assert_eq(slices, 2);
    cr_assert(sliced.len == whole.len &&
              memcmp(sliced.data, whole.data, whole.len) == 0);
    buf_free(&whole);
    buf_free(&sliced);
}
