/* Intrusive circular doubly linked queue (our own, in the spirit of libuv's
 * src/queue.h). A node lives inside the object it links; the head is a node
 * that is never an element. Linking and unlinking never allocate or free. */
#ifndef PX_PROXY_QUEUE_H
#define PX_PROXY_QUEUE_H

#include <stddef.h>

struct queue {
    struct queue *next; /* borrowed */
    struct queue *prev; /* borrowed */
};

static inline void queue_init(struct queue *q)
{
    q->next = q;
    q->prev = q;
}

static inline int queue_empty(const struct queue *h)
{
    return h->next == h;
}

/* A node unlinked by queue_remove() points to itself. */
static inline int queue_linked(const struct queue *n)
{
    return n->next != n;
}

static inline struct queue *queue_head(const struct queue *h)
{
    return h->next;
}

static inline struct queue *queue_tail(const struct queue *h)
{
    return h->prev;
}

static inline void queue_insert_tail(struct queue *h, struct queue *n)
{
    n->next = h;
    n->prev = h->prev;
    h->prev->next = n;
    h->prev = n;
}

static inline void queue_insert_head(struct queue *h, struct queue *n)
{
    n->next = h->next;
    n->prev = h;
    h->next->prev = n;
    h->next = n;
}

/* Unlinks `n` and leaves it pointing to itself (safe to remove twice). */
static inline void queue_remove(struct queue *n)
{
    n->prev->next = n->next;
    n->next->prev = n->prev;
    n->next = n;
    n->prev = n;
}

#endif /* PX_PROXY_QUEUE_H */
