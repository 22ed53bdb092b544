/* Subscription registry (see pubsub.h).
 *
 *   server.pubsub_chans / pubsub_pats:  name -> entry -> holders
 *                                                 [node A: 2] -> [node B: 1]
 *   client->sess.subs:  kind + name -> the same entry (borrowed)
 *
 * An entry lives while some client holds it; each client keeps the node
 * its subscriptions live on (its private connection's), so it can take
 * them all back when that connection goes. Channels are found by name;
 * patterns are few and are matched one by one. */
#include "proxy/pubsub.h"

#include <string.h>

#include "parser/glob.h"
#include "parser/resp.h"
#include "parser/resp_enc.h"
#include "proxy/client.h"
#include "proxy/core/hmap.h"
#include "proxy/core/req.h"
#include "proxy/core/util.h"
#include "proxy/server.h"

/* Subscriptions to one name held on one node. */
struct pubsub_holder {
    char *node;                 /* owned: "host:port" */
    unsigned count;             /* clients subscribed there */
    struct pubsub_holder *next; /* owned: the next node */
};

/* One channel or pattern some client of cellgate subscribed to. */
struct pubsub_entry {
    char *name;                    /* owned */
    size_t len;                    /* bytes of name */
    int pattern;                   /* a PSUBSCRIBE pattern */
    struct pubsub_holder *holders; /* owned list */
};

/* Longest "kind + name" key a client keeps; longer names are not counted
 * (Redis accepts them, but no sane channel is this long). */
#define PUBSUB_KEY_MAX 1024

static struct hmap *pubsub_map(int pattern)
{
    return pattern ? &server.pubsub_pats : &server.pubsub_chans;
}

static void pubsub_entry_free(void *val)
{
    struct pubsub_entry *e = val;

    while (e->holders != NULL) {
        struct pubsub_holder *h = e->holders;
        e->holders = h->next;
        px_free(h->node);
        px_free(h);
    }
    px_free(e->name);
    px_free(e);
}

/* Changes the count of `e` on `node` by +1 or -1, dropping what is empty;
 * may free `e`. */
static void pubsub_count(struct pubsub_entry *e, const char *node, int delta)
{
    struct pubsub_holder **hp = &e->holders, *h;

    while (*hp != NULL && strcmp((*hp)->node, node) != 0) {
        hp = &(*hp)->next;
    }
    h = *hp;
    if (h == NULL && delta > 0) {
        h = px_calloc(1, sizeof(*h));
        h->node = px_strndup(node, strlen(node));
        h->next = e->holders;
        e->holders = h;
        hp = &e->holders;
    }
    if (h == NULL) {
        return;
    }
    if (delta > 0) {
        h->count++;
    } else if (--h->count == 0) {
        *hp = h->next;
        px_free(h->node);
        px_free(h);
    }
    if (e->holders == NULL) {
        hmap_del(pubsub_map(e->pattern), e->name, e->len);
        pubsub_entry_free(e);
    }
}

void pubsub_note(struct client *c, const char *node, int pattern, int add,
                 const char *name, size_t len)
{
    char key[PUBSUB_KEY_MAX + 1];
    struct pubsub_entry *e;
    int held;

    if (len > PUBSUB_KEY_MAX) {
        return;
    }
    key[0] = pattern ? 'p' : 'c';
    memcpy(key + 1, name, len);
    if (c->subs_map == NULL) {
        c->subs_map = px_calloc(1, sizeof(*c->subs_map));
        hmap_init(c->subs_map);
    }
    held = hmap_get(c->subs_map, key, len + 1) != NULL;
    if (add == held) {
        return; /* already counted (a repeated SUBSCRIBE), or never was */
    }
    if (c->subs_node == NULL) {
        c->subs_node = px_strndup(node, strlen(node));
    }
    e = hmap_get(pubsub_map(pattern), name, len);
    if (add) {
        if (e == NULL) {
            e = px_calloc(1, sizeof(*e));
            e->name = px_strndup(name, len);
            e->len = len;
            e->pattern = pattern;
            hmap_put(pubsub_map(pattern), name, len, e);
        }
        hmap_put(c->subs_map, key, len + 1, e);
        pubsub_count(e, c->subs_node, +1);
        return;
    }
    hmap_del(c->subs_map, key, len + 1);
    if (e != NULL) {
        pubsub_count(e, c->subs_node, -1);
    }
}

/* hmap_sweep callback: takes one subscription of the client back. */
static int pubsub_drop_one(void *val, void *arg)
{
    pubsub_count(val, arg, -1);
    return 1;
}

void pubsub_client_gone(struct client *c)
{
    size_t cursor = 0;

    if (c->subs_map != NULL) {
        if (c->subs_node != NULL) {
            hmap_sweep(c->subs_map, &cursor, c->subs_map->nbuckets,
                       pubsub_drop_one, c->subs_node);
        }
        hmap_free(c->subs_map, NULL);
        px_free(c->subs_map);
        c->subs_map = NULL;
    }
    px_free(c->subs_node);
    c->subs_node = NULL;
}

/* Holders of `e` on nodes other than `node`. */
static long long pubsub_elsewhere(const struct pubsub_entry *e,
                                  const char *node)
{
    const struct pubsub_holder *h;
    long long n = 0;

    for (h = e->holders; h != NULL; h = h->next) {
        if (strcmp(h->node, node) != 0) {
            n += h->count;
        }
    }
    return n;
}

/* What a pattern sweep needs. */
struct pubsub_match {
    const char *node; /* borrowed: the node PUBLISH went to */
    const char *ch;   /* borrowed: the channel */
    size_t len;       /* bytes of ch */
    long long n;      /* subscriptions found */
};

static int pubsub_match_one(void *val, void *arg)
{
    const struct pubsub_entry *e = val;
    struct pubsub_match *m = arg;

    if (glob_match(e->name, e->len, m->ch, m->len)) {
        m->n += pubsub_elsewhere(e, m->node);
    }
    return 0;
}

long long pubsub_held_elsewhere(const char *node, const char *ch, size_t len)
{
    struct pubsub_match m = { .node = node, .ch = ch, .len = len };
    const struct pubsub_entry *e = hmap_get(&server.pubsub_chans, ch, len);
    size_t cursor = 0;

    if (e != NULL) {
        m.n += pubsub_elsewhere(e, node);
    }
    if (server.pubsub_pats.count > 0) {
        hmap_sweep(&server.pubsub_pats, &cursor, server.pubsub_pats.nbuckets,
                   pubsub_match_one, &m);
    }
    return m.n;
}

void pubsub_free(void)
{
    hmap_free(&server.pubsub_chans, pubsub_entry_free);
    hmap_free(&server.pubsub_pats, pubsub_entry_free);
}

void pubsub_publish_reply(struct req *req, const char *frame, size_t len)
{
    long long v;

    if (len > 3 && frame[0] == ':' &&
        resp_parse_ll(frame + 1, len - 3, &v) == 0) {
        PX_CHECK_OOM(resp_enc_int(&req->reply, v + req->filter_arg));
        return;
    }
    PX_CHECK_OOM(buf_append(&req->reply, frame, len)); /* an error */
}
