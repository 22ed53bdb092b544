/* A client's Redis-side state and its transitions (see sess.h).
 *
 * Design note: Redis keeps this state in one place too (multi.c owns every
 * MULTI/WATCH transition on c->flags). Here the state is a plain struct
 * embedded in struct client and every decision about it is a function of
 * the struct and its arguments, so the rules (when EXEC aborts, when a
 * client's commands must stay on its private upstream, what RESET
 * forgets) are unit-tested without servers; the I/O around them (sending
 * the deferred MULTI, the poisoning GET, taking and giving back the
 * private upstream) is priv.c's. */
#include "proxy/sess.h"

#include <string.h>

#include "parser/resp_enc.h"
#include "proxy/cmd_def.h"

int sess_in_multi(const struct sess *s)
{
    return s->multi || s->multi_deferred;
}

int sess_subscribed(const struct sess *s)
{
    return s->subs > 0 || s->ssubs > 0;
}

int sess_queues(const struct sess *s, unsigned cmd_flags)
{
    return s->multi && !(cmd_flags & CMD_F_NOAUTH);
}

void sess_on_queued(struct sess *s, unsigned cmd_flags)
{
    if (cmd_flags & CMD_F_TXEND) {
        s->multi = 0;
        s->watching = 0;
    } else {
        s->multi_count++;
    }
}

void sess_on_command(struct sess *s, unsigned cmd_flags)
{
    /* One at a time, in this order: a command has one of these roles. */
    if (cmd_flags & CMD_F_MULTI) {
        s->multi = 1;
        s->multi_count = 0;
    } else if (cmd_flags & CMD_F_TXEND) {
        s->multi = 0;
        s->watching = 0;
    } else if (cmd_flags & CMD_F_WATCH) {
        s->watching = 1;
    } else if (cmd_flags & CMD_F_UNWATCH) {
        s->watching = 0;
    } else if (cmd_flags & CMD_F_STICKY) {
        s->sticky = 1;
    } else if (cmd_flags & CMD_F_MONITOR) {
        s->monitor = 1;
    }
}

void sess_on_tunnel(struct sess *s)
{
    s->tunnel = 1;
    s->sticky = 1;
}

enum sess_refusal sess_tx_refused(struct sess *s, int tx_upstream)
{
    if (s->multi && tx_upstream) {
        return SESS_REFUSAL_POISON;
    }
    if (s->multi_deferred) {
        s->tx_failed = 1;
        return SESS_REFUSAL_MARKED;
    }
    return SESS_REFUSAL_NONE;
}

int sess_multi_sent(struct sess *s)
{
    int failed = s->tx_failed;

    s->multi_deferred = 0;
    s->tx_failed = 0;
    return failed;
}

enum sess_txend sess_tx_end_deferred(struct sess *s, int discard)
{
    int failed = s->tx_failed;

    s->multi_deferred = 0;
    s->tx_failed = 0;
    if (discard) {
        return SESS_TXEND_OK;
    }
    return failed ? SESS_TXEND_ABORT : SESS_TXEND_EMPTY;
}

int sess_needs_private(const struct sess *s, int cluster, int proto,
                       int priv_proto, int priv_idle)
{
    int resp3_subscriber_only =
        priv_proto == RESP_PROTO3 && (sess_subscribed(s) || s->push_wait) &&
        !s->multi && !s->multi_deferred && !s->watching && s->db == 0 &&
        !s->sticky && !s->monitor && !s->tracking && !s->no_touch && priv_idle;

    if (resp3_subscriber_only) {
        return 0;
    }
    if (!cluster) {
        return 1;
    }
    return s->multi || s->multi_deferred || s->watching || s->db != 0 ||
           s->sticky || s->monitor ||
           (sess_subscribed(s) && proto == RESP_PROTO2);
}

int sess_has_state(const struct sess *s)
{
    return s->multi || s->watching || sess_subscribed(s) || s->db != 0 ||
           s->sticky || s->tracking || s->no_touch || s->monitor ||
           s->push_wait || s->redir_target;
}

void sess_reset(struct sess *s)
{
    /* multi_count is only shown while a transaction is open: MULTI sets it
     * before it counts again, so it is left as it was. */
    int count = s->multi_count;

    memset(s, 0, sizeof(*s));
    s->multi_count = count;
}
