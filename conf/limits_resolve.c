/* limits_resolve.c: the hot path, a LIMITER path through a loaded tree.
 *
 * limits_resolve splits the path on ':' and walks the children (sorted
 * arrays, binary search; an exact segment before "*"), allocating
 * nothing: every string it makes lives in the caller's struct
 * limits_levels. Each level with limits gets its key base, tagged so that
 * all keys of one identity hash to one slot; limits_limit_key appends
 * "#<i>:<algorithm>" for each limit, by hand, because it runs for every
 * check. The segment helpers here also serve the loader (overrides name
 * paths the same way). */
#include <stdlib.h>
#include <string.h>

#include "conf/limits_impl.h"

/* ---------------- Segments and paths ---------------- */

int limits_seg_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
    int c = memcmp(a, b, alen < blen ? alen : blen);

    if (c != 0) {
        return c;
    }
    return alen < blen ? -1 : alen > blen;
}

/* The child of `n` named exactly `seg`, by binary search; NULL if none. */
static const struct limits_node *limits_child_exact(const struct limits_node *n,
                                                    const char *seg, size_t len)
{
    size_t lo = 0, hi = n->nchild;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const struct limits_node *c = n->child[mid];
        int cmp = limits_seg_cmp(seg, len, c->seg, c->seglen);

        if (cmp == 0) {
            return c;
        }
        if (cmp < 0) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    return NULL;
}

/* The child matching `seg`: an exact one wins over "*". */
static const struct limits_node *limits_child(const struct limits_node *n,
                                              const char *seg, size_t len)
{
    const struct limits_node *c = limits_child_exact(n, seg, len);

    return c != NULL ? c : limits_child_exact(n, "*", 1);
}

/* Splits `path` on ':' into at most LIMITS_MAX_DEPTH segments (start
 * offsets and lengths). NULL, or why the path is refused. */
const char *limits_split_path(const char *path, size_t len, size_t *start,
                              size_t *seglen, unsigned *nseg)
{
    size_t i, from = 0;

    *nseg = 0;
    if (path == NULL || len == 0) {
        return "empty limiter path";
    }
    if (len > LIMITS_MAX_PATH_BYTES) {
        return "limiter path longer than 1024 bytes";
    }
    if (memchr(path, '{', len) != NULL || memchr(path, '}', len) != NULL) {
        return "limiter path may not contain '{' or '}'";
    }
    for (i = 0; i <= len; i++) {
        if (i < len && path[i] != ':') {
            continue;
        }
        if (i == from) {
            return "limiter path has an empty segment";
        }
        if (*nseg == LIMITS_MAX_DEPTH) {
            return "limiter path has more than 32 segments";
        }
        start[*nseg] = from;
        seglen[*nseg] = i - from;
        (*nseg)++;
        from = i + 1;
    }
    return NULL;
}

/* Walks a concrete path of `nseg` segments through the tree. Returns the
 * node of the last segment, or NULL when the walk stops before it. */
const struct limits_node *limits_walk_path(const struct limits_tree *t,
                                           const char *path,
                                           const size_t *start,
                                           const size_t *seglen, unsigned nseg)
{
    const struct limits_node *n = &t->root;
    unsigned i;

    for (i = 0; i < nseg && n != NULL; i++) {
        n = limits_child(n, path + start[i], seglen[i]);
    }
    return n;
}

static const struct limits_override *
limits_override_find(const struct limits_tree *t, const char *path, size_t len)
{
    size_t lo = 0, hi = t->nov;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int cmp = limits_seg_cmp(path, len, t->ov[mid].path, t->ov[mid].len);

        if (cmp == 0) {
            return &t->ov[mid];
        }
        if (cmp < 0) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    return NULL;
}

/* ---------------- Public API: resolution ---------------- */

/* Why a key prefix is refused, or NULL. */
static const char *limits_prefix_problem(const char *prefix, size_t len)
{
    if (len > LIMITS_MAX_PREFIX_BYTES) {
        return "key prefix longer than 128 bytes";
    }
    if (memchr(prefix, '{', len) != NULL || memchr(prefix, '}', len) != NULL) {
        return "key prefix may not contain '{' or '}'";
    }
    return NULL;
}

/* Fills the key base of `lv` at `*used` in out->text:
 * "<prefix>{<tag>}<rest>", the tag being path[0..tag_end) and the rest
 * path[tag_end..path_len). */
static void limits_level_key(struct limits_levels *out, struct limits_level *lv,
                             const char *prefix, size_t prefix_len,
                             size_t tag_end, size_t *used)
{
    char *k = out->text + *used;
    size_t n = 0;

    memcpy(k, prefix, prefix_len);
    n += prefix_len;
    k[n++] = '{';
    memcpy(k + n, out->text, tag_end);
    n += tag_end;
    k[n++] = '}';
    memcpy(k + n, out->text + tag_end, lv->path_len - tag_end);
    n += lv->path_len - tag_end;
    k[n] = '\0';
    lv->key = k;
    lv->key_len = n;
    lv->tag = k + prefix_len + 1;
    lv->tag_len = tag_end;
    *used += n + 1;
}

/* Sets the limits of `lv` from its node or from an override of its path. */
static void limits_level_limits(const struct limits_tree *t,
                                const struct limits_node *n,
                                struct limits_level *lv)
{
    const struct limits_override *ov =
        limits_override_find(t, lv->path, lv->path_len);

    lv->limits = n->limits;
    lv->nlimits = n->nlimits;
    lv->base = n->limits;
    lv->nbase = n->nlimits;
    lv->overridden = ov != NULL;
    lv->shadow = n->shadow;
    lv->lease = n->lease;
    lv->unlimited = ov != NULL && ov->kind == LIMITS_OV_UNLIMITED;
    if (ov != NULL) {
        lv->limits = ov->limits;
        lv->nlimits = ov->nlimits;
    }
}

int limits_resolve(const struct limits_tree *t, const char *path,
                   size_t path_len, const char *prefix, size_t prefix_len,
                   struct limits_levels *out, const char **err)
{
    size_t start[LIMITS_MAX_DEPTH], seglen[LIMITS_MAX_DEPTH];
    size_t used, tag_end = 0; /* 0: no "*" matched yet */
    bool sub_wild = false;    /* a "*" matched below the tag's */
    const struct limits_node *n = t != NULL ? &t->root : NULL;
    unsigned i, nseg, id_group = 0;
    bool have_id_group = false;
    const char *why;

    out->n = 0;
    out->ngroups = 0;
    out->nsegments = 0;
    out->matched = 0;
    out->text_len = 0;
    out->text = (char *)&out->level[LIMITS_MAX_DEPTH];
    if (prefix == NULL) {
        prefix = LIMITS_DEFAULT_PREFIX;
        prefix_len = strlen(prefix);
    }
    why = limits_prefix_problem(prefix, prefix_len);
    if (why == NULL) {
        why = limits_split_path(path, path_len, start, seglen, &nseg);
    }
    if (why != NULL) {
        if (err != NULL) {
            *err = why;
        }
        return LIMITS_ERR;
    }
    memcpy(out->text, path, path_len);
    out->text[path_len] = '\0';
    used = path_len + 1;
    out->nsegments = nseg;
    for (i = 0; i < nseg && n != NULL; i++) {
        struct limits_level *lv;

        n = limits_child(n, path + start[i], seglen[i]);
        if (n == NULL) {
            break;
        }
        out->matched = i + 1;
        if (n->wildcard && tag_end == 0) {
            tag_end = start[i] + seglen[i];
        } else if (n->wildcard) {
            sub_wild = true;
        }
        if (n->nlimits == 0) {
            continue;
        }
        lv = &out->level[out->n++];
        memset(lv, 0, sizeof(*lv));
        lv->depth = i + 1;
        lv->rule = n->rule;
        lv->wildcard = n->wildcard;
        lv->path = out->text;
        lv->path_len = start[i] + seglen[i];
        lv->own_keys = sub_wild;
        limits_level_limits(t, n, lv);
        /* Above the first "*": a tag of its own. Below: the identity's. */
        limits_level_key(out, lv, prefix, prefix_len,
                         tag_end > 0 ? tag_end : lv->path_len, &used);
        if (tag_end == 0) {
            lv->group = out->ngroups++;
        } else {
            if (!have_id_group) {
                id_group = out->ngroups++;
                have_id_group = true;
            }
            lv->group = id_group;
        }
    }
    out->text_len = used;
    return LIMITS_OK;
}

struct limits_levels *limits_levels_copy(const struct limits_levels *src)
{
    size_t head =
        offsetof(struct limits_levels, level) + src->n * sizeof(src->level[0]);
    struct limits_levels *c = malloc(head + src->text_len);
    size_t i;

    if (c == NULL) {
        return NULL;
    }
    /* The levels in use, then their text right after them: small enough
     * for the allocator's per-thread cache, which a request's copy of
     * every level's room was not. */
    memcpy(c, src, head);
    c->text = (char *)c + head;
    memcpy(c->text, src->text, src->text_len);
    for (i = 0; i < c->n; i++) {
        struct limits_level *lv = &c->level[i];

        lv->path = c->text + (lv->path - src->text);
        lv->key = c->text + (lv->key - src->text);
        lv->tag = c->text + (lv->tag - src->text);
    }
    return c;
}

int limits_limit_key(const struct limits_level *lv, size_t i, char *out,
                     size_t outlen)
{
    char suffix[48], digits[24];
    const char *algo;
    size_t n = 0, d = sizeof(digits), alen, k;

    if (lv->limits == NULL || i >= lv->nlimits) {
        return -1;
    }
    /* "#<i>:<algorithm>", made for every check: by hand, not snprintf. */
    algo = limits_algo_name(lv->limits[i].algo);
    alen = strlen(algo);
    do {
        digits[--d] = (char)('0' + i % 10);
        i /= 10;
    } while (i != 0);
    suffix[n++] = '#';
    memcpy(suffix + n, digits + d, sizeof(digits) - d);
    n += sizeof(digits) - d;
    suffix[n++] = ':';
    memcpy(suffix + n, algo, alen + 1);
    n += alen;
    /* Copied by length: a path may hold any byte but braces, even NUL. */
    if (outlen > 0) {
        size_t room = outlen - 1, t; /* bytes before the NUL */

        k = lv->key_len < room ? lv->key_len : room;
        memcpy(out, lv->key, k);
        t = n < room - k ? n : room - k;
        memcpy(out + k, suffix, t);
        out[k + t] = '\0';
    }
    return (int)(lv->key_len + n);
}
