/* resp_cmd: the command object of parser/resp.h (one request: its argv
 * spans and its RESP wire form), made by the request reader (resp.c) and
 * by resp_cmd_new. This header is the parser's own: what resp.c needs to
 * build commands. Leaf layer: libc only. */
#ifndef PX_PARSER_RESP_CMD_H
#define PX_PARSER_RESP_CMD_H

#include <stddef.h>

#include "parser/resp.h"

/* Argument i of an argument list given either as pointers and lengths or as
 * spans into one base buffer (spans != NULL). */
struct resp_cmd_src {
    const char *const *ptrs;      /* borrowed */
    const size_t *lens;           /* borrowed */
    const char *base;             /* borrowed */
    const struct resp_arg *spans; /* borrowed */
};

/* A command of `argc` arguments with room for `raw_len` bytes of raw, in
 * one allocation: the struct, then argc spans, then raw. NULL on
 * allocation failure or overflow. */
struct resp_cmd *resp_cmd_alloc(int argc, size_t raw_len);

/* A command whose raw is the RESP encoding of the arguments `a`. NULL on
 * allocation failure or if the size overflows. */
struct resp_cmd *resp_cmd_encode(int argc, const struct resp_cmd_src *a);

#endif /* PX_PARSER_RESP_CMD_H */
