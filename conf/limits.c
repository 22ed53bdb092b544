/* limits.c: limits.yaml, from YAML text to an immutable tree.
 *
 * Loading runs in three steps, so that a hostile file is refused before it
 * costs anything:
 *
 *   text --prescan (events)--> syntax, aliases, YAML node count and depth
 *        --yaml_parser_load--> document --walk--> new tree --> *out
 *                                           |
 *                                           `--> ld->diag ("file:l:c: ...")
 *
 * The prescan counts libyaml events, so libyaml never builds a document of
 * more than LIMITS_MAX_YAML_NODES nodes, and refuses aliases: without them
 * the tree is no bigger than the text (no "billion laughs", no cycles). The
 * walk then builds nodes depth first, reports an error and goes on, so one
 * run lists every error; overrides are checked last, against the finished
 * tree. The tree is returned only when the file had no error at all, so a
 * bad reload leaves the caller's old tree in place.
 *
 * This file holds the steps and the tree's lifetime; the walks, the table
 * of algorithms, the hot path of resolution and LIMITER RULES have files
 * of their own (conf/limits_impl.h lists them). Leaf layer: no logging,
 * no globals; allocation failure returns LIMITS_ENOMEM. */
#include "conf/limits.h"

#include <stdlib.h>
#include <string.h>

#include <yaml.h>

#include "conf/conf_yaml.h"
#include "conf/limits_impl.h"
#include "conf/sha256.h"

/* ---------------- Freeing ---------------- */

static void limits_node_free(struct limits_node *n)
{
    size_t i;

    for (i = 0; i < n->nchild; i++) {
        limits_node_free(n->child[i]);
        free(n->child[i]);
    }
    free(n->child);
    free(n->limits);
    free(n->seg);
    free(n->pattern);
}

/* ---------------- Loading ---------------- */

/* Refuses, from libyaml's events and before any document is built: syntax
 * errors, aliases, a second document, more than LIMITS_MAX_YAML_NODES nodes
 * and nesting deeper than LIMITS_MAX_YAML_DEPTH. */
static int limits_prescan(struct limits_loader *ld)
{
    yaml_parser_t parser;
    yaml_event_t ev;
    size_t nodes = 0, depth = 0, docs = 0;
    bool done = false;
    int rc = LIMITS_OK;

    if (!yaml_parser_initialize(&parser)) {
        conf_yaml_error(&ld->diag, NULL, "out of memory");
        return LIMITS_ENOMEM;
    }
    yaml_parser_set_input_string(&parser, (const unsigned char *)ld->text,
                                 ld->textlen);
    while (!done && !ld->diag.stop) {
        if (!yaml_parser_parse(&parser, &ev)) {
            rc = conf_yaml_syntax_error(&ld->diag, &parser, ld->text,
                                        ld->textlen);
            break;
        }
        switch (ev.type) {
        case YAML_STREAM_END_EVENT:
            done = true;
            break;
        case YAML_DOCUMENT_START_EVENT:
            if (++docs > 1) {
                conf_yaml_error(&ld->diag, &ev.start_mark,
                                "only one YAML document is allowed");
                done = true;
            }
            break;
        case YAML_ALIAS_EVENT:
            conf_yaml_error(&ld->diag, &ev.start_mark,
                            "YAML aliases are not supported (*%s): write the "
                            "tree out in full",
                            (const char *)ev.data.alias.anchor);
            break;
        case YAML_SEQUENCE_START_EVENT:
        case YAML_MAPPING_START_EVENT:
            if (++depth > LIMITS_MAX_YAML_DEPTH) {
                conf_yaml_error(&ld->diag, &ev.start_mark,
                                "YAML nesting deeper than %d levels",
                                LIMITS_MAX_YAML_DEPTH);
                done = true;
            }
            nodes++;
            break;
        case YAML_SEQUENCE_END_EVENT:
        case YAML_MAPPING_END_EVENT:
            depth--;
            break;
        case YAML_SCALAR_EVENT:
            nodes++;
            break;
        default:
            break;
        }
        if (nodes > LIMITS_MAX_YAML_NODES && !done) {
            conf_yaml_error(&ld->diag, &ev.start_mark,
                            "more than %d YAML nodes", LIMITS_MAX_YAML_NODES);
            done = true;
        }
        yaml_event_delete(&ev);
    }
    yaml_parser_delete(&parser);
    return rc;
}

/* Builds the document (already known to be sane) and walks it into
 * ld->tree. LIMITS_OK (errors counted in ld) or LIMITS_ENOMEM. */
static int limits_build(struct limits_loader *ld)
{
    yaml_parser_t parser;
    yaml_document_t doc;
    int rc;

    if (!yaml_parser_initialize(&parser)) {
        conf_yaml_error(&ld->diag, NULL, "out of memory");
        return LIMITS_ENOMEM;
    }
    yaml_parser_set_input_string(&parser, (const unsigned char *)ld->text,
                                 ld->textlen);
    if (!yaml_parser_load(&parser, &doc)) {
        rc = conf_yaml_syntax_error(&ld->diag, &parser, ld->text, ld->textlen);
        yaml_parser_delete(&parser);
        return rc == LIMITS_ENOMEM ? rc : LIMITS_OK;
    }
    ld->doc = &doc;
    rc = limits_walk_root(ld, yaml_document_get_root_node(&doc));
    if (rc == LIMITS_ENOMEM) {
        conf_yaml_error(&ld->diag, NULL, "out of memory");
    }
    yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
    return rc;
}

static int limits_load_buffer(struct limits_loader *ld, const char *text,
                              size_t len, struct limits_tree **out)
{
    int rc;

    ld->text = text;
    ld->textlen = len;
    if (len > LIMITS_MAX_FILE_BYTES) {
        conf_yaml_error(&ld->diag, NULL, "file larger than %d bytes",
                        LIMITS_MAX_FILE_BYTES);
        return LIMITS_ERR;
    }
    rc = limits_prescan(ld);
    if (rc != LIMITS_OK || ld->diag.nerrors > 0) {
        return rc == LIMITS_ENOMEM ? rc : LIMITS_ERR;
    }
    ld->tree = calloc(1, sizeof(*ld->tree));
    if (ld->tree == NULL) {
        conf_yaml_error(&ld->diag, NULL, "out of memory");
        return LIMITS_ENOMEM;
    }
    sha256_hex(text, len, ld->tree->sha256);
    rc = limits_build(ld);
    if (rc != LIMITS_OK || ld->diag.nerrors > 0) {
        limits_free(ld->tree);
        ld->tree = NULL;
        return rc == LIMITS_ENOMEM ? rc : LIMITS_ERR;
    }
    *out = ld->tree;
    return LIMITS_OK;
}

static void limits_loader_init(struct limits_loader *ld, const char *name,
                               char *err, size_t errlen)
{
    memset(ld, 0, sizeof(*ld));
    conf_yaml_diag_init(&ld->diag, name, err, errlen, LIMITS_MAX_ERRORS);
}

/* ---------------- Public API: loading ---------------- */

int limits_load_file(const char *path, struct limits_tree **out, char *err,
                     size_t errlen)
{
    struct limits_loader ld;
    char *text = NULL;
    size_t len = 0;
    int rc;

    limits_loader_init(&ld, path, err, errlen);
    rc =
        conf_yaml_read_file(&ld.diag, path, LIMITS_MAX_FILE_BYTES, &text, &len);
    if (rc != LIMITS_OK) {
        return rc;
    }
    rc = limits_load_buffer(&ld, text, len, out);
    free(text);
    return rc;
}

int limits_load_string(const char *name, const char *text,
                       struct limits_tree **out, char *err, size_t errlen)
{
    struct limits_loader ld;

    limits_loader_init(&ld, name, err, errlen);
    if (text == NULL) {
        text = "";
    }
    return limits_load_buffer(&ld, text, strlen(text), out);
}

void limits_free(struct limits_tree *t)
{
    size_t i;

    if (t == NULL) {
        return;
    }
    limits_node_free(&t->root);
    free(t->rules);
    for (i = 0; i < t->nov; i++) {
        free(t->ov[i].path);
        free(t->ov[i].limits);
    }
    free(t->ov);
    free(t);
}

size_t limits_rule_count(const struct limits_tree *t)
{
    return t != NULL ? t->nrules : 0;
}

size_t limits_override_count(const struct limits_tree *t)
{
    return t != NULL ? t->nov : 0;
}

const char *limits_rule_pattern(const struct limits_tree *t, size_t i)
{
    return t != NULL && i < t->nrules ? t->rules[i]->pattern : NULL;
}

const char *limits_sha256(const struct limits_tree *t)
{
    return t != NULL ? t->sha256 : NULL;
}
