/* The repository's container files (Dockerfile, .dockerignore, the
 * proxy.yaml files of the image) read without Docker: see
 * container_files.c. */
#ifndef PX_TESTS_INTEGRATION_CONTAINER_FILES_H
#define PX_TESTS_INTEGRATION_CONTAINER_FILES_H

#include <stddef.h>

#include "conf/conf.h"

#define CF_DOCKERFILE   PX_SOURCE_DIR "/Dockerfile"
#define CF_DOCKERIGNORE PX_SOURCE_DIR "/.dockerignore"
#define CF_ANY_ADDRESS  "0.0.0.0" /* a container's listeners take every one */
#define CF_PROXY_PORT   7777
#define CF_METRICS_PORT 9121
/* The tree scripts/run.sh loads and the README's examples answer from. */
#define CF_EXAMPLE_LIMITS "conf/limits.example.yaml"
#define CF_DF_MAX_LINES   64   /* instructions of the whole Dockerfile */
#define CF_DF_LINE        2048 /* one instruction, continuation lines joined */
#define CF_MAX_WORDS      64   /* words of one command */
#define CF_WORDS_BUF      4096 /* their text */

/* A command as words. */
struct cf_words {
    int n;                  /* words in w */
    char *w[CF_MAX_WORDS];  /* borrowed from buf */
    char buf[CF_WORDS_BUF]; /* NUL-separated word text */
};

/* Appends one word of len bytes to w; *used is the bytes of buf taken. */
void cf_words_add(struct cf_words *w, size_t *used, const char *p, size_t len);

/* Index of the first word equal to s, or -1. */
int cf_words_find(const struct cf_words *w, const char *s);

/* The word after flag; asserts there is one. */
const char *cf_words_value(const struct cf_words *w, const char *flag);

/* The words of an exec-form (JSON array) argument: ["a", "b"]. */
void cf_exec_words(struct cf_words *w, const char *s);

/* The Dockerfile's instructions (the caller owns it; it is large: malloc
 * it). */
struct cf_dockerfile {
    int n;     /* lines in line */
    int final; /* index of the last FROM: the image's stage starts there */
    char line[CF_DF_MAX_LINES][CF_DF_LINE];
};

/* Reads the repository's Dockerfile into d. */
void cf_dockerfile_load(struct cf_dockerfile *d);

/* The arguments of the image stage's last `instr` instruction, or NULL. */
const char *cf_dockerfile_get(const struct cf_dockerfile *d, const char *instr);

/* The repository file (relative to the source dir) the image's stage
 * COPYs to `dest` from the build context, in out (len bytes), or NULL. */
const char *cf_dockerfile_copied(const struct cf_dockerfile *d,
                                 const char *dest, char *out, size_t len);

/* Whether a RUN of the build stages (final 0) or of the image's stage
 * (final 1) names the Debian package pkg (a whole word). */
int cf_dockerfile_installs(const struct cf_dockerfile *d, int final,
                           const char *pkg);

/* The ENTRYPOINT's words in w (asserts it runs cellgate) and its --config:
 * the path of the image's proxy.yaml. */
const char *cf_image_config(const struct cf_dockerfile *d, struct cf_words *w);

/* Loads the repository's file `rel` as proxy.yaml into c (conf_init'ed
 * here; the caller conf_free's it). */
void cf_conf_of(struct conf *c, const char *rel);

/* Asserts c's listeners take every address at ports 7777 and 9121. */
void cf_check_listens_outside(const struct conf *c, const char *rel);

/* Asserts `cellgate --config <rel> --limits <limits> [extra_flag extra]
 * --check-config` passes (extra_flag may be NULL). */
void cf_check_config_passes(const char *rel, const char *limits,
                            const char *extra_flag, const char *extra);

/* Asserts c names a limits_file the image's stage copies from the
 * example tree. */
void cf_check_limits_shipped(const struct cf_dockerfile *d,
                             const struct conf *c, const char *rel);

/* Whether .dockerignore's text leaves `path` out of the build context:
 * the last matching pattern decides, "!" re-includes. */
int cf_ignored(const char *text, const char *path);

#endif
