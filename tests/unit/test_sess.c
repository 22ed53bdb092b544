/* A client's Redis-side state (proxy/sess.h): every transition, without
 * servers. The walks below are the ones a client's commands make; the
 * integration suites (it_session, it_session_cluster, it_resp3) check the
 * same behaviour end to end. */
#include <string.h>

#include "parser/resp_enc.h"
#include "proxy/cmd_def.h"
#include "proxy/sess.h"
#include "tests/support/px_test.h"

PX_TEST_SUITE(sess);

static struct sess fresh(void)
{
    struct sess s;

    memset(&s, 0, sizeof(s));
    return s;
}

Test(sess, a_new_session_has_no_state_and_stays_shared)
{
    struct sess s = fresh();

    cr_assert_not(sess_has_state(&s));
    cr_assert_not(sess_in_multi(&s));
    cr_assert_not(sess_subscribed(&s));
    cr_assert_not(sess_queues(&s, 0));
    /* Cluster mode: nothing binds it to its private upstream. */
    cr_assert_not(sess_needs_private(&s, 1, RESP_PROTO2, RESP_PROTO2, 1));
    /* Single mode: a private upstream, while there is one, takes all. */
    cr_assert(sess_needs_private(&s, 0, RESP_PROTO2, RESP_PROTO2, 1));
}

Test(sess, multi_queues_everything_but_noauth_commands_until_exec)
{
    struct sess s = fresh();

    sess_on_command(&s, CMD_F_MULTI);
    cr_assert(s.multi);
    cr_assert_eq(s.multi_count, 0);
    cr_assert(sess_in_multi(&s));
    cr_assert(sess_has_state(&s));
    cr_assert(sess_needs_private(&s, 1, RESP_PROTO2, RESP_PROTO2, 1));
    cr_assert(sess_queues(&s, 0));                /* GET, PING, ECHO... */
    cr_assert(sess_queues(&s, CMD_F_WATCH));      /* refused there by Redis */
    cr_assert_not(sess_queues(&s, CMD_F_NOAUTH)); /* AUTH, HELLO, QUIT */
    sess_on_queued(&s, 0);
    sess_on_queued(&s, 0);
    cr_assert_eq(s.multi_count, 2);
    sess_on_queued(&s, CMD_F_TXEND);
    cr_assert_not(s.multi);
    cr_assert_not(sess_has_state(&s));
    cr_assert_not(sess_queues(&s, 0));
}

Test(sess, watch_then_multi_then_discard_ends_both)
{
    struct sess s = fresh();

    sess_on_command(&s, CMD_F_WATCH);
    cr_assert(s.watching);
    cr_assert(sess_has_state(&s));
    cr_assert(sess_needs_private(&s, 1, RESP_PROTO2, RESP_PROTO2, 1));
    sess_on_command(&s, CMD_F_MULTI);
    sess_on_queued(&s, CMD_F_TXEND); /* DISCARD */
    cr_assert_not(s.watching);
    cr_assert_not(s.multi);
    cr_assert_not(sess_has_state(&s));
}

Test(sess, unwatch_and_an_exec_outside_multi_end_watch)
{
    struct sess s = fresh();

    sess_on_command(&s, CMD_F_WATCH);
    sess_on_command(&s, CMD_F_UNWATCH);
    cr_assert_not(s.watching);
    sess_on_command(&s, CMD_F_WATCH);
    sess_on_command(&s, CMD_F_TXEND); /* EXEC without MULTI: Redis errs,
                                         and WATCH is gone all the same */
    cr_assert_not(s.watching);
    cr_assert_not(sess_has_state(&s));
}

Test(sess, sticky_monitor_and_tunnel_hold_the_connection)
{
    struct sess s = fresh();

    sess_on_command(&s, CMD_F_STICKY);
    cr_assert(s.sticky);
    cr_assert(sess_has_state(&s));
    cr_assert(sess_needs_private(&s, 1, RESP_PROTO2, RESP_PROTO2, 1));

    s = fresh();
    sess_on_command(&s, CMD_F_MONITOR);
    cr_assert(s.monitor);
    cr_assert_not(s.sticky);
    cr_assert(sess_needs_private(&s, 1, RESP_PROTO2, RESP_PROTO2, 1));

    s = fresh();
    sess_on_tunnel(&s);
    cr_assert(s.tunnel);
    cr_assert(s.sticky);
    cr_assert(sess_has_state(&s));
}

Test(sess, a_plain_command_changes_nothing)
{
    struct sess s = fresh();

    sess_on_command(&s, 0);
    sess_on_command(&s, CMD_F_BLOCKING); /* private for the call only */
    sess_on_command(&s, CMD_F_FLUSH);
    cr_assert_not(sess_has_state(&s));
}

Test(sess, a_refusal_outside_a_transaction_costs_nothing)
{
    struct sess s = fresh();

    cr_assert_eq(sess_tx_refused(&s, 0), SESS_REFUSAL_NONE);
    cr_assert_eq(sess_tx_refused(&s, 1), SESS_REFUSAL_NONE);
    cr_assert_not(s.tx_failed);
}

Test(sess, a_refusal_in_an_open_transaction_poisons_it_upstream)
{
    struct sess s = fresh();

    sess_on_command(&s, CMD_F_MULTI);
    cr_assert_eq(sess_tx_refused(&s, 1), SESS_REFUSAL_POISON);
    cr_assert_not(s.tx_failed); /* the node's EXEC answers EXECABORT */
}

/* Cluster mode: MULTI is answered here and sent with the first command,
 * to that command's node. */
static struct sess deferred(void)
{
    struct sess s = fresh();

    sess_on_command(&s, CMD_F_MULTI);
    s.multi_deferred = 1;
    return s;
}

Test(sess, a_deferred_exec_after_a_refusal_is_execabort)
{
    struct sess s = deferred();

    cr_assert_eq(sess_tx_refused(&s, 0), SESS_REFUSAL_MARKED);
    cr_assert(s.tx_failed);
    sess_on_queued(&s, CMD_F_TXEND);
    cr_assert_eq(sess_tx_end_deferred(&s, 0), SESS_TXEND_ABORT);
    cr_assert_not(s.multi_deferred);
    cr_assert_not(s.tx_failed);
    cr_assert_not(sess_has_state(&s));
}

Test(sess, a_deferred_exec_with_nothing_queued_is_empty)
{
    struct sess s = deferred();

    sess_on_queued(&s, CMD_F_TXEND);
    cr_assert_eq(sess_tx_end_deferred(&s, 0), SESS_TXEND_EMPTY);
    cr_assert_not(sess_in_multi(&s));
}

Test(sess, a_deferred_discard_is_ok_even_after_a_refusal)
{
    struct sess s = deferred();

    sess_tx_refused(&s, 0);
    sess_on_queued(&s, CMD_F_TXEND);
    cr_assert_eq(sess_tx_end_deferred(&s, 1), SESS_TXEND_OK);
    cr_assert_not(s.tx_failed);
}

Test(sess, a_refusal_before_the_deferred_multi_is_sent_poisons_it_there)
{
    struct sess s = deferred();

    cr_assert_eq(sess_tx_refused(&s, 0), SESS_REFUSAL_MARKED);
    cr_assert_eq(sess_multi_sent(&s), 1);
    cr_assert_not(s.multi_deferred);
    cr_assert_not(s.tx_failed);
    cr_assert(s.multi);
    /* From now on the transaction is open on the node. */
    cr_assert_eq(sess_tx_refused(&s, 1), SESS_REFUSAL_POISON);
}

Test(sess, a_deferred_multi_sent_clean_needs_no_poison)
{
    struct sess s = deferred();

    cr_assert_eq(sess_multi_sent(&s), 0);
    cr_assert(s.multi);
    cr_assert(sess_needs_private(&s, 1, RESP_PROTO2, RESP_PROTO2, 1));
}

Test(sess, reset_forgets_everything)
{
    struct sess s = fresh();

    sess_on_command(&s, CMD_F_WATCH);
    sess_on_command(&s, CMD_F_MULTI);
    sess_on_queued(&s, 0);
    s.multi_deferred = 1;
    s.tx_failed = 1;
    s.subs = 2;
    s.ssubs = 1;
    s.db = 3;
    s.sticky = 1;
    s.tracking = 1;
    s.no_touch = 1;
    s.monitor = 1;
    s.redir_target = 1;
    s.tunnel = 1;
    s.push_wait = 1;
    sess_reset(&s);
    cr_assert_not(sess_has_state(&s));
    cr_assert_not(sess_in_multi(&s));
    cr_assert_not(s.tx_failed);
    cr_assert_not(s.tunnel);
    cr_assert_eq(s.db, 0);
}

Test(sess, each_piece_of_state_alone_is_state)
{
    struct sess s;

    s = fresh(), s.subs = 1;
    cr_assert(sess_has_state(&s) && sess_subscribed(&s));
    s = fresh(), s.ssubs = 1;
    cr_assert(sess_has_state(&s) && sess_subscribed(&s));
    s = fresh(), s.db = 1;
    cr_assert(sess_has_state(&s));
    s = fresh(), s.tracking = 1;
    cr_assert(sess_has_state(&s));
    s = fresh(), s.no_touch = 1;
    cr_assert(sess_has_state(&s));
    s = fresh(), s.push_wait = 1;
    cr_assert(sess_has_state(&s));
    s = fresh(), s.redir_target = 1;
    cr_assert(sess_has_state(&s));
    /* A deferred MULTI holds no connection yet. */
    s = fresh(), s.multi_deferred = 1;
    cr_assert_not(sess_has_state(&s));
}

Test(sess, select_n_binds_the_client_to_its_connection)
{
    struct sess s = fresh();

    s.db = 2;
    cr_assert(sess_needs_private(&s, 1, RESP_PROTO2, RESP_PROTO2, 1));
    cr_assert(sess_needs_private(&s, 1, RESP_PROTO3, RESP_PROTO3, 1));
    s.db = 0;
    cr_assert_not(sess_needs_private(&s, 1, RESP_PROTO2, RESP_PROTO2, 1));
}

Test(sess, a_resp2_subscriber_is_bound_a_resp3_one_is_not)
{
    struct sess s = fresh();

    s.subs = 1;
    /* RESP2 subscribed mode: Redis allows only (un)subscribe there. */
    cr_assert(sess_needs_private(&s, 1, RESP_PROTO2, RESP_PROTO2, 1));
    /* RESP3: ordinary commands run beside the subscriptions, so those for
     * other nodes take the shared path, in both modes, while the private
     * upstream owes nothing. */
    cr_assert_not(sess_needs_private(&s, 1, RESP_PROTO3, RESP_PROTO3, 1));
    cr_assert_not(sess_needs_private(&s, 0, RESP_PROTO3, RESP_PROTO3, 1));
    /* ... but not while it owes a reply: the order would break. */
    cr_assert_not(sess_needs_private(&s, 1, RESP_PROTO3, RESP_PROTO3, 0));
    cr_assert(sess_needs_private(&s, 0, RESP_PROTO3, RESP_PROTO3, 0));
    /* A confirmation push still awaited counts as subscribed. */
    s = fresh();
    s.push_wait = 1;
    cr_assert_not(sess_needs_private(&s, 0, RESP_PROTO3, RESP_PROTO3, 1));
}

Test(sess, a_resp3_subscriber_with_more_state_is_bound)
{
    struct sess s = fresh();

    s.subs = 1;
    s.watching = 1;
    cr_assert(sess_needs_private(&s, 1, RESP_PROTO3, RESP_PROTO3, 1));
    s.watching = 0;
    s.db = 1;
    cr_assert(sess_needs_private(&s, 1, RESP_PROTO3, RESP_PROTO3, 1));
    s.db = 0;
    s.sticky = 1;
    cr_assert(sess_needs_private(&s, 1, RESP_PROTO3, RESP_PROTO3, 1));
    /* Tracking or NO-TOUCH: single mode keeps it on its connection; in
     * cluster mode the other nodes' keys take their own ways. */
    s.sticky = 0;
    s.tracking = 1;
    cr_assert(sess_needs_private(&s, 0, RESP_PROTO3, RESP_PROTO3, 1));
    s.tracking = 0;
    s.no_touch = 1;
    cr_assert(sess_needs_private(&s, 0, RESP_PROTO3, RESP_PROTO3, 1));
}
