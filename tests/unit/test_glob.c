/* Glob matching as Redis's PSUBSCRIBE and KEYS do it. */
#include "tests/support/px_test.h"

#include <string.h>

#include "parser/glob.h"

PX_TEST_SUITE(glob);

struct gcase {
    const char *pat;
    const char *str;
    int want;
};

static const struct gcase cases[] = {
    { "*", "", 1 },
    { "*", "anything", 1 },
    { "news.*", "news.sport", 1 },
    { "news.*", "new.sport", 0 },
    { "h?llo", "hello", 1 },
    { "h?llo", "hllo", 0 },
    { "h*llo", "heeeello", 1 },
    { "h*llo", "hello!", 0 },
    { "h[ae]llo", "hallo", 1 },
    { "h[ae]llo", "hillo", 0 },
    { "h[^e]llo", "hallo", 1 },
    { "h[^e]llo", "hello", 0 },
    { "h[a-b]llo", "hbllo", 1 },
    { "h[b-a]llo", "hallo", 1 }, /* a range either way round */
    { "h[a-b]llo", "hcllo", 0 },
    { "h\\*llo", "h*llo", 1 },
    { "h\\*llo", "hello", 0 },
    { "[\\]]", "]", 1 },
    { "a*b*c", "aXXbYYc", 1 },
    { "a*b*c", "aXXbYY", 0 },
    { "*a*a*a*a*a*a*a*b", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", 0 },
    { "pat*", "pat-1", 1 },
    { "[abc", "b", 1 }, /* an open class runs to the end */
    { "", "", 1 },
    { "", "x", 0 },
    { "x", "", 0 },
    { "**", "", 1 },
};

Test(glob, matches_like_redis)
{
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const struct gcase *c = &cases[i];
        cr_assert_eq(glob_match(c->pat, strlen(c->pat), c->str, strlen(c->str)),
                     c->want, "'%s' against '%s'", c->pat, c->str);
    }
}

Test(glob, binary_bytes_are_plain_bytes)
{
    static const char pat[] = { 'a', '\0', '*' };
    static const char yes[] = { 'a', '\0', 'z', 'z' };
    static const char no[] = { 'a', 'b', 'z' };

    cr_assert_eq(glob_match(pat, 3, yes, 4), 1);
    cr_assert_eq(glob_match(pat, 3, no, 3), 0);
}
