/* Builds COMMAND replies for unit tests: one entry in Redis 7's shape
 * (10 fields), with the key range and the movablekeys flag. */
#ifndef PX_TESTS_SUPPORT_COMMAND_REPLY_H
#define PX_TESTS_SUPPORT_COMMAND_REPLY_H

#include <criterion/criterion.h>
#include <string.h>

#include "parser/buf.h"
#include "parser/resp.h"
#include "parser/resp_enc.h"

static inline void command_entry(struct buf *b, const char *name, int arity,
                                 int movable, int first, int last, int step,
                                 int nsub)
{
    cr_assert_eq(resp_enc_array_header(b, 10), BUF_OK);
    resp_enc_bulk(b, name, strlen(name));
    resp_enc_int(b, arity);
    resp_enc_array_header(b, movable ? 2 : 1);
    resp_enc_simple(b, "write");
    if (movable) {
        resp_enc_simple(b, "movablekeys");
    }
    resp_enc_int(b, first);
    resp_enc_int(b, last);
    resp_enc_int(b, step);
    resp_enc_array_header(b, 0); /* acl categories */
    resp_enc_array_header(b, 0); /* tips */
    resp_enc_array_header(b, 0); /* key specs */
    resp_enc_array_header(b, nsub);
}

/* A command given as space-separated words ('' for an empty argument),
 * owned by the caller (resp_cmd_free). */
static inline struct resp_cmd *command_words(const char *words)
{
    const char *argv[32];
    size_t lens[32];
    char copy[512];
    char *save = NULL, *w;
    int argc = 0;
    struct resp_cmd *cmd;

    cr_assert_lt(strlen(words), sizeof(copy));
    strcpy(copy, words);
    for (w = strtok_r(copy, " ", &save); w != NULL && argc < 32;
         w = strtok_r(NULL, " ", &save)) {
        argv[argc] = strcmp(w, "''") == 0 ? "" : w;
        lens[argc] = strlen(argv[argc]);
        argc++;
    }
    cmd = resp_cmd_new(argc, argv, lens);
    cr_assert_not_null(cmd);
    return cmd;
}

#endif /* PX_TESTS_SUPPORT_COMMAND_REPLY_H */
