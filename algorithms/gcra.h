/* GCRA, exactly as redis-cell's CL.THROTTLE (docs/ARCHITECTURE.md "CL.THROTTLE,
 * exactly"), as a pure function of (parameters, stored TAT, now).
 *
 * The same operation runs inside Redis as algorithms/gcra.lua. The proxy
 * parses the arguments here (gcra_parse_throttle), sends the script the
 * split DVT and INC (gcra_script_args), and turns the script's raw reply
 * into the five integers with gcra_decide_from_script, which runs the very
 * gcra_decide() the embedded store and the unit tests use.
 *
 * Script call (algorithms/gcra.lua):
 *   EVALSHA <sha> 1 <key> <inc_s> <inc_ns> <dvt_s> <dvt_ns>
 *   Durations are split as s = floor(d / 1e9), ns = d - s * 1e9, so
 *   0 <= ns < 1e9 also for a negative DVT.
 *   Reply: [limited (0|1), now_s, now_us, stored TAT as given or nil].
 *   Errors: -WRONGTYPE Operation against a key holding the wrong kind of
 *   value (the key holds no TAT), GCRA_ERR_TAT_RANGE, and for direct
 *   callers GCRA_ERR_NEG_QUANTITY (negative INC) or "ERR gcra script
 *   arguments are inc_s inc_ns dvt_s dvt_ns"; nothing is written then.
 *
 * Where cellgate differs from redis-cell (it harms users there):
 *   - a negative quantity is refused with GCRA_ERR_NEG_QUANTITY (redis-cell
 *     writes a key without expiry);
 *   - a negative rate (count and period of opposite signs) is refused with
 *     GCRA_ERR_NEG_RATE (same harm: a negative increment);
 *   - arguments whose nanoseconds overflow 64 bits (period * 1e9,
 *     EI * (max_burst + 1), EI * quantity, max_burst + 1) are refused with
 *     GCRA_ERR_RANGE (redis-cell panics or wraps), and a stored TAT that
 *     makes the arithmetic overflow gives GCRA_ERR_TAT_RANGE;
 *   - an allowed request whose expiry truncates to 0 ms deletes the key
 *     (redis-cell sets a 0 ms expiry, which Redis treats as already expired;
 *     `SET ... PX 0` would be an error).
 * Like redis-cell, a stored value of -1 reads as "no TAT" (tat = now).
 *
 * Leaf layer: libc only, no globals. */
#ifndef PX_ALGORITHMS_GCRA_H
#define PX_ALGORITHMS_GCRA_H

#include <stddef.h>
#include <stdint.h>

#include "algorithms/rl.h"

#define GCRA_OK      0
#define GCRA_EARGS   -1 /* bad arguments: the text is redis-cell's or ours */
#define GCRA_ERANGE  -2 /* 64-bit nanosecond arithmetic would overflow */
#define GCRA_ESCRIPT -3 /* a script reply that the model cannot accept */

/* The texts of the errors above (without the leading '-' of the wire). */
#define GCRA_ERR_USAGE                                                         \
    "Cell error: Store error: Usage: cl.throttle <key> <max_burst> <count "    \
    "per period> <period> [<quantity>]"
#define GCRA_ERR_NOT_INT "Cell error: Store error: Couldn't parse as integer: "
#define GCRA_ERR_ZERO_RATE                                                     \
    "Cell error: Store error: Zero rates are not supported"
#define GCRA_ERR_NEG_RATE                                                      \
    "Cell error: Store error: Negative rates are not supported"
#define GCRA_ERR_NEG_QUANTITY                                                  \
    "Cell error: Store error: Negative quantities are not supported"
#define GCRA_ERR_RANGE                                                         \
    "Cell error: Store error: Arguments out of range: 64-bit nanoseconds "     \
    "would overflow"
#define GCRA_ERR_TAT_RANGE                                                     \
    "Cell error: Store error: Stored TAT out of range: 64-bit nanoseconds "    \
    "would overflow"
#define GCRA_ERR_SCRIPT   "ERR gcra script reply is malformed"
#define GCRA_ERR_MISMATCH "ERR gcra script and model disagree on the decision"

/* A buffer this large holds every error text with a 128-byte argument. */
#define GCRA_ERRBUF_LEN 192

/* Arguments of the script after the key, and room for the longest one,
 * "-9223372037" plus a NUL. */
#define GCRA_SCRIPT_NARGS   4
#define GCRA_SCRIPT_ARG_MAX 24

/* Elements of a successful script reply. */
#define GCRA_SCRIPT_NREPLY 4

/* Validated parameters of one CL.THROTTLE, with the durations it implies. */
struct gcra_params {
    int64_t max_burst; /* B */
    int64_t count;     /* C, requests per period */
    int64_t period_s;  /* P, whole seconds */
    int64_t quantity;  /* Q, default 1; 0 peeks */
    int64_t limit;     /* B + 1 */
    int64_t ei_ns;     /* emission interval, > 0 */
    int64_t dvt_ns;    /* delay variation tolerance, EI * (B + 1) */
    int64_t inc_ns;    /* increment of this request, EI * Q, >= 0 */
};

/* What a store does after a decision. */
enum gcra_write {
    GCRA_WRITE_NONE, /* leave the key as it is */
    GCRA_WRITE_SET,  /* SET key <new_tat_ns> PX <expiry_ms> */
    GCRA_WRITE_DEL,  /* DEL key: its expiry truncates to 0 ms */
};

/* The outcome of gcra_decide(). */
struct gcra_result {
    struct rl_decision d;  /* the five integers, before rounding */
    enum gcra_write write; /* what to do with the key */
    int64_t new_tat_ns;    /* value to store when write is SET */
    int64_t expiry_ms;     /* PX of the SET, > 0 when write is SET */
};

/* The raw reply of algorithms/gcra.lua, as the caller extracted it. */
struct gcra_script_reply {
    int64_t limited; /* element 1: the script's decision, 0 or 1 */
    int64_t now_s;   /* element 2: TIME seconds */
    int64_t now_us;  /* element 3: TIME microseconds */
    const char *tat; /* element 4: stored bytes, borrowed; NULL for nil */
    size_t tat_len;  /* bytes in tat */
};

/* The split script arguments (decimal, NUL-terminated). */
struct gcra_script_args {
    char v[GCRA_SCRIPT_NARGS]
          [GCRA_SCRIPT_ARG_MAX];   /* inc_s inc_ns dvt_s dvt_ns */
    size_t len[GCRA_SCRIPT_NARGS]; /* strlen of each */
};

/* Parses a signed 64-bit decimal integer from len bytes (no NUL needed):
 * one optional '+' or '-', then one or more digits, leading zeros allowed,
 * nothing else. Returns GCRA_OK and sets *out, or GCRA_EARGS (out of range
 * included). */
int gcra_parse_int64(const char *s, size_t len, int64_t *out);

/* Validates B, C, P, Q and computes limit, EI, DVT and INC into *p (the GCRA
 * rules of docs/ARCHITECTURE.md, steps 2 and 3 plus the divergences above).
 * Returns GCRA_OK, GCRA_EARGS (zero or negative rate, negative quantity) or
 * GCRA_ERANGE, with *err set to a static text. */
int gcra_params_init(struct gcra_params *p, int64_t max_burst, int64_t count,
                     int64_t period_s, int64_t quantity, const char **err);

/* As gcra_params_init, with the period in nanoseconds: the limits tree
 * allows periods that are not whole seconds. period_s is then truncated. */
int gcra_params_init_ns(struct gcra_params *p, int64_t max_burst, int64_t count,
                        int64_t period_ns, int64_t quantity, const char **err);

/* Parses `CL.THROTTLE <key> <max_burst> <count> <period> [<quantity>]`.
 * argv[0] is the command name and argv[1] the key (neither is looked at);
 * arguments are byte spans, not NUL-terminated. Returns GCRA_OK with *p
 * filled, or GCRA_EARGS / GCRA_ERANGE with the error text (the argument
 * quoted, truncated to fit) written NUL-terminated into errbuf. */
int gcra_parse_throttle(struct gcra_params *p, int argc,
                        const char *const *argv, const size_t *lens,
                        char *errbuf, size_t errlen);

/* GCRA rules, steps 4 to 9: the decision for the stored TAT (have_tat == 0 when
 * the key does not exist) at now_ns (>= 0). Returns GCRA_OK with *out set,
 * or GCRA_ERANGE (*err = GCRA_ERR_TAT_RANGE) when the stored TAT makes the
 * arithmetic overflow; nothing may be written then. */
int gcra_decide(const struct gcra_params *p, int have_tat, int64_t tat_ns,
                int64_t now_ns, struct gcra_result *out, const char **err);

/* LIMITER ADJUST of `delta` units (|delta| <= 2^53 - 1) for the stored
 * TAT (have_tat == 0: no key) at now_ns: the TAT moves by delta emission
 * intervals. delta > 0 charges, never refused: the new TAT is max(TAT,
 * now) + delta * EI, at most INT64_MAX - EI (a debt beyond the end of
 * 64-bit time saturates there, so a peek of cost 1 still computes);
 * written as a check writes it (SET with its expiry, DEL when that
 * truncates to 0 ms). delta < 0 gives back: TAT - |delta| * EI, never
 * below now (the key then goes: fresh); a TAT not ahead of now has
 * nothing to give back (no write). delta 0 writes nothing. out->d is
 * what gcra_decide() gives right after it for quantity 1 (p's quantity
 * is not looked at). GCRA_ERANGE as gcra_decide's, nothing written. */
int gcra_adjust(const struct gcra_params *p, int have_tat, int64_t tat_ns,
                int64_t now_ns, int64_t delta, struct gcra_result *out,
                const char **err);

/* The four script arguments after the key for *p. */
void gcra_script_args(const struct gcra_params *p,
                      struct gcra_script_args *out);

/* `p` as a peek: the same limit with quantity 0 (what the state is without
 * this request: a refused multi-level check reports it for the levels that
 * would have admitted). */
void gcra_params_peek(const struct gcra_params *p, struct gcra_params *out);

/* The decision for one key from the stored bytes and the time a script
 * reported (r->limited is ignored): what a multi-key call computes per key,
 * whose script flag is the aggregate. GCRA_ESCRIPT when malformed. */
int gcra_decide_stored(const struct gcra_params *p,
                       const struct gcra_script_reply *r,
                       struct gcra_result *out, const char **err);

/* Turns the script's raw reply into the decision: parses the TAT, builds
 * now from TIME, runs gcra_decide() and checks that the script's limited
 * flag agrees. Returns GCRA_OK, GCRA_ERANGE, or GCRA_ESCRIPT for a reply
 * the model cannot accept (*err says which). The script has already done
 * out->write; the caller only replies. */
int gcra_decide_from_script(const struct gcra_params *p,
                            const struct gcra_script_reply *r,
                            struct gcra_result *out, const char **err);

#endif /* PX_ALGORITHMS_GCRA_H */
