/* The Lua scripts of algorithms/, embedded at build time.
 *
 * CMake reads every algorithms/<name>.lua, computes its SHA1 (what SCRIPT
 * LOAD returns and EVALSHA takes) and writes scripts.c into the build
 * directory: one const table plus one accessor per script. Configuration
 * reruns whenever a .lua file changes, so the body and the sha1 cannot
 * drift apart.
 *
 * The same sources make one function library (scripts_library): each
 * script's definitions (the lines before its "--#call" line) run once
 * when a node loads it, and the rest is the body of the function
 * `scripts_lua.fn`. The proxy loads the library on every master and sends
 * FCALL; where a node has no FUNCTION (Redis 6) it sends EVALSHA <sha1>
 * and, on -NOSCRIPT, the body.
 *
 * A line "--#include <part>" pastes algorithms/lua/<part>.lua (shared code:
 * lib, each algorithm) before hashing.
 *
 * Adding algorithms/<name>.lua needs a `scripts_<name>` declaration below:
 * the generated file includes this header, and -Wmissing-prototypes fails
 * the build until it is there.
 *
 * Leaf layer: const data only. */
#ifndef PX_ALGORITHMS_SCRIPTS_H
#define PX_ALGORITHMS_SCRIPTS_H

#include <stddef.h>

/* Hex digits of a SHA1, without the NUL. */
#define SCRIPTS_SHA1_LEN 40

/* One embedded script. All pointers are to static const data. */
struct scripts_lua {
    const char *name; /* file name without ".lua", e.g. "gcra" */
    const char *body; /* the file's exact bytes, NUL-terminated */
    size_t len;       /* bytes in body, without the NUL */
    const char *sha1; /* SCRIPTS_SHA1_LEN lowercase hex digits + NUL */
    const char *fn;   /* its function in the library (FCALL's name) */
};

/* The function library: every script as one function (FUNCTION LOAD it
 * once per node, then FCALL scripts_lua.fn). Static const data. */
struct scripts_library {
    const char *name; /* "cellgate_<hash of the text>" */
    const char *body; /* the library's text, NUL-terminated */
    size_t len;       /* bytes in body, without the NUL */
};

/* The library of every script of algorithms/. */
const struct scripts_library *scripts_library(void);

/* The script named `name` (without ".lua"), or NULL. */
const struct scripts_lua *scripts_find(const char *name);

/* algorithms/gcra.lua: CL.THROTTLE (see gcra.h for KEYS, ARGV, reply). */
const struct scripts_lua *scripts_gcra(void);

/* algorithms/limiter.lua: LIMITER CHECK/PEEK of every algorithm, all the
 * limits of one slot in one call (see the script for KEYS, ARGV, reply). */
const struct scripts_lua *scripts_limiter(void);

#endif /* PX_ALGORITHMS_SCRIPTS_H */
