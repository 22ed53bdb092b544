/* Unit tests of conf/: proxy.yaml loading, defaults, validation and the
 * exact file:line:column of every kind of error. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "conf/conf.h"
#include "tests/support/px_test.h"

/* After px_test.h: criterion.h must come before its parameterized.h. */
#include <criterion/parameterized.h>

PX_TEST_SUITE(conf);

#define ERRLEN 4096

#define EXAMPLE_FILE PX_SOURCE_DIR "/conf/proxy.example.yaml"

/* A case string that fills its array exactly compiles without its NUL. */
#define ASSERT_TERMINATED(a)                                                   \
    cr_assert_not_null(memchr((a), '\0', sizeof(a)), "case string too long")

/* Every key of proxy.yaml, as documented. */
static const char *const all_keys[] = {
    "listen",
    "upstream",
    "cluster",
    "upstream_user",
    "upstream_password",
    "limiter_user",
    "limiter_password",
    "requirepass",
    "admin_password",
    "upstream_password_file",
    "limiter_password_file",
    "admin_password_file",
    "requirepass_file",
    "limits_file",
    "key_prefix",
    "log_level",
    "store_down_policy",
    "connect_timeout_ms",
    "command_timeout_ms",
    "busy_reply_threshold_ms",
    "private_pool",
    "private_max_per_node",
    "max_clients",
    "upstream_pool",
    "max_pipeline",
    "max_bulk_bytes",
    "max_elements",
    "max_inline_bytes",
    "client_max_output_bytes",
    "commands",
    "embedded_max_keys",
    "limiter_wait_max_per_identity",
    "limiter_wait_max_total",
    "limiter_wait_max_ms",
    "limiter_shadow",
    "metrics_listen",
    "metrics_near_limit_ratio",
    "sentinel",
    "sentinel_master",
    "sentinel_user",
    "sentinel_password",
    "sentinel_tls",
};

/* Loads `yaml` over the defaults into `c`, naming it proxy.yaml. */
static int load(struct conf *c, const char *yaml, char *err)
{
    cr_assert_eq(conf_init(c), CONF_OK);
    return conf_load_string(c, "proxy.yaml", yaml, err, ERRLEN);
}

/* Loads `yaml`, expects it to be rejected with exactly `want` as the
 * error text, and frees everything. */
static void expect_error(const char *yaml, const char *want)
{
    struct conf c;
    char err[ERRLEN];

    cr_assert_eq(load(&c, yaml, err), CONF_ERR, "accepted: %s", yaml);
    cr_assert_str_eq(err, want, "for YAML:\n%s", yaml);
    conf_free(&c);
}

/* Fails unless the command policy of `c` is the default one. */
static void assert_default_commands(const struct conf *c)
{
    struct cmdpolicy want;

    cmdpolicy_init(&want);
    cr_assert_eq(memcmp(&c->commands, &want, sizeof(want)), 0,
                 "not the default command policy");
}

/* Fails unless `c` holds exactly the documented defaults. */
static void assert_defaults(const struct conf *c)
{
    cr_assert_str_eq(c->listen.host, "127.0.0.1");
    cr_assert_eq(c->listen.port, 7777);
    cr_assert_eq(c->upstream.port, 0);
    cr_assert_str_empty(c->upstream.host);
    cr_assert_eq(c->nseeds, 0);
    cr_assert_null(c->upstream_user);
    cr_assert_null(c->upstream_password);
    cr_assert_null(c->requirepass);
    cr_assert_null(c->admin_password);
    cr_assert_null(c->limits_file);
    cr_assert_str_eq(c->key_prefix, "cellgate:");
    cr_assert_eq(c->log_level, CONF_LOG_INFO);
    cr_assert_eq(c->store_down, CONF_FAIL_CLOSED);
    cr_assert_eq(c->connect_timeout_ms, 1000);
    cr_assert_eq(c->command_timeout_ms, 1000);
    cr_assert_eq(c->busy_reply_threshold_ms, 5000);
    cr_assert_eq(c->private_pool, 4);
    cr_assert_eq(c->private_max_per_node, 1000);
    cr_assert_eq(c->max_clients, 10000);
    cr_assert_eq(c->upstream_pool, 2);
    cr_assert_eq(c->max_pipeline, 1024);
    cr_assert_eq(c->max_bulk_bytes, 512ULL * 1024 * 1024);
    cr_assert_eq(c->max_elements, 1048576);
    cr_assert_eq(c->max_inline_bytes, 64ULL * 1024);
    cr_assert_eq(c->client_max_output_bytes, 64ULL * 1024 * 1024);
    assert_default_commands(c);
    cr_assert_eq(c->embedded_max_keys, 1000000);
    cr_assert_eq(c->limiter_wait_max_per_identity, 100);
    cr_assert_eq(c->limiter_wait_max_total, 10000);
    cr_assert_eq(c->limiter_wait_max_ms, 60000);
    cr_assert_eq(c->limiter_shadow, 0);
    cr_assert_eq(c->metrics_listen.port, 0);
    cr_assert(c->metrics_near_limit_ratio == 0.8);
}

/* ---------------- Defaults and the example file ---------------- */

Test(conf, metrics_keys_are_read)
{
    struct conf c;
    char err[ERRLEN];

    cr_assert_eq(load(&c,
                      "metrics_listen: 0.0.0.0:9121\n"
                      "metrics_near_limit_ratio: 0.95\n",
                      err),
                 CONF_OK, "%s", err);
    cr_assert_str_eq(c.metrics_listen.host, "0.0.0.0");
    cr_assert_eq(c.metrics_listen.port, 9121);
    cr_assert(c.metrics_near_limit_ratio == 0.95);
    conf_free(&c);
    cr_assert_eq(load(&c, "metrics_near_limit_ratio: 1\n", err), CONF_OK);
    cr_assert(c.metrics_near_limit_ratio == 1.0);
    conf_free(&c);
}

Test(conf, init_sets_the_documented_defaults)
{
    struct conf c;

    cr_assert_eq(conf_init(&c), CONF_OK);
    assert_defaults(&c);
    conf_free(&c);
}

Test(conf, example_file_loads_and_every_value_is_the_default)
{
    struct conf c;
    char err[ERRLEN];

    /* Start from zeros, not defaults, so that every default must come from
     * the file itself (except the fields whose default is zero or NULL). */
    memset(&c, 0, sizeof(c));
    c.log_level = CONF_LOG_ERROR;
    c.store_down = CONF_FAIL_OPEN;
    cmdpolicy_init(&c.commands); /* the example shows rules commented out */
    cr_assert_eq(conf_load_file(&c, EXAMPLE_FILE, err, sizeof(err)), CONF_OK,
                 "%s", err);
    cr_assert_str_empty(err);
    assert_defaults(&c);
    conf_free(&c);
}

Test(conf, example_file_mentions_every_key)
{
    FILE *f = fopen(EXAMPLE_FILE, "r");
    static char text[16384];
    char needle[64];
    size_t n, i;

    cr_assert_not_null(f);
    n = fread(text, 1, sizeof(text) - 1, f);
    fclose(f);
    text[n] = '\0';
    for (i = 0; i < sizeof(all_keys) / sizeof(all_keys[0]); i++) {
        snprintf(needle, sizeof(needle), "\n%s:", all_keys[i]);
        if (strstr(text, needle) == NULL) {
            snprintf(needle, sizeof(needle), "\n# %s:", all_keys[i]);
            cr_expect_not_null(strstr(text, needle), "missing key %s",
                               all_keys[i]);
        }
    }
}

Test(conf, empty_file_and_comments_only_keep_the_defaults)
{
    static const char *const texts[] = { "", "\n\n", "# nothing here\n",
                                         "---\n", "# a\n---\n# b\n" };
    struct conf c;
    char err[ERRLEN];
    size_t i;

    for (i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
        cr_assert_eq(load(&c, texts[i], err), CONF_OK, "%s", err);
        assert_defaults(&c);
        conf_free(&c);
    }
}

/* ---------------- Each key ---------------- */

Test(conf, every_key_is_parsed)
{
    static const char yaml[] = "listen: 0.0.0.0:6380\n"
                               "upstream: \"[::1]:6379\"\n"
                               "upstream_user: app\n"
                               "upstream_password: s3cret\n"
                               "requirepass: 'client pass'\n"
                               "admin_password: adminpass\n"
                               "limits_file: /etc/cellgate/limits.yaml\n"
                               "key_prefix: \"rl:\"\n"
                               "log_level: debug\n"
                               "store_down_policy: fail_open\n"
                               "connect_timeout_ms: 250\n"
                               "command_timeout_ms: 0\n"
                               "max_clients: 5\n"
                               "private_max_per_node: 3\n"
                               "upstream_pool: 64\n"
                               "max_pipeline: 7\n"
                               "max_bulk_bytes: 1mb\n"
                               "max_elements: 100\n"
                               "max_inline_bytes: 4096\n"
                               "client_max_output_bytes: 2gb\n"
                               "limiter_shadow: yes\n";
    struct conf c;
    char err[ERRLEN];

    cr_assert_eq(load(&c, yaml, err), CONF_OK, "%s", err);
    cr_assert_str_eq(c.listen.host, "0.0.0.0");
    cr_assert_eq(c.listen.port, 6380);
    cr_assert_str_eq(c.upstream.host, "::1");
    cr_assert_eq(c.upstream.port, 6379);
    cr_assert_eq(c.nseeds, 0);
    cr_assert_str_eq(c.upstream_user, "app");
    cr_assert_str_eq(c.upstream_password, "s3cret");
    cr_assert_str_eq(c.requirepass, "client pass");
    cr_assert_str_eq(c.admin_password, "adminpass");
    cr_assert_str_eq(c.limits_file, "/etc/cellgate/limits.yaml");
    cr_assert_str_eq(c.key_prefix, "rl:");
    cr_assert_eq(c.log_level, CONF_LOG_DEBUG);
    cr_assert_eq(c.store_down, CONF_FAIL_OPEN);
    cr_assert_eq(c.connect_timeout_ms, 250);
    cr_assert_eq(c.command_timeout_ms, 0);
    cr_assert_eq(c.max_clients, 5);
    cr_assert_eq(c.private_max_per_node, 3);
    cr_assert_eq(c.upstream_pool, 64);
    cr_assert_eq(c.max_pipeline, 7);
    cr_assert_eq(c.max_bulk_bytes, 1024ULL * 1024);
    cr_assert_eq(c.max_elements, 100);
    cr_assert_eq(c.max_inline_bytes, 4096);
    cr_assert_eq(c.client_max_output_bytes, 2ULL * 1024 * 1024 * 1024);
    cr_assert_eq(c.limiter_shadow, 1);
    conf_free(&c);
}

Test(conf, commands_take_a_string_or_a_list_applied_after_the_default)
{
    static const char *const texts[] = {
        "commands: +flushall -get\n",
        "commands:\n  - +flushall\n  - -get\n",
        "commands: [\"+flushall\", \"-get\"]\n",
        "commands:\n  - +flushall -get\n",
    };
    struct conf c;
    char err[ERRLEN];
    size_t i;

    for (i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
        cr_assert_eq(load(&c, texts[i], err), CONF_OK, "%s", err);
        cr_assert(cmdpolicy_allows(&c.commands, "FLUSHALL", 8, NULL, 0));
        cr_assert_not(cmdpolicy_allows(&c.commands, "get", 3, "k", 1));
        /* The rest of the default stays. */
        cr_assert_not(cmdpolicy_allows(&c.commands, "config", 6, "set", 3));
        cr_assert(cmdpolicy_allows(&c.commands, "set", 3, "k", 1));
        conf_free(&c);
    }
    cr_assert_eq(load(&c, "commands:\n", err), CONF_OK, "%s", err);
    assert_default_commands(&c);
    conf_free(&c);
    /* A bad rule leaves the policy as it was, good rules included. */
    cr_assert_eq(load(&c, "commands: +flushall +nosuch\n", err), CONF_ERR);
    assert_default_commands(&c);
    conf_free(&c);
}

Test(conf, cluster_accepts_a_sequence)
{
    static const char yaml[] = "cluster:\n"
                               "  - 10.0.0.1:7000\n"
                               "  - \"[fe80::1]:7001\"\n"
                               "  - redis-3:7002\n";
    struct conf c;
    char err[ERRLEN];

    cr_assert_eq(load(&c, yaml, err), CONF_OK, "%s", err);
    cr_assert_eq(c.nseeds, 3);
    cr_assert_str_eq(c.seeds[0].host, "10.0.0.1");
    cr_assert_eq(c.seeds[0].port, 7000);
    cr_assert_str_eq(c.seeds[1].host, "fe80::1");
    cr_assert_eq(c.seeds[1].port, 7001);
    cr_assert_str_eq(c.seeds[2].host, "redis-3");
    cr_assert_eq(c.seeds[2].port, 7002);
    cr_assert_eq(c.upstream.port, 0);
    conf_free(&c);
}

Test(conf, cluster_accepts_a_comma_separated_string)
{
    struct conf c;
    char err[ERRLEN];

    cr_assert_eq(load(&c, "cluster: a:1, b:2 ,c:3\n", err), CONF_OK, "%s", err);
    cr_assert_eq(c.nseeds, 3);
    cr_assert_str_eq(c.seeds[0].host, "a");
    cr_assert_str_eq(c.seeds[1].host, "b");
    cr_assert_eq(c.seeds[1].port, 2);
    cr_assert_str_eq(c.seeds[2].host, "c");
    cr_assert_eq(c.seeds[2].port, 3);
    conf_free(&c);
}

Test(conf, enum_values_are_case_insensitive)
{
    struct conf c;
    char err[ERRLEN];

    cr_assert_eq(
        load(&c, "log_level: WARN\nstore_down_policy: Fail_Open\n", err),
        CONF_OK, "%s", err);
    cr_assert_eq(c.log_level, CONF_LOG_WARN);
    cr_assert_eq(c.store_down, CONF_FAIL_OPEN);
    conf_free(&c);
}

Test(conf, null_or_empty_value_clears_an_optional_string)
{
    struct conf c;
    char err[ERRLEN];

    cr_assert_eq(load(&c, "requirepass: x\nlimits_file: l.yaml\n", err),
                 CONF_OK, "%s", err);
    cr_assert_str_eq(c.requirepass, "x");
    cr_assert_eq(conf_load_string(&c, "p", "requirepass:\nlimits_file: ''\n",
                                  err, sizeof(err)),
                 CONF_OK, "%s", err);
    cr_assert_null(c.requirepass);
    cr_assert_null(c.limits_file);
    conf_free(&c);
}

Test(conf, a_second_load_overlays_only_the_keys_it_names)
{
    struct conf c;
    char err[ERRLEN];

    cr_assert_eq(load(&c, "max_clients: 5\nkey_prefix: a:b\n", err), CONF_OK,
                 "%s", err);
    cr_assert_eq(
        conf_load_string(&c, "p", "key_prefix: other\n", err, sizeof(err)),
        CONF_OK, "%s", err);
    cr_assert_eq(c.max_clients, 5);
    cr_assert_str_eq(c.key_prefix, "other");
    conf_free(&c);
}

/* ---------------- Sizes ---------------- */

/* Criterion copies parameters into the worker process, so case tables hold
 * their strings inline: a pointer to a literal would not survive the copy. */

struct size_case {
    char text[32];            /* value of max_bulk_bytes, quoted */
    int rc;                   /* expected load result */
    unsigned long long bytes; /* expected value when CONF_OK */
};

ParameterizedTestParameters(conf, sizes_accept_redis_suffixes)
{
    static struct size_case cases[] = {
        { "1", CONF_OK, 1ULL },
        { "1024", CONF_OK, 1024ULL },
        { "10b", CONF_OK, 10ULL },
        { "10B", CONF_OK, 10ULL },
        { "1k", CONF_OK, 1000ULL },
        { "64kb", CONF_OK, 65536ULL },
        { "64KB", CONF_OK, 65536ULL },
        { "64Kb", CONF_OK, 65536ULL },
        { "2m", CONF_OK, 2000000ULL },
        { "512mb", CONF_OK, 512ULL * 1024 * 1024 },
        { "512MB", CONF_OK, 512ULL * 1024 * 1024 },
        { "3g", CONF_OK, 3000000000ULL },
        { "1gb", CONF_OK, 1024ULL * 1024 * 1024 },
        { "16GB", CONF_OK, 16ULL * 1024 * 1024 * 1024 },
        { "18446744073709551615", CONF_OK, 18446744073709551615ULL },
        { "", CONF_ERR, 0 },
        { "kb", CONF_ERR, 0 },
        { "0", CONF_ERR, 0 },
        { "0kb", CONF_ERR, 0 },
        { "-1", CONF_ERR, 0 },
        { "+1", CONF_ERR, 0 },
        { "1.5mb", CONF_ERR, 0 },
        { "1 kb", CONF_ERR, 0 },
        { " 1", CONF_ERR, 0 },
        { "1tb", CONF_ERR, 0 },
        { "1kbb", CONF_ERR, 0 },
        { "0x10", CONF_ERR, 0 },
        { "18446744073709551616", CONF_ERR, 0 },
        { "17179869184gb", CONF_ERR, 0 },
    };

    return cr_make_param_array(struct size_case, cases,
                               sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct size_case *tc, conf, sizes_accept_redis_suffixes)
{
    struct conf c;
    char yaml[128], err[ERRLEN];
    int rc;

    ASSERT_TERMINATED(tc->text);
    snprintf(yaml, sizeof(yaml), "max_bulk_bytes: \"%s\"\n", tc->text);
    rc = load(&c, yaml, err);
    cr_assert_eq(rc, tc->rc, "\"%s\": rc %d, err %s", tc->text, rc, err);
    if (tc->rc == CONF_OK) {
        cr_assert_eq(c.max_bulk_bytes, tc->bytes, "\"%s\": got %llu", tc->text,
                     c.max_bulk_bytes);
    }
    conf_free(&c);
}

/* ---------------- Errors, one kind at a time ---------------- */

struct error_case {
    char yaml[192]; /* the whole file */
    char err[160];  /* the exact error text */
};

ParameterizedTestParameters(conf, each_error_names_file_line_and_column)
{
    static struct error_case cases[] = {
        /* The example of the brief: the value of line 7 at column 14. */
        { "# 1\n# 2\n# 3\n\n# 5\nlisten: 127.0.0.1:1\nmax_clients: lots\n",
          "proxy.yaml:7:14: max_clients: expected a positive integer, got "
          "\"lots\"" },
        { "max_clients: 0\n",
          "proxy.yaml:1:14: max_clients: expected a positive integer, got "
          "\"0\"" },
        { "max_clients: -1\n",
          "proxy.yaml:1:14: max_clients: expected a positive integer, got "
          "\"-1\"" },
        { "max_clients: 4294967296\n",
          "proxy.yaml:1:14: max_clients: \"4294967296\" is too large (max "
          "4294967295)" },
        { "max_clients:\n",
          "proxy.yaml:1:13: max_clients: expected a positive integer, got "
          "\"\"" },
        { "connect_timeout_ms: 0\n",
          "proxy.yaml:1:21: connect_timeout_ms: expected a positive integer, "
          "got \"0\"" },
        { "command_timeout_ms: 1.5\n",
          "proxy.yaml:1:21: command_timeout_ms: expected a non-negative "
          "integer, got \"1.5\"" },
        { "upstream_pool: 0\n",
          "proxy.yaml:1:16: upstream_pool: expected an integer from 1 to 64, "
          "got \"0\"" },
        { "private_max_per_node: 0\n",
          "proxy.yaml:1:23: private_max_per_node: expected an integer from 1 "
          "to 1000000, got \"0\"" },
        { "upstream_pool: 65\n",
          "proxy.yaml:1:16: upstream_pool: \"65\" is too large (max 64)" },
        { "max_pipeline: 1e3\n",
          "proxy.yaml:1:15: max_pipeline: expected a positive integer, got "
          "\"1e3\"" },
        { "max_elements: 1kb\n",
          "proxy.yaml:1:15: max_elements: expected a positive integer, got "
          "\"1kb\"" },
        { "max_bulk_bytes: 1tb\n",
          "proxy.yaml:1:17: max_bulk_bytes: expected a positive size such as "
          "65536, 64kb or 512mb, got \"1tb\"" },
        { "max_inline_bytes: 99999999999gb\n",
          "proxy.yaml:1:19: max_inline_bytes: \"99999999999gb\" is too large "
          "(max 18446744073709551615)" },
        { "client_max_output_bytes: [1]\n",
          "proxy.yaml:1:26: client_max_output_bytes: expected a positive size "
          "such as 65536, 64kb or 512mb, got a sequence" },
        { "limiter_shadow: maybe\n",
          "proxy.yaml:1:17: limiter_shadow: expected yes or no, got "
          "\"maybe\"" },
        { "embedded_max_keys: 99\n",
          "proxy.yaml:1:20: embedded_max_keys: expected an integer of at "
          "least 100, got \"99\"" },
        { "metrics_near_limit_ratio: 0\n",
          "proxy.yaml:1:27: metrics_near_limit_ratio: expected a decimal "
          "number above 0 and at most 1, such as 0.8, got \"0\"" },
        { "metrics_near_limit_ratio: 1.5\n",
          "proxy.yaml:1:27: metrics_near_limit_ratio: expected a decimal "
          "number above 0 and at most 1, such as 0.8, got \"1.5\"" },
        { "metrics_near_limit_ratio: 1e-1\n",
          "proxy.yaml:1:27: metrics_near_limit_ratio: expected a decimal "
          "number above 0 and at most 1, such as 0.8, got \"1e-1\"" },
        { "metrics_near_limit_ratio: nan\n",
          "proxy.yaml:1:27: metrics_near_limit_ratio: expected a decimal "
          "number above 0 and at most 1, such as 0.8, got \"nan\"" },
        { "metrics_listen: \"nohost\"\n",
          "proxy.yaml:1:17: metrics_listen: expected host:port, got "
          "\"nohost\"" },
        { "limiter_wait_max_total: -1\n",
          "proxy.yaml:1:25: limiter_wait_max_total: expected a non-negative "
          "integer, got \"-1\"" },
        { "limiter_wait_max_ms: 3600001\n",
          "proxy.yaml:1:22: limiter_wait_max_ms: \"3600001\" is too large "
          "(max 3600000)" },
        /* An empty admin password must not silently mean "no admin". */
        { "admin_password: \"\"\n",
          "proxy.yaml:1:17: admin_password: expected a non-empty string "
          "(leave the key out to turn limiter administration off), got "
          "\"\"" },
        { "admin_password:\n",
          "proxy.yaml:1:16: admin_password: expected a non-empty string "
          "(leave the key out to turn limiter administration off), got "
          "\"\"" },
        { "listen: \"host:\"\n",
          "proxy.yaml:1:9: listen: expected host:port or off, got \"host:\"" },
        { "listen:\n  host: a\n",
          "proxy.yaml:2:3: listen: expected host:port or off, got a mapping" },
        { "upstream: host:12ab\n",
          "proxy.yaml:1:11: upstream: expected host:port, got \"host:12ab\"" },
        { "max_clients: 5\ncommands: +flushall -nosuch\n",
          "proxy.yaml:2:11: commands: unknown command \"-nosuch\"" },
        { "commands:\n  - +get\n  - \"+@nosuch\"\n",
          "proxy.yaml:3:5: commands: unknown category \"+@nosuch\"" },
        { "commands:\n  - flushall\n",
          "proxy.yaml:2:5: commands: expected +command, -command, "
          "+@category, -@category, allcommands or nocommands \"flushall\"" },
        { "commands:\n  a: b\n",
          "proxy.yaml:2:3: commands: expected a string of rules, got a "
          "mapping" },
        { "log_level: verbose\n",
          "proxy.yaml:1:12: log_level: expected debug, info, warn or error, "
          "got \"verbose\"" },
        { "store_down_policy: maybe\n",
          "proxy.yaml:1:20: store_down_policy: expected fail_closed or "
          "fail_open, got \"maybe\"" },
        { "key_prefix: \"\"\n",
          "proxy.yaml:1:13: key_prefix: expected a non-empty string, got "
          "\"\"" },
        { "key_prefix: ~\n",
          "proxy.yaml:1:13: key_prefix: expected a non-empty string, got "
          "\"~\"" },
        { "requirepass: [a, b]\n",
          "proxy.yaml:1:14: requirepass: expected a string, got a sequence" },
        { "requirepass: \"a\\0b\"\n",
          "proxy.yaml:1:14: requirepass: the value contains a NUL byte" },
        { "cluster: []\n",
          "proxy.yaml:1:10: cluster: expected at least one host:port" },
        { "cluster: \" \"\n",
          "proxy.yaml:1:10: cluster: expected at least one host:port" },
        { "cluster:\n  - a:1\n  - bad\n",
          "proxy.yaml:3:5: cluster: expected host:port, got \"bad\"" },
        { "cluster:\n  - a:1\n  - [b:2]\n",
          "proxy.yaml:3:5: cluster: expected host:port, got a sequence" },
        { "cluster: a:1, bad ,c:3\n",
          "proxy.yaml:1:10: cluster: expected host:port, got \"bad\"" },
        { "cluster: a:1,\n",
          "proxy.yaml:1:10: cluster: expected host:port, got \"\"" },
        { "cluster: {a: 1}\n",
          "proxy.yaml:1:10: cluster: expected a list of host:port, got a "
          "mapping" },
        { "cluster: [a:1, a:2, a:3, a:4, a:5, a:6, a:7, a:8, a:9, a:10, a:11, "
          "a:12, a:13, a:14, a:15, a:16, a:17]\n",
          "proxy.yaml:1:10: cluster: at most 16 seeds are allowed, got 17" },
        { "cluster: a:1,a:2,a:3,a:4,a:5,a:6,a:7,a:8,a:9,a:10,a:11,a:12,a:13,"
          "a:14,a:15,a:16,a:17\n",
          "proxy.yaml:1:10: cluster: at most 16 seeds are allowed" },
        { "log_level: info\nfoo: 1\n", "proxy.yaml:2:1: unknown key 'foo'" },
        { "Listen: 127.0.0.1:1\n", "proxy.yaml:1:1: unknown key 'Listen'" },
        { "max_clients: 1\n\nmax_clients: 2\n",
          "proxy.yaml:3:1: duplicate key 'max_clients' (first at line 1)" },
        { "? [a]\n: 1\n", "proxy.yaml:1:3: expected a scalar key, got a "
                          "sequence" },
        { "upstream: a:1\ncluster: b:2\n",
          "proxy.yaml:2:1: upstream and cluster are mutually exclusive" },
        { "cluster: [b:2]\nlog_level: info\nupstream: a:1\n",
          "proxy.yaml:3:1: upstream and cluster are mutually exclusive" },
        { "- listen\n",
          "proxy.yaml:1:1: top level: expected a mapping, got a sequence" },
        { "\n  hello\n",
          "proxy.yaml:2:3: top level: expected a mapping, got a scalar" },
        { "log_level: info\n---\nlog_level: warn\n",
          "proxy.yaml:3:1: only one YAML document is allowed" },
    };

    return cr_make_param_array(struct error_case, cases,
                               sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct error_case *tc, conf,
                  each_error_names_file_line_and_column)
{
    ASSERT_TERMINATED(tc->yaml);
    ASSERT_TERMINATED(tc->err);
    expect_error(tc->yaml, tc->err);
}

Test(conf, every_error_of_the_file_is_reported_one_per_line)
{
    static const char yaml[] = "listen: nowhere\n"
                               "max_clients: lots\n"
                               "log_level: info\n"
                               "bogus: 1\n"
                               "upstream_pool: 100\n"
                               "log_level: warn\n"
                               "upstream: a:1\n"
                               "cluster: [b:2, c]\n";

    expect_error(
        yaml,
        "proxy.yaml:1:9: listen: expected host:port or off, got \"nowhere\"\n"
        "proxy.yaml:2:14: max_clients: expected a positive integer, "
        "got \"lots\"\n"
        "proxy.yaml:4:1: unknown key 'bogus'\n"
        "proxy.yaml:5:16: upstream_pool: \"100\" is too large (max "
        "64)\n"
        "proxy.yaml:6:1: duplicate key 'log_level' (first at line "
        "3)\n"
        "proxy.yaml:8:16: cluster: expected host:port, got \"c\"\n"
        "proxy.yaml:8:1: upstream and cluster are mutually exclusive");
}

Test(conf, valid_keys_still_apply_when_others_fail)
{
    struct conf c;
    char err[ERRLEN];

    cr_assert_eq(load(&c, "max_clients: x\nmax_pipeline: 9\n", err), CONF_ERR);
    cr_assert_eq(c.max_pipeline, 9);
    cr_assert_eq(c.max_clients, 10000);
    conf_free(&c);
}

/* ---------------- YAML syntax errors ---------------- */

Test(conf, syntax_error_gives_its_position_and_the_libyaml_problem)
{
    expect_error("listen: 127.0.0.1:1\nkey_prefix: cellgate: x\n",
                 "proxy.yaml:2:21: mapping values are not allowed in this "
                 "context");
    expect_error("log_level: info\ncluster: [a:1, b:2\n",
                 "proxy.yaml:3:1: did not find expected ',' or ']' (while "
                 "parsing a flow sequence at line 2, column 10)");
    expect_error("requirepass: 'open\n",
                 "proxy.yaml:2:1: found unexpected end of stream (while "
                 "scanning a quoted scalar at line 1, column 14)");
    expect_error("max_clients: *nowhere\n",
                 "proxy.yaml:1:14: found undefined alias");
}

Test(conf, invalid_encoding_is_reported_at_its_line_and_column)
{
    expect_error("log_level: info\nkey_prefix: a\001b\n",
                 "proxy.yaml:2:14: control characters are not allowed (byte "
                 "0x01)");
    expect_error("key_prefix: \xff\n",
                 "proxy.yaml:1:13: invalid leading UTF-8 octet (byte 0xff)");
}

Test(conf, syntax_error_in_a_second_document_is_reported)
{
    expect_error("log_level: info\n---\nkey_prefix: a: b\n",
                 "proxy.yaml:3:14: mapping values are not allowed in this "
                 "context");
}

/* ---------------- The error buffer ---------------- */

Test(conf, a_small_error_buffer_is_truncated_and_terminated)
{
    static const char yaml[] = "max_clients: lots\nbogus: 1\n";
    struct conf c;
    char full[ERRLEN], small[16];

    cr_assert_eq(load(&c, yaml, full), CONF_ERR);
    memset(small, 'x', sizeof(small));
    cr_assert_eq(conf_load_string(&c, "proxy.yaml", yaml, small, sizeof(small)),
                 CONF_ERR);
    cr_assert_eq(strlen(small), sizeof(small) - 1);
    cr_assert_eq(strncmp(small, full, sizeof(small) - 1), 0);
    cr_assert_eq(conf_load_string(&c, "proxy.yaml", yaml, small, 1), CONF_ERR);
    cr_assert_str_empty(small);
    cr_assert_eq(conf_load_string(&c, "proxy.yaml", yaml, NULL, 0), CONF_ERR);
    conf_free(&c);
}

Test(conf, long_values_are_cut_in_messages)
{
    char yaml[512], want[512], value[201];

    memset(value, 'v', 200);
    value[200] = '\0';
    snprintf(yaml, sizeof(yaml), "log_level: %s\n", value);
    snprintf(want, sizeof(want),
             "proxy.yaml:1:12: log_level: expected debug, info, warn or "
             "error, got \"%.64s...\"",
             value);
    expect_error(yaml, want);
}

Test(conf, an_error_clears_a_previous_message)
{
    struct conf c;
    char err[ERRLEN];

    cr_assert_eq(load(&c, "bogus: 1\n", err), CONF_ERR);
    cr_assert_eq(
        conf_load_string(&c, "p", "log_level: warn\n", err, sizeof(err)),
        CONF_OK);
    cr_assert_str_empty(err);
    conf_free(&c);
}

/* ---------------- Files ---------------- */

Test(conf, missing_file_names_the_path_and_the_system_error)
{
    static const char path[] = PX_SOURCE_DIR "/conf/no-such-file.yaml";
    struct conf c;
    char err[ERRLEN], want[ERRLEN];

    cr_assert_eq(conf_init(&c), CONF_OK);
    cr_assert_eq(conf_load_file(&c, path, err, sizeof(err)), CONF_ERR);
    snprintf(want, sizeof(want), "%s: cannot open: %s", path, strerror(ENOENT));
    cr_assert_str_eq(err, want);
    assert_defaults(&c);
    conf_free(&c);
}

Test(conf, directory_instead_of_file_is_a_read_error)
{
    static const char path[] = PX_SOURCE_DIR "/conf";
    struct conf c;
    char err[ERRLEN], want[ERRLEN];

    cr_assert_eq(conf_init(&c), CONF_OK);
    cr_assert_eq(conf_load_file(&c, path, err, sizeof(err)), CONF_ERR);
    snprintf(want, sizeof(want), "%s: cannot read: %s", path, strerror(EISDIR));
    cr_assert_str_eq(err, want);
    conf_free(&c);
}

Test(conf, endless_file_is_refused_past_the_size_cap)
{
    struct conf c;
    char err[ERRLEN];

    cr_assert_eq(conf_init(&c), CONF_OK);
    cr_assert_eq(conf_load_file(&c, "/dev/zero", err, sizeof(err)), CONF_ERR);
    cr_assert_str_eq(err, "/dev/zero: file larger than 1048576 bytes");
    conf_free(&c);
}

/* ---------------- conf_parse_addr ---------------- */

struct addr_case {
    char text[32]; /* input */
    int rc;        /* expected result */
    char host[32]; /* expected host when CONF_OK */
    int port;      /* expected port when CONF_OK */
};

ParameterizedTestParameters(conf, parse_addr_accepts_host_port_only)
{
    static struct addr_case cases[] = {
        { "127.0.0.1:7777", CONF_OK, "127.0.0.1", 7777 },
        { "localhost:6379", CONF_OK, "localhost", 6379 },
        { "redis.example.com:1", CONF_OK, "redis.example.com", 1 },
        { "h:65535", CONF_OK, "h", 65535 },
        { "h:080", CONF_OK, "h", 80 },
        { "[::1]:6379", CONF_OK, "::1", 6379 },
        { "[fe80::1%eth0]:7000", CONF_OK, "fe80::1%eth0", 7000 },
        { "[2001:db8::2]:1", CONF_OK, "2001:db8::2", 1 },
        { "", CONF_ERR, "", 0 },
        { "host", CONF_ERR, "", 0 },
        { "host:", CONF_ERR, "", 0 },
        { ":80", CONF_ERR, "", 0 },
        { "host:0", CONF_ERR, "", 0 },
        { "host:65536", CONF_ERR, "", 0 },
        { "host:99999", CONF_ERR, "", 0 },
        { "host:123456", CONF_ERR, "", 0 },
        { "host:12ab", CONF_ERR, "", 0 },
        { "host:-1", CONF_ERR, "", 0 },
        { "host:+80", CONF_ERR, "", 0 },
        { "host: 80", CONF_ERR, "", 0 },
        { "host:80 ", CONF_ERR, "", 0 },
        { "host:6379:1", CONF_ERR, "", 0 },
        { "a b:80", CONF_ERR, "", 0 },
        { " host:80", CONF_ERR, "", 0 },
        { "a,b:80", CONF_ERR, "", 0 },
        { "::1:80", CONF_ERR, "", 0 },
        { "[::1]", CONF_ERR, "", 0 },
        { "[::1]80", CONF_ERR, "", 0 },
        { "[::1]:", CONF_ERR, "", 0 },
        { "[::1:80", CONF_ERR, "", 0 },
        { "[]:80", CONF_ERR, "", 0 },
        { "[[::1]]:80", CONF_ERR, "", 0 },
        { "[::1]x:80", CONF_ERR, "", 0 },
    };

    return cr_make_param_array(struct addr_case, cases,
                               sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct addr_case *tc, conf, parse_addr_accepts_host_port_only)
{
    struct conf_addr a = { .host = "unchanged", .port = 42 };
    int rc;

    ASSERT_TERMINATED(tc->text);
    ASSERT_TERMINATED(tc->host);
    rc = conf_parse_addr(tc->text, &a);
    cr_assert_eq(rc, tc->rc, "\"%s\": rc %d", tc->text, rc);
    if (tc->rc == CONF_OK) {
        cr_assert_str_eq(a.host, tc->host, "\"%s\"", tc->text);
        cr_assert_eq(a.port, tc->port, "\"%s\"", tc->text);
    } else {
        cr_assert_str_eq(a.host, "unchanged", "\"%s\"", tc->text);
        cr_assert_eq(a.port, 42, "\"%s\"", tc->text);
    }
}

Test(conf, parse_addr_limits_the_host_to_255_bytes)
{
    char text[300];
    struct conf_addr a;

    memset(text, 'h', 255);
    memcpy(text + 255, ":1", 3);
    cr_assert_eq(conf_parse_addr(text, &a), CONF_OK);
    cr_assert_eq(strlen(a.host), 255);
    memset(text, 'h', 256);
    memcpy(text + 256, ":1", 3);
    cr_assert_eq(conf_parse_addr(text, &a), CONF_ERR);
    cr_assert_eq(conf_parse_addr(NULL, &a), CONF_ERR);
}

/* ---------------- conf_parse_seeds ---------------- */

Test(conf, parse_seeds_splits_on_commas_and_trims_blanks)
{
    struct conf c;

    cr_assert_eq(conf_init(&c), CONF_OK);
    cr_assert_eq(conf_parse_seeds(&c, "a:1"), CONF_OK);
    cr_assert_eq(c.nseeds, 1);
    cr_assert_str_eq(c.seeds[0].host, "a");
    cr_assert_eq(conf_parse_seeds(&c, " a:1 ,\tb:2,[::1]:3 "), CONF_OK);
    cr_assert_eq(c.nseeds, 3);
    cr_assert_str_eq(c.seeds[0].host, "a");
    cr_assert_eq(c.seeds[0].port, 1);
    cr_assert_str_eq(c.seeds[1].host, "b");
    cr_assert_eq(c.seeds[1].port, 2);
    cr_assert_str_eq(c.seeds[2].host, "::1");
    cr_assert_eq(c.seeds[2].port, 3);
    conf_free(&c);
}

Test(conf, parse_seeds_rejects_bad_lists_and_keeps_the_old_seeds)
{
    static const char *const bad[] = {
        "",         " ",       ",",       "a:1,",    ",a:1",
        "a:1,,b:2", "a:1,bad", "a:1 b:2", "a:1,b:0",
    };
    struct conf c;
    size_t i;

    cr_assert_eq(conf_init(&c), CONF_OK);
    cr_assert_eq(conf_parse_seeds(&c, "keep:1"), CONF_OK);
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        cr_assert_eq(conf_parse_seeds(&c, bad[i]), CONF_ERR, "\"%s\"", bad[i]);
        cr_assert_eq(c.nseeds, 1, "\"%s\"", bad[i]);
        cr_assert_str_eq(c.seeds[0].host, "keep", "\"%s\"", bad[i]);
    }
    cr_assert_eq(conf_parse_seeds(&c, NULL), CONF_ERR);
    conf_free(&c);
}

Test(conf, parse_seeds_accepts_at_most_the_maximum)
{
    char list[CONF_MAX_SEEDS * 8 + 16];
    size_t len = 0;
    struct conf c;
    int i;

    cr_assert_eq(conf_init(&c), CONF_OK);
    for (i = 0; i < CONF_MAX_SEEDS; i++) {
        len += (size_t)snprintf(list + len, sizeof(list) - len, "%sh:%d",
                                i > 0 ? "," : "", i + 1);
    }
    cr_assert_eq(conf_parse_seeds(&c, list), CONF_OK);
    cr_assert_eq(c.nseeds, CONF_MAX_SEEDS);
    cr_assert_eq(c.seeds[CONF_MAX_SEEDS - 1].port, CONF_MAX_SEEDS);
    snprintf(list + len, sizeof(list) - len, ",h:99");
    cr_assert_eq(conf_parse_seeds(&c, list), CONF_ERR);
    cr_assert_eq(c.nseeds, CONF_MAX_SEEDS);
    conf_free(&c);
}

/* ---------------- Small helpers ---------------- */

Test(conf, set_str_copies_and_null_clears)
{
    char buf[] = "abc";
    char *field = NULL;

    cr_assert_eq(conf_set_str(&field, buf), CONF_OK);
    buf[0] = 'x';
    cr_assert_str_eq(field, "abc");
    cr_assert_eq(conf_set_str(&field, "def"), CONF_OK);
    cr_assert_str_eq(field, "def");
    cr_assert_eq(conf_set_str(&field, NULL), CONF_OK);
    cr_assert_null(field);
}

Test(conf, log_level_parse_maps_names_and_rejects_others)
{
    cr_assert_eq(conf_log_level_parse("debug"), CONF_LOG_DEBUG);
    cr_assert_eq(conf_log_level_parse("info"), CONF_LOG_INFO);
    cr_assert_eq(conf_log_level_parse("warn"), CONF_LOG_WARN);
    cr_assert_eq(conf_log_level_parse("error"), CONF_LOG_ERROR);
    cr_assert_eq(conf_log_level_parse("ERROR"), CONF_LOG_ERROR);
    cr_assert_eq(conf_log_level_parse("verbose"), -1);
    cr_assert_eq(conf_log_level_parse(""), -1);
    cr_assert_eq(conf_log_level_parse("info "), -1);
    cr_assert_eq(conf_log_level_parse(NULL), -1);
}

Test(conf, free_is_safe_on_a_zeroed_struct_and_twice)
{
    struct conf c;
    char err[ERRLEN];

    memset(&c, 0, sizeof(c));
    conf_free(&c);
    cr_assert_eq(load(&c,
                      "requirepass: a\nadmin_password: b\n"
                      "upstream_user: u\nupstream_password: p\n"
                      "limits_file: l\n",
                      err),
                 CONF_OK, "%s", err);
    conf_free(&c);
    cr_assert_null(c.key_prefix);
    cr_assert_null(c.requirepass);
    cr_assert_null(c.admin_password);
    cr_assert_null(c.upstream_user);
    cr_assert_null(c.upstream_password);
    cr_assert_null(c.limits_file);
    conf_free(&c);
}
