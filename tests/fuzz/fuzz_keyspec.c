/* Fuzz target: key specs (parser/keyspec.c).
 *
 * The input is a COMMAND reply and then requests: its first two bytes say
 * how many of the following bytes are the reply (keyspec_new), the rest is
 * read as client requests (resp_reader) and each is looked up
 * (keyspec_find, keyspec_flags). Whatever the reply says, the keys found
 * must be arguments of the request (not its name), in argument order, and
 * no more than it has. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "parser/keyspec.h"
#include "parser/resp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fz_fail(const char *what)
{
    fprintf(stderr, "fuzz_keyspec: %s\n", what);
    abort();
}

static void fz_lookup(const struct keyspec *ks, const struct resp_cmd *c)
{
    int *keys = malloc((size_t)c->argc * sizeof(*keys));
    int nkeys = -1, rc, k;
    unsigned flags = 0;

    if (keys == NULL) {
        return;
    }
    rc = keyspec_find(ks, c, keys, &nkeys);
    if (rc != KEYSPEC_OK && rc != KEYSPEC_UNKNOWN && rc != KEYSPEC_EMOVABLE &&
        rc != KEYSPEC_ESYNTAX) {
        fz_fail("keyspec_find returned an unknown code");
    }
    if (rc == KEYSPEC_UNKNOWN && nkeys != 0) {
        fz_fail("an unknown command with keys");
    }
    if (rc == KEYSPEC_OK) {
        if (nkeys < 0 || nkeys > c->argc) {
            fz_fail("more keys than arguments");
        }
        for (k = 0; k < nkeys; k++) {
            if (keys[k] < 1 || keys[k] >= c->argc) {
                fz_fail("a key that is no argument of the request");
            }
            if (k > 0 && keys[k] <= keys[k - 1]) {
                fz_fail("keys out of argument order");
            }
        }
    }
    rc = keyspec_flags(ks, c, &flags);
    if (rc != KEYSPEC_OK && rc != KEYSPEC_UNKNOWN) {
        fz_fail("keyspec_flags returned an unknown code");
    }
    free(keys);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct keyspec *ks;
    struct resp_reader *rd;
    struct resp_cmd *c;
    size_t rlen;

    if (size < 2) {
        return 0;
    }
    rlen = ((size_t)data[0] << 8 | data[1]) % (size - 1);
    ks = keyspec_new((const char *)data + 2, rlen);
    if (ks == NULL) {
        return 0;
    }
    if (keyspec_count(ks) == 0) {
        fz_fail("a table of no command");
    }
    rd = resp_reader_new(NULL);
    if (rd != NULL && resp_reader_feed(rd, (const char *)data + 2 + rlen,
                                       size - 2 - rlen) == RESP_OK) {
        while (resp_reader_next(rd, &c) == RESP_OK) {
            fz_lookup(ks, c);
            resp_cmd_free(c);
        }
    }
    resp_reader_free(rd);
    keyspec_free(ks);
    return 0;
}
