/* upstream_reply.c: checks of Redis's reply frames that need nothing but
 * the frame (upstream.c delivers the frames). */
#include "proxy/core/upstream_reply.h"

#include <string.h>

#include "proxy/core/metrics.h"

int upstream_reply_refused(const char *frame, size_t len)
{
    static const char full[] = "-ERR max number of clients reached";
    static const char denied[] = "-DENIED ";

    return (len >= sizeof(full) - 1 &&
            memcmp(frame, full, sizeof(full) - 1) == 0) ||
           (len >= sizeof(denied) - 1 &&
            memcmp(frame, denied, sizeof(denied) - 1) == 0);
}

void upstream_reply_count(struct metrics_node *mn, const char *frame,
                          size_t len)
{
    if (len >= 7 && memcmp(frame, "-MOVED ", 7) == 0) {
        mn->moved++;
    } else if (len >= 5 && memcmp(frame, "-ASK ", 5) == 0) {
        mn->ask++;
    } else {
        mn->errors++;
    }
}
