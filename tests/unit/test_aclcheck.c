/* The one warning per node of the Redis users check: every problem of
 * both users in one line. */
#include "tests/support/px_test.h"

#include <string.h>

#include "proxy/limiter/aclcheck.h"

PX_TEST_SUITE(aclcheck);

Test(aclcheck, the_client_users_problems_share_one_line)
{
    const char *const user[2] = { "default", "default" };
    const char *const bad[2] = { "write limiter keys, read limiter keys, "
                                 "flush every key (FLUSHALL)",
                                 "" };
    char line[1024];

    aclcheck_verdict(line, sizeof(line), "10.0.0.1:6379", user, bad);
    cr_assert_str_eq(line, "node 10.0.0.1:6379: Redis user 'default' may "
                           "write limiter keys, read limiter keys, flush "
                           "every key (FLUSHALL): limiter state is guarded "
                           "by cellgate alone (cellgate --print-acl prints "
                           "the two users)");
}

Test(aclcheck, both_users_problems_share_one_line)
{
    const char *const user[2] = { "app", "lim" };
    const char *const bad[2] = { "read limiter keys",
                                 "call the limiter's functions, read the "
                                 "clock" };
    char line[1024];

    aclcheck_verdict(line, sizeof(line), "n:1", user, bad);
    cr_assert_str_eq(line,
                     "node n:1: Redis user 'app' may read limiter keys: "
                     "limiter state is guarded by cellgate alone (cellgate "
                     "--print-acl prints the two users); Redis user 'lim' "
                     "may not call the limiter's functions, read the clock: "
                     "limiter calls will fail");
    {
        const char *const only[2] = { "", "read the clock" };
        aclcheck_verdict(line, sizeof(line), "n:1", user, only);
        cr_assert_str_eq(line, "node n:1: Redis user 'lim' may not read the "
                               "clock: limiter calls will fail");
    }
}

Test(aclcheck, a_long_verdict_is_cut_not_overrun)
{
    const char *const user[2] = { "app", "lim" };
    const char *const bad[2] = { "write limiter keys", "read the clock" };
    char line[40];

    memset(line, 'x', sizeof(line));
    aclcheck_verdict(line, 30, "n:1", user, bad);
    cr_assert_eq(strlen(line), 29);
    cr_assert_eq(line[35], 'x');
}
