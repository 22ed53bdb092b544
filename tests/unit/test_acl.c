/* Unit tests of conf/acl and cmdpolicy_acl_rules: the client user's key
 * patterns for a prefix (escaped for Redis's glob, quoted for redis-cli),
 * the two ACL SETUSER lines, and the command policy written as ACL rules
 * that, applied again, give the same policy. Redis's own verdict on the
 * patterns is tested in it_acl. */
#include <stdlib.h>
#include <string.h>

#include "conf/acl.h"
#include "conf/cmdpolicy.h"
#include "conf/conf.h"
#include "tests/support/px_test.h"

PX_TEST_SUITE(acl);

/* acl_client_keys of `prefix`, asserting the length it announces. */
static void check_keys(const char *prefix, const char *want)
{
    char out[1024];
    size_t n = acl_client_keys(prefix, strlen(prefix), out, sizeof(out));

    cr_assert_str_eq(out, want);
    cr_assert_eq(n, strlen(want));
    /* Too small a buffer: truncated, NUL-terminated, same length. */
    cr_assert_eq(acl_client_keys(prefix, strlen(prefix), out, 5), n);
    cr_assert_eq(strlen(out), 4);
}

Test(acl, keys_of_a_plain_prefix)
{
    check_keys("cg:", "~[^c]* ~c[^g]* ~cg[^:]* ~ ~c ~cg");
    check_keys("x", "~[^x]* ~");
}

Test(acl, glob_characters_are_escaped)
{
    /* Outside a class *?[]\ take a backslash, inside \]^-[ do; a token
     * with a backslash or a quote goes in double quotes for redis-cli. */
    check_keys("a*", "~[^a]* ~a[^*]* ~ ~a");
    check_keys("*a", "~[^*]* \"~\\\\*[^a]*\" ~ \"~\\\\*\"");
    check_keys("]-", "\"~[^\\\\]]*\" \"~\\\\][^\\\\-]*\" ~ \"~\\\\]\"");
    check_keys("\"", "\"~[^\\\"]*\" ~");
}

Test(acl, blanks_cannot_be_patterns)
{
    cr_assert(acl_prefix_ok("cellgate:", 9));
    cr_assert_not(acl_prefix_ok("rate limit:", 11));
    cr_assert_not(acl_prefix_ok("a\tb", 3));
}

/* acl_conf_check of a configuration naming `up` and `lim` (NULL: not
 * set) with `prefix`: its verdict, the reason in err. */
static int conf_check(const char *up, const char *lim, const char *prefix,
                      char *err, size_t errlen)
{
    struct conf c;
    int rc;

    cr_assert_eq(conf_init(&c), CONF_OK);
    if (up != NULL) {
        conf_set_str(&c.upstream_user, up);
    }
    if (lim != NULL) {
        conf_set_str(&c.limiter_user, lim);
    }
    conf_set_str(&c.key_prefix, prefix);
    err[0] = '\0';
    rc = acl_conf_check(&c, err, errlen);
    conf_free(&c);
    return rc;
}

Test(acl, conf_check_refuses_one_user_for_both_and_blank_prefixes)
{
    char err[256];

    cr_assert_eq(conf_check("app", "lim", "rl:", err, sizeof(err)), 0, "%s",
                 err);
    cr_assert_eq(conf_check(NULL, "lim", "rl:", err, sizeof(err)), 0, "%s",
                 err);
    /* No user: the prefix goes into no ACL pattern. */
    cr_assert_eq(conf_check(NULL, NULL, "rate limit:", err, sizeof(err)), 0,
                 "%s", err);
    cr_assert_eq(conf_check("app", "app", "rl:", err, sizeof(err)), -1);
    cr_assert_str_eq(err, "upstream_user and limiter_user are both 'app': "
                          "the limiter user may touch every key, so clients "
                          "would reach the limiter's keys; name two "
                          "different users");
    cr_assert_eq(conf_check("app", "App", "rl:", err, sizeof(err)), 0,
                 "Redis user names are case-sensitive: %s", err);
    cr_assert_eq(conf_check("app", NULL, "rate limit:", err, sizeof(err)), -1);
    cr_assert_str_eq(err, "key_prefix 'rate limit:' has a blank, which a "
                          "Redis ACL key pattern cannot hold: choose a prefix "
                          "without one");
    cr_assert_eq(conf_check(NULL, "lim", "a\tb", err, sizeof(err)), -1);
    /* Too small a buffer: cut, still NUL-terminated. */
    cr_assert_eq(conf_check("u", "u", "rl:", err, 8), -1);
    cr_assert_str_eq(err, "upstrea");
}

Test(acl, setuser_lines)
{
    struct conf c;
    char *out;
    size_t n;

    cr_assert_eq(conf_init(&c), CONF_OK);
    conf_set_str(&c.upstream_user, "app");
    conf_set_str(&c.upstream_password, "p w");
    conf_set_str(&c.limiter_user, "lim");
    conf_set_str(&c.limiter_password, "secret");
    conf_set_str(&c.key_prefix, "rl:");
    n = acl_setuser_lines(&c, NULL, 0);
    cr_assert_gt(n, 0);
    out = malloc(n + 1);
    cr_assert_eq(acl_setuser_lines(&c, out, n + 1), n);
    cr_assert_eq(strlen(out), n);
    cr_assert(strncmp(out,
                      "ACL SETUSER app reset on \">p w\" ~[^r]* ~r[^l]* "
                      "~rl[^:]* ~ ~r ~rl &* +@all -",
                      strlen("ACL SETUSER app reset on \">p w\" ~[^r]* "
                             "~r[^l]* ~rl[^:]* ~ ~r ~rl &* +@all -")) == 0,
              "%s", out);
    cr_assert(strstr(out, " -flushall ") != NULL, "%s", out);
    cr_assert(strstr(out, " -function|load ") != NULL, "%s", out);
    cr_assert(strstr(out, "\nACL SETUSER lim reset on >secret ~* "
                          "resetchannels " ACL_LIMITER_COMMANDS "\n") != NULL,
              "%s", out);
    cr_assert_eq(out[n - 1], '\n');
    free(out);
    conf_free(&c);
}

/* Rules text of `p`, allocated. */
static char *rules_of(const struct cmdpolicy *p)
{
    size_t n = cmdpolicy_acl_rules(p, NULL, 0);
    char *s = malloc(n + 1);

    cr_assert_eq(cmdpolicy_acl_rules(p, s, n + 1), n);
    cr_assert_eq(strlen(s), n);
    return s;
}

/* The rules of a policy, applied to a fresh one, give a policy with the
 * same rules and the same answers. */
static void check_round_trip(const char *rules)
{
    struct cmdpolicy p, q;
    static const char *const probes[][2] = {
        { "get", NULL },        { "flushall", NULL }, { "keys", "*" },
        { "client", "kill" },   { "client", "id" },   { "client", "list" },
        { "config", "get" },    { "config", "set" },  { "function", "load" },
        { "function", "list" }, { "info", NULL },     { "eval", "x" },
        { "acl", "whoami" },    { "acl", "setuser" }, { "no-such", NULL },
    };
    char *a, *b;
    size_t i;

    cmdpolicy_init(&p);
    cr_assert_eq(cmdpolicy_apply_all(&p, rules, NULL, NULL), CMDPOLICY_OK);
    a = rules_of(&p);
    memset(&q, 0xa5, sizeof(q));
    cr_assert_eq(cmdpolicy_apply_all(&q, a, NULL, NULL), CMDPOLICY_OK, "%s", a);
    b = rules_of(&q);
    cr_assert_str_eq(a, b);
    for (i = 0; i < sizeof(probes) / sizeof(probes[0]); i++) {
        const char *arg = probes[i][1];
        cr_assert_eq(cmdpolicy_allows(&p, probes[i][0], strlen(probes[i][0]),
                                      arg, arg ? strlen(arg) : 0),
                     cmdpolicy_allows(&q, probes[i][0], strlen(probes[i][0]),
                                      arg, arg ? strlen(arg) : 0),
                     "%s %s after \"%s\"", probes[i][0], arg ? arg : "", a);
    }
    free(a);
    free(b);
}

Test(acl, policy_rules_round_trip)
{
    check_round_trip("");
    check_round_trip("+flushall -get +client|kill");
    check_round_trip("nocommands +get +client|id +@read");
    check_round_trip("allcommands");
}

Test(acl, default_policy_rules)
{
    struct cmdpolicy p;
    char *s;

    cmdpolicy_init(&p);
    s = rules_of(&p);
    cr_assert(strncmp(s, "+@all -", 7) == 0, "%s", s);
    cr_assert(strstr(s, " -flushall ") != NULL);
    cr_assert(strstr(s, " -client|kill ") != NULL);
    cr_assert(strstr(s, "-info") == NULL && strstr(s, "-keys") == NULL &&
                  strstr(s, " -client ") == NULL,
              "%s", s);
    free(s);
    cmdpolicy_apply_all(&p, "nocommands +get", NULL, NULL);
    s = rules_of(&p);
    cr_assert_str_eq(s, "-@all +get");
    free(s);
}
