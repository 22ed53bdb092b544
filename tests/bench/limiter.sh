#!/usr/bin/env bash
# Limiter benchmark: CL.THROTTLE through cellgate against the same GCRA run
# as a Lua script straight on Redis with EVALSHA (what a user without
# cellgate would do), and against cellgate's embedded store (no Redis), side
# by side in one run.
#
# Starts one redis-server, one cellgate in front of it and one embedded
# cellgate on free loopback ports; loads algorithms/gcra.lua into the redis
# with SCRIPT LOAD (as built: <build>/algorithms/gcra.lua); then runs redis-benchmark against each target in turn
# (alternating, so drift hits every target alike), R times per pipeline
# depth, over KEYSPACE random keys (__rand_int__):
#   cellgate   CL.THROTTLE key:__rand_int__ B C P         -> cellgate -> redis
#   evalsha    EVALSHA <sha> 1 key:__rand_int__ <4 ARGV>  -> redis
#   embedded   CL.THROTTLE key:__rand_int__ B C P         -> cellgate alone
# The four ARGV values are the ones cellgate computes for B C P and
# quantity 1: inc_s inc_ns dvt_s dvt_ns, with INC = EI and DVT = EI * (B + 1)
# (for 15 30 60: EI = 2 s, so "2 0 32 0"). The EVALSHA target gets the raw
# script reply (4 values); cellgate also turns it into the five integers.
# The redis keyspace is flushed before every run against it, so every run
# starts from the same state.
#
# Prints the median rps, p50 and p99 per target and the ratios
# cellgate/evalsha and embedded/evalsha.
#
# Then one row per algorithm of limits.yaml: LIMITER CHECK <algo>:<id>
# through a cellgate whose tree has one node per algorithm (each about 100
# per minute), over KEYSPACE random identities, with its rps relative to
# the EVALSHA baseline above, and the Redis memory one identity costs
# (MEMORY USAGE of its key after 1 check and after 100, i.e. full).
#
# It prints; it never asserts. Exit status is 0 unless the setup fails.
#
# Environment (all optional):
#   CELLGATE   cellgate binary (default build/cellgate; use a Release build)
#   N          requests per redis-benchmark run (default 100000)
#   R          repetitions per target and pipeline depth (default 3)
#   C          parallel clients (default 50)
#   PIPELINES  pipeline depths (default "1 16")
#   KEYSPACE   redis-benchmark -r (default 100000)
#   LIMIT      "max_burst count period" (default "15 30 60")
#   ALGOS      algorithms of the per-algorithm rows (default: all seven;
#              "" skips them)
set -euo pipefail

# shellcheck source=tests/bench/lib.sh
. "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/../.."
LIMIT=${LIMIT:-"15 30 60"}
NS_PER_S=1000000000

require_redis_tools
require_cellgate
# The script as built (its shared parts pasted in), beside the binary.
SCRIPT=$(dirname "$CELLGATE")/algorithms/gcra.lua
[[ -r $SCRIPT ]] || die "$SCRIPT not found (build cellgate first)"

# The script arguments cellgate sends for LIMIT and quantity 1 (docs/ARCHITECTURE.md
# "CL.THROTTLE, exactly"; gcra.h: split as s = d / 1e9, ns = d % 1e9).
read -r B CNT P <<<"$LIMIT"
[[ $B =~ ^[0-9]+$ && $CNT =~ ^[1-9][0-9]*$ && $P =~ ^[1-9][0-9]*$ ]] ||
    die "LIMIT must be three non-negative integers, count and period > 0"
ei=$((P * NS_PER_S / CNT))
[[ $ei -gt 0 ]] || die "LIMIT gives a zero emission interval"
dvt=$((ei * (B + 1)))
ARGV4="$((ei / NS_PER_S)) $((ei % NS_PER_S)) $((dvt / NS_PER_S)) $((dvt % NS_PER_S))"

bench_init

# ---------------- Start the targets ----------------

rport=$(free_port)
start_redis "$rport"

# -x sends the file's exact bytes (the SHA cellgate embeds is of those).
sha=$(redis-cli -p "$rport" -x SCRIPT LOAD <"$SCRIPT" | tr -d '\r')
[[ $sha =~ ^[0-9a-f]{40}$ ]] || die "SCRIPT LOAD failed: $sha"

cport=$(free_port)
start_bg cellgate "$cport" "$workdir/cellgate.log" \
    "$CELLGATE" --listen "127.0.0.1:$cport" --upstream "127.0.0.1:$rport" \
    --log-level warn

eport=$(free_port)
start_bg "cellgate (embedded)" "$eport" "$workdir/embedded.log" \
    "$CELLGATE" --listen "127.0.0.1:$eport" --log-level warn

targets=(cellgate evalsha embedded)
declare -A port_of cmd_of
port_of[cellgate]=$cport
port_of[evalsha]=$rport
port_of[embedded]=$eport
cmd_of[cellgate]="CL.THROTTLE key:__rand_int__ $LIMIT"
cmd_of[evalsha]="EVALSHA $sha 1 key:__rand_int__ $ARGV4"
cmd_of[embedded]="CL.THROTTLE key:__rand_int__ $LIMIT"

# Every target must answer the way it will be measured: five integers from
# cellgate, the script's four values from redis (redis-cli prints the nil
# TAT of a new key as an empty line, so three non-empty lines).
for target in "${targets[@]}"; do
    # shellcheck disable=SC2086 # the command is split into arguments on purpose
    out=$(redis-cli -p "${port_of[$target]}" \
        ${cmd_of[$target]//__rand_int__/check-$target} 2>&1)
    want=5
    [[ $target == evalsha ]] && want=3
    lines=$(grep -c . <<<"$out" || true)
    if [[ $lines -ne $want ]] || grep -qi err <<<"$out"; then
        die "$target: unexpected reply to '${cmd_of[$target]}': $out"
    fi
done
redis-cli -p "$rport" FLUSHALL >/dev/null

echo "redis-benchmark -c $C -n $N -r $KEYSPACE, pipelines: $PIPELINES, $R runs each, median reported"
echo "limit: $LIMIT (script ARGV: $ARGV4), gcra.lua sha $sha"
for target in "${targets[@]}"; do
    printf '  %-9s port %-5s %s\n' "$target" "${port_of[$target]}" "${cmd_of[$target]}"
done
echo

# ---------------- Run ----------------

# bench_one TARGET PIPELINE: one line: target pipeline rps p50 p99.
bench_one() {
    if [[ $1 != embedded ]]; then
        redis-cli -p "$rport" FLUSHALL >/dev/null
    fi
    # shellcheck disable=SC2086 # the command is split into arguments on purpose
    bench_csv "$1" -h 127.0.0.1 -p "${port_of[$1]}" -c "$C" -n "$N" \
        -r "$KEYSPACE" -P "$2" ${cmd_of[$1]}
    tr -d '"' <"$workdir/bench.csv" |
        awk -F, -v t="$1" -v p="$2" \
            '$1 != "test" && NF >= 7 { print t, p, $2, $5, $7 }' \
            >>"$results"
}
bench_run_all

# ---------------- Report ----------------

printf '%8s %-10s %12s %9s %9s\n' pipeline target rps p50_ms p99_ms
for pl in $PIPELINES; do
    for target in "${targets[@]}"; do
        printf '%8s %-10s %12s %9s %9s\n' "$pl" "$target" \
            "$(median 3 "$target" "$pl")" "$(median 4 "$target" "$pl")" \
            "$(median 5 "$target" "$pl")"
    done
done

echo
echo "ratios against EVALSHA straight to redis (rps: higher is better; p99: lower is better)"
printf '%8s %17s %17s %17s %17s\n' pipeline rps_cellgate/lua rps_embedded/lua \
    p99_cellgate/lua p99_embedded/lua
for pl in $PIPELINES; do
    l_rps=$(median 3 evalsha "$pl")
    l_p99=$(median 5 evalsha "$pl")
    printf '%8s %17s %17s %17s %17s\n' "$pl" \
        "$(ratio "$(median 3 cellgate "$pl")" "$l_rps")" \
        "$(ratio "$(median 3 embedded "$pl")" "$l_rps")" \
        "$(ratio "$(median 5 cellgate "$pl")" "$l_p99")" \
        "$(ratio "$(median 5 embedded "$pl")" "$l_p99")"
done

# ---------------- One row per algorithm ----------------

ALGOS=${ALGOS-"gcra token_bucket leaky_bucket fixed_window sliding_window sliding_log sliding_counter"}
[[ -n $ALGOS ]] || exit 0

# About 100 per minute each, so most random identities admit.
declare -A limit_of=(
    [gcra]="[99, 100, 60]"
    [token_bucket]="[{algorithm: token_bucket, capacity: 100, refill_per_sec: 1.67}]"
    [leaky_bucket]="[{algorithm: leaky_bucket, size: 100, drip_ms: 600}]"
    [fixed_window]="[{algorithm: fixed_window, max: 100, window: 1m}]"
    [sliding_window]="[{algorithm: sliding_window, max: 100, window: 1m, resolution: 1s}]"
    [sliding_log]="[{algorithm: sliding_log, max: 100, window: 1m}]"
    [sliding_counter]="[{algorithm: sliding_counter, max: 100, window: 1m}]"
)
tree=$workdir/limits.yaml
: >"$tree"
for a in $ALGOS; do
    [[ -n ${limit_of[$a]:-} ]] || die "ALGOS: unknown algorithm $a"
    printf '%s:\n  children:\n    "*":\n      limits: %s\n' "$a" \
        "${limit_of[$a]}" >>"$tree"
done
tport=$(free_port)
start_bg "cellgate (tree)" "$tport" "$workdir/tree.log" \
    "$CELLGATE" --listen "127.0.0.1:$tport" --upstream "127.0.0.1:$rport" \
    --limits "$tree" --log-level warn

# Memory of one identity: its key after 1 check, and after 100 (full).
declare -A mem1_of mem100_of
redis-cli -p "$rport" FLUSHALL >/dev/null
for a in $ALGOS; do
    out=$(redis-cli -p "$tport" LIMITER CHECK "$a:mem" 2>&1)
    [[ $(grep -c . <<<"$out") -eq 5 ]] || die "LIMITER CHECK $a:mem: $out"
    key="cellgate:{$a:mem}#0:$a"
    mem1_of[$a]=$(redis-cli -p "$rport" MEMORY USAGE "$key" | tr -d '\r')
    for _ in $(seq 2 100); do
        echo "LIMITER CHECK $a:mem"
    done | redis-cli -p "$tport" >/dev/null
    mem100_of[$a]=$(redis-cli -p "$rport" MEMORY USAGE "$key" | tr -d '\r')
done

# The EVALSHA baseline per depth, before the results file is reused.
lua_results=$workdir/lua.results
for pl in $PIPELINES; do
    echo "$pl $(median 3 evalsha "$pl")"
done >"$lua_results"
: >"$results"
algo_one() {
    redis-cli -p "$rport" FLUSHALL >/dev/null
    bench_csv "$1" -h 127.0.0.1 -p "$tport" -c "$C" -n "$N" -r "$KEYSPACE" \
        -P "$2" LIMITER CHECK "$1:__rand_int__"
    tr -d '"' <"$workdir/bench.csv" |
        awk -F, -v t="$1" -v p="$2" \
            '$1 != "test" && NF >= 7 { print t, p, $2, $5, $7 }' \
            >>"$results"
}
for rep in $(seq 1 "$R"); do
    for pl in $PIPELINES; do
        for a in $ALGOS; do
            echo "run $rep/$R: LIMITER CHECK $a -P $pl" >&2
            algo_one "$a" "$pl"
        done
    done
done

echo
echo "LIMITER CHECK per algorithm through cellgate (Redis memory per identity: MEMORY USAGE of its key)"
printf '%8s %-16s %10s %9s %9s %12s %8s %8s\n' pipeline algorithm rps p50_ms \
    p99_ms rps/evalsha mem_1 mem_full
for pl in $PIPELINES; do
    l_rps=$(awk -v p="$pl" '$1 == p { print $2 }' "$lua_results")
    for a in $ALGOS; do
        printf '%8s %-16s %10s %9s %9s %12s %8s %8s\n' "$pl" "$a" \
            "$(median 3 "$a" "$pl")" "$(median 4 "$a" "$pl")" \
            "$(median 5 "$a" "$pl")" "$(ratio "$(median 3 "$a" "$pl")" "$l_rps")" \
            "${mem1_of[$a]}" "${mem100_of[$a]}"
    done
done
