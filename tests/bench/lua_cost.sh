#!/usr/bin/env bash
# Lua cost benchmark: the CPU time Redis itself spends per limiter decision
# in algorithms/gcra.lua and algorithms/limiter.lua, read from Redis's own
# accounting (INFO commandstats: usec_per_call of EVALSHA or FCALL, divided
# by the decisions one call makes). Unlike limiter.sh it measures no
# throughput, so a shared machine skews it far less.
#
# Starts one redis-server on a free loopback port, loads the scripts as
# built (<build>/algorithms/*.lua) with SCRIPT LOAD and, when FORMS names
# it, the FUNCTION library the build makes of the same sources, the one
# cellgate loads (<build>/algorithms/library.lua: the load-time part of
# each entry once, the part after its "--#call" line as a function's
# body). Then, for each case, FLUSHALL, CONFIG RESETSTAT, N calls
# with redis-benchmark (C clients, random keys from __rand_int__), and
# INFO commandstats. Cases:
#   gcra each       gcra.lua "runs" mode (the proxy's CL.THROTTLE batches),
#                   BATCH random keys per call, 15 30 60
#   gcra each hot   the same with one key BATCH times (all but the first
#                   16 decisions of the run refused)
#   <algo>          limiter.lua, one group of one limit (about 100 per
#                   minute, as limiter.sh), random identities
#   <algo> hot      the same on one identity (refused once it is spent)
#   <algo> each     limiter.lua "each" mode, BATCH groups per call (skipped
#                   when the script has no such mode)
#   module          with CELL_MODULE set: CL.THROTTLE key 15 30 60 of the
#                   redis-cell module, random keys and one hot key
# A call that fails (an error reply) makes the script die: every number is
# of successful calls. Every case runs R times, the cases in turn, and the
# median is reported (the machine's other work moves single runs a lot).
#
# Environment (all optional):
#   BUILD        build directory with the expanded scripts and the
#                library (default build)
#   SCRIPTS      directory of the expanded gcra.lua and limiter.lua
#                (default $BUILD/algorithms; to measure other versions,
#                whose script form only is measured then)
#   R            runs of each case (default 3)
#   FORMS        "script" and/or "function" (default "script function";
#                function needs Redis 7 and $BUILD/algorithms/library.lua)
#   N            calls per case (default 3000)
#   C            redis-benchmark clients (default 4)
#   BATCH        decisions per batched call (default 64)
#   KEYSPACE     redis-benchmark -r (default 1000000)
#   ALGOS        limiter.lua algorithms (default: all seven; "" skips)
#   CELL_MODULE  path of the redis-cell module (libredis_cell.so)
set -euo pipefail

# Its own defaults, before lib.sh sets the throughput benchmarks' ones.
N=${N:-3000}
C=${C:-4}
KEYSPACE=${KEYSPACE:-1000000}
# shellcheck source=tests/bench/lib.sh
. "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
if [[ -n ${SCRIPTS:-} ]]; then
    FORMS=${FORMS:-script} # the library is $BUILD's, not of these scripts
fi
SCRIPTS=${SCRIPTS:-$BUILD/algorithms}
R=${R:-3}
FORMS=${FORMS:-"script function"}
BATCH=${BATCH:-64}
ALGOS=${ALGOS-"gcra token_bucket leaky_bucket fixed_window sliding_window sliding_log sliding_counter"}

require_redis_tools
for s in gcra limiter; do
    [[ -r $SCRIPTS/$s.lua ]] || die "$SCRIPTS/$s.lua not found (build first)"
done
bench_init

rport=$(free_port)
start_redis "$rport"
rcli() { redis-cli -p "$rport" "$@"; }

declare -A sha
for s in gcra limiter; do
    sha[$s]=$(rcli -x SCRIPT LOAD <"$SCRIPTS/$s.lua" | tr -d '\r')
    [[ ${sha[$s]} =~ ^[0-9a-f]{40}$ ]] || die "SCRIPT LOAD $s: ${sha[$s]}"
done
have_function=0
library=$BUILD/algorithms/library.lua
if [[ " $FORMS " == *" function "* ]]; then
    if [[ -r $library ]]; then
        # Its reply is the library's name, which its functions start with.
        lib=$(rcli -x FUNCTION LOAD REPLACE <"$library" 2>&1)
        [[ $lib == cellgate_* ]] || die "FUNCTION LOAD: $lib"
        have_function=1
    else
        echo "no function form: $library not found (build first)" >&2
    fi
fi

# The usec_per_call of command $1 (lower case) since the last RESETSTAT,
# after checking that no call failed.
usec_per_call() {
    local line
    line=$(rcli INFO commandstats | tr -d '\r' | grep "^cmdstat_$1:" || true)
    [[ -n $line ]] || die "no calls of $1 counted"
    if [[ $line =~ failed_calls=([0-9]+) && ${BASH_REMATCH[1]} -ne 0 ]]; then
        die "$1: failed calls: $line ($(rcli INFO errorstats | tr -d '\r' | grep errorstat_ | tr '\n' ' '))"
    fi
    [[ $line =~ usec_per_call=([0-9.]+) ]] || die "no usec_per_call in $line"
    echo "${BASH_REMATCH[1]}"
}

# run LABEL FORM DECISIONS KEYSPACE CMD...: N calls of CMD, one line
# "label|form|decisions|usec_per_call" in $results.
run() {
    local label=$1 form=$2 per=$3 space=$4 cmd u
    shift 4
    rcli FLUSHALL >/dev/null
    rcli CONFIG RESETSTAT >/dev/null
    bench_csv "$label" -h 127.0.0.1 -p "$rport" -c "$C" -n "$N" -r "$space" "$@"
    cmd=$(tr '[:upper:]' '[:lower:]' <<<"$1")
    u=$(usec_per_call "$cmd")
    echo "$label|$form|$per|$u" >>"$results"
    echo "run $rep/$R: $label ($form): $u usec per call" >&2
}

# call FORM SCRIPT NKEYS ARGS...: the command that runs SCRIPT in FORM.
call() {
    local form=$1 s=$2
    shift 2
    if [[ $form == script ]]; then
        echo EVALSHA "${sha[$s]}" "$@"
    else
        echo FCALL "${lib}_$s" "$@"
    fi
}

forms=(script)
[[ $have_function == 1 ]] && forms+=(function)

# ---------------- The redis-cell module ----------------

if [[ -n ${CELL_MODULE:-} ]]; then
    mport=$(free_port)
    start_bg "redis-server (module)" "$mport" "$workdir/module.log" \
        redis-server --port "$mport" --bind 127.0.0.1 --save "" \
        --appendonly no --daemonize no --loadmodule "$CELL_MODULE"
fi
module_cases() {
    [[ -n ${CELL_MODULE:-} ]] || return 0
    local rport=$mport
    run "module" cl.throttle 1 "$KEYSPACE" CL.THROTTLE 'k:__rand_int__' 15 30 60
    run "module hot" cl.throttle 1 1 CL.THROTTLE hot 15 30 60
}

# 15 30 60: EI = 2 s, so INC "2 0" and DVT = 16 EI "32 0"; one run of
# BATCH keys, as the proxy batches calls of one limit.
gcra_batch() {
    local key=$1 i keys=()
    for ((i = 0; i < BATCH; i++)); do
        keys+=("$key")
    done
    echo "$BATCH ${keys[*]} runs 1 $BATCH 2 0 32 0"
}

# The four parameters of each algorithm (limiter.lua's units), about 100
# per minute; "-" is an unused one.
declare -A params_of=(
    [gcra]="0 600000000 60 0"
    [token_bucket]="100 1670000 - -"
    [leaky_bucket]="100 600 1 -"
    [fixed_window]="100 60000 - -"
    [sliding_window]="100 60000 1000 -"
    [sliding_log]="100 60000 0 -"
    [sliding_counter]="100 60000 - -"
)
for a in $ALGOS; do
    [[ -n ${params_of[$a]:-} ]] || die "ALGOS: unknown algorithm $a"
done

# One group's ARGV tail after the mode: algo, 4 parameters, undo, m = 0.
group_args() {
    local p x
    read -ra p <<<"${params_of[$1]}"
    printf '%s' "$1"
    for x in "${p[@]}"; do
        [[ $x == - ]] && x='""'
        printf ' %s' "$x"
    done
    printf ' "" 0'
}

limiter_each_ok=0
if rcli EVALSHA "${sha[limiter]}" 2 probe probe#o each "" 1 check 1 1 \
    gcra 0 600000000 60 0 "" 0 2>&1 | grep -q '^[0-9]'; then
    limiter_each_ok=1
fi
rcli DEL probe >/dev/null

# Every case once. redis-benchmark takes "" as an empty argument only
# through eval of the command line, hence the evals.
all_cases() {
    local form a g i keys args
    for form in "${forms[@]}"; do
        # shellcheck disable=SC2046 # split into arguments on purpose
        run "gcra each" "$form" "$BATCH" "$KEYSPACE" \
            $(call "$form" gcra $(gcra_batch 'k:__rand_int__'))
        # shellcheck disable=SC2046
        run "gcra each hot" "$form" "$BATCH" 1 \
            $(call "$form" gcra $(gcra_batch hot))
    done
    for a in $ALGOS; do
        g=$(group_args "$a")
        for form in "${forms[@]}"; do
            eval "run '$a' $form 1 $KEYSPACE $(call "$form" limiter 2 "$a:__rand_int__" "$a#o" check '""' 1 "$g")"
            eval "run '$a hot' $form 1 1 $(call "$form" limiter 2 "$a:hot" "$a#o" check '""' 1 "$g")"
            if [[ $limiter_each_ok == 1 ]]; then
                keys=() args=()
                for ((i = 0; i < BATCH; i++)); do
                    keys+=("$a:__rand_int__" "$a#o")
                    args+=(check 1 1 "$g")
                done
                eval "run '$a each' $form $BATCH $KEYSPACE $(call "$form" limiter \
                    $((2 * BATCH)) "${keys[*]}" each '""' "$BATCH" "${args[*]}")"
            fi
        done
    done
}

for rep in $(seq 1 "$R"); do
    all_cases
    module_cases
done

echo
echo "usec Redis spends per call and per decision (INFO commandstats; $N calls, -c $C, median of $R)"
printf '%-22s %-11s %10s %6s %10s\n' case form usec/call dec/call usec/dec
awk -F'|' '!seen[$1 "|" $2]++ { print $1 "|" $2 "|" $3 }' "$results" |
    while IFS='|' read -r label form per; do
        u=$(awk -F'|' -v l="$label" -v f="$form" '$1 == l && $2 == f { print $4 }' \
            "$results" | sort -g | awk '{ v[NR] = $1 } END {
                if (NR % 2) print v[(NR + 1) / 2];
                else printf "%.2f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }')
        printf '%-22s %-11s %10s %6s %10s\n' "$label" "$form" "$u" "$per" \
            "$(awk -v u="$u" -v n="$per" 'BEGIN { printf "%.3f", u / n }')"
    done
