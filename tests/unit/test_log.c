/* px_uv_must: a libuv call that worked goes on; one that failed stops the
 * proxy (after its "fatal: ..." line) rather than run without the handle. */
#include "tests/support/px_test.h"

#include <signal.h>

#include <uv.h>

#include "proxy/core/log.h"

PX_TEST_SUITE(log);

static void on_signal(uv_signal_t *h, int signum)
{
    (void)h;
    (void)signum;
}

Test(log, uv_must_lets_a_call_that_worked_go_on)
{
    uv_loop_t loop;
    uv_signal_t sig;

    cr_assert_eq(uv_loop_init(&loop), 0);
    px_uv_must(uv_signal_init(&loop, &sig), "signal init");
    px_uv_must(uv_signal_start(&sig, on_signal, SIGHUP), "SIGHUP handler");
    uv_close((uv_handle_t *)&sig, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    cr_assert_eq(uv_loop_close(&loop), 0);
}

/* Signal number 0: libuv refuses it (UV_EINVAL). */
Test(log, uv_must_aborts_on_a_failed_call, .signal = SIGABRT)
{
    uv_loop_t loop;
    uv_signal_t sig;

    cr_assert_eq(uv_loop_init(&loop), 0);
    px_uv_must(uv_signal_init(&loop, &sig), "signal init");
    px_uv_must(uv_signal_start(&sig, on_signal, 0), "signal 0 handler");
}
