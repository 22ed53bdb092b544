/* 32-bit FNV-1a of a NUL-ended name: the hash of cellgate's command-name
 * indexes (the key specs' table here, the command policy's generated
 * table in conf/, which scripts/cmdpolicy_table.py builds with the same
 * function). Short names, one multiply a byte, and good enough spread
 * for tables of a few hundred names.
 *
 * Leaf layer, header only: conf/ includes it without linking parser/. */
#ifndef PX_PARSER_FNV_H
#define PX_PARSER_FNV_H

#include <stdint.h>

static inline uint32_t fnv1a(const char *name)
{
    uint32_t h = 2166136261u;

    for (; *name != '\0'; name++) {
        h = (h ^ (unsigned char)*name) * 16777619u;
    }
    return h;
}

#endif
