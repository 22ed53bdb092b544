/* limiter.lua calls built by hand: see lcall.h. */
#include "tests/integration/lcall.h"

#include "algorithms/scripts.h"
#include "tests/integration/lua_twin.h"

#include <criterion/criterion.h>

#include <stdio.h>
#include <string.h>

void lcall_arg(struct lcall_args *a, const char *s)
{
    cr_assert_lt(a->n, LCALL_ARGV_MAX);
    a->v[a->n] = s != NULL ? s : "";
    a->len[a->n] = strlen(a->v[a->n]);
    a->n++;
}

void lcall_int(struct lcall_args *a, long long v)
{
    cr_assert_lt(a->nnum, (int)(sizeof(a->num) / sizeof(*a->num)));
    snprintf(a->num[a->nnum], sizeof(a->num[0]), "%lld", v);
    lcall_arg(a, a->num[a->nnum++]);
}

void lcall_start(struct lcall_args *a, const char *name, enum lcall_form form)
{
    memset(a, 0, sizeof(*a));
    a->n = lua_twin_head(a->v, name,
                         form == LCALL_FUNCTION ||
                             (form == LCALL_RUN && lua_twin_function_form()));
    for (int i = 0; i < a->n; i++) {
        a->len[i] = strlen(a->v[i]);
    }
}

/* The 6 values of each limit of g. */
static void lcall_levels(struct lcall_args *a, const struct lcall_grp *g)
{
    for (int i = 0; i < g->n; i++) {
        lcall_arg(a, g->l[i].algo);
        for (int k = 0; k < 4; k++) {
            lcall_arg(a, g->l[i].p[k]);
        }
        lcall_arg(a, g->l[i].undo);
    }
}

/* Whether group g goes in `keys` form in a call built with `keys`. */
static int lcall_in_keys_form(const struct lcall_grp *g, int keys)
{
    return keys && g->kf && g->mword == NULL;
}

/* What stands where g's m does: its mword, `keys` when g goes in keys
 * form in a call built with `keys`, else m. */
static void lcall_mword(struct lcall_args *a, const struct lcall_grp *g,
                        int keys)
{
    if (g->mword != NULL) {
        lcall_arg(a, g->mword);
    } else if (lcall_in_keys_form(g, keys)) {
        lcall_arg(a, "keys");
    } else {
        lcall_int(a, g->m);
    }
}

/* g's override pairs (none in keys form). */
static void lcall_pairs(struct lcall_args *a, const struct lcall_grp *g,
                        int keys)
{
    if (lcall_in_keys_form(g, keys)) {
        return;
    }
    for (int j = 0; j < g->m; j++) {
        lcall_arg(a, g->path[j]);
        lcall_arg(a, g->known[j]);
    }
}

/* The keys of groups g[0..ng-1]: each one's limit keys, then its
 * override hash. */
static void lcall_keys(struct lcall_args *a, const struct lcall_grp *g, int ng)
{
    for (int x = 0; x < ng; x++) {
        for (int i = 0; i < g[x].n; i++) {
            lcall_arg(a, g[x].l[i].key);
        }
        lcall_arg(a, g[x].ovr);
    }
}

/* How many keys groups g[0..ng-1] declare. */
static int lcall_nkeys(const struct lcall_grp *g, int ng)
{
    int nk = 0;

    for (int x = 0; x < ng; x++) {
        nk += g[x].n + 1;
    }
    return nk;
}

/* Starts a batch call of groups g[0..ng-1] in mode `word`: the head, the
 * number of keys declared and those keys (or 0 and none), the mode and
 * the clock. */
static void lcall_batch_start(struct lcall_args *a, enum lcall_form form,
                              const struct lcall_grp *g, int ng, int declared,
                              const char *word)
{
    lcall_start(a, "limiter", form);
    lcall_int(a, declared ? lcall_nkeys(g, ng) : 0);
    if (declared) {
        lcall_keys(a, g, ng);
    }
    lcall_arg(a, word);
    lcall_arg(a, LCALL_NOW);
}

void lcall_single(struct lcall_args *a, const struct lcall_grp *g,
                  enum lcall_form form, int keys)
{
    lcall_batch_start(a, form, g, 1, 1, g->mode);
    lcall_arg(a, g->cost);
    lcall_levels(a, g);
    lcall_mword(a, g, keys);
    lcall_pairs(a, g, keys);
}

/* A group's block in a batch: its mode, cost, n, the 6 values of each
 * limit and its m word ("shapes" sends each distinct block once). */
static void lcall_block(struct lcall_args *a, const struct lcall_grp *g,
                        int keys)
{
    lcall_arg(a, g->mode);
    lcall_arg(a, g->cost);
    lcall_int(a, g->n);
    lcall_levels(a, g);
    lcall_mword(a, g, keys);
}

void lcall_each(struct lcall_args *a, const struct lcall_grp *g, int ng,
                enum lcall_form form, int keys, int declared)
{
    lcall_batch_start(a, form, g, ng, declared, "each");
    lcall_int(a, ng);
    for (int x = 0; x < ng; x++) {
        lcall_block(a, &g[x], keys);
        lcall_pairs(a, &g[x], keys);
    }
    if (!declared) {
        lcall_keys(a, g, ng);
    }
}

int lcall_shapes(struct lcall_args *a, struct lcall_args *blocks,
                 const struct lcall_grp *g, int ng, int keys, int declared)
{
    int shape[LCALL_GROUPS_MAX], ns = 0;

    cr_assert_leq(ng, LCALL_GROUPS_MAX);
    for (int x = 0; x < ng; x++) {
        struct lcall_args *b = &blocks[x];
        memset(b, 0, sizeof(*b));
        lcall_block(b, &g[x], keys);
        shape[x] = -1;
        for (int y = 0; y < x && shape[x] < 0; y++) {
            int same = shape[y] == y && blocks[y].n == b->n;
            for (int i = 0; same && i < b->n; i++) {
                same = strcmp(blocks[y].v[i], b->v[i]) == 0;
            }
            shape[x] = same ? y : -1;
        }
        if (shape[x] < 0) {
            shape[x] = x;
            ns++;
        }
    }
    lcall_batch_start(a, LCALL_RUN, g, ng, declared, "shapes");
    lcall_int(a, ns);
    for (int x = 0; x < ng; x++) {
        for (int i = 0; shape[x] == x && i < blocks[x].n; i++) {
            lcall_arg(a, blocks[x].v[i]);
        }
    }
    lcall_int(a, ng);
    for (int x = 0; x < ng; x++) {
        int number = 0;
        for (int y = 0; y <= shape[x]; y++) {
            number += shape[y] == y;
        }
        if (ns > 1) {
            lcall_int(a, number);
        }
        lcall_pairs(a, &g[x], keys);
    }
    if (!declared) {
        lcall_keys(a, g, ng);
    }
    return ns;
}

redisReply *lcall_run(redisContext *c, struct lcall_args *a)
{
    redisReply *r = redisCommandArgv(c, a->n, a->v, a->len);

    cr_assert_not_null(r, "%s: %s", a->v[0], c->errstr);
    return r;
}

void lcall_node_clock(struct lcall_args *a)
{
    for (int i = 0; i < a->n; i++) {
        if (strcmp(a->v[i], LCALL_NOW) == 0) {
            a->v[i] = "";
            a->len[i] = 0;
            return;
        }
    }
    cr_assert_fail("no clock in the call");
}
