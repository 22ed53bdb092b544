#!/usr/bin/env bash
# Limiter benchmark: CL.THROTTLE through cellgate against the same GCRA run
# as a Lua script straight on Redis with EVALSHA (what a user without
# cellgate would do), and against cellgate's embedded store (no Redis), side
# by side in one run.
#
# Starts one redis-server, one cellgate in front of it and one embedded
# cellgate on free loopback ports; loads algorithms/gcra.lua into the redis
# with SCRIPT LOAD; then runs redis-benchmark against each target in turn
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
# cellgate/evalsha and embedded/evalsha. It prints; it never asserts. Exit
# status is 0 unless the setup fails.
#
# Environment (all optional):
#   CELLGATE   cellgate binary (default build/cellgate; use a Release build)
#   N          requests per redis-benchmark run (default 100000)
#   R          repetitions per target and pipeline depth (default 3)
#   C          parallel clients (default 50)
#   PIPELINES  pipeline depths (default "1 16")
#   KEYSPACE   redis-benchmark -r (default 100000)
#   LIMIT      "max_burst count period" (default "15 30 60")
set -euo pipefail

cd "$(dirname "$0")/../.."
CELLGATE=${CELLGATE:-build/cellgate}
N=${N:-100000}
R=${R:-3}
C=${C:-50}
PIPELINES=${PIPELINES:-"1 16"}
KEYSPACE=${KEYSPACE:-100000}
LIMIT=${LIMIT:-"15 30 60"}
SCRIPT=algorithms/gcra.lua
READY_TRIES=200 # x 50 ms: bounded wait for a port to accept
NS_PER_S=1000000000

die() {
    echo "limiter.sh: $*" >&2
    exit 1
}

for tool in redis-server redis-benchmark redis-cli; do
    command -v "$tool" >/dev/null || die "$tool not found (apt-get install redis-server redis-tools)"
done
[[ -x $CELLGATE ]] || die "cellgate binary '$CELLGATE' not found (cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DPX_TESTS=OFF && cmake --build build --target cellgate)"
[[ -r $SCRIPT ]] || die "$SCRIPT not found"
if ldd "$CELLGATE" 2>/dev/null | grep -q -e libasan -e libubsan; then
    echo "warning: $CELLGATE is a sanitizer build; its numbers are not representative (build with -DCMAKE_BUILD_TYPE=Release)" >&2
fi

# The script arguments cellgate sends for LIMIT and quantity 1 (DESIGN.md
# "CL.THROTTLE, exactly"; gcra.h: split as s = d / 1e9, ns = d % 1e9).
read -r B CNT P <<<"$LIMIT"
[[ $B =~ ^[0-9]+$ && $CNT =~ ^[1-9][0-9]*$ && $P =~ ^[1-9][0-9]*$ ]] ||
    die "LIMIT must be three non-negative integers, count and period > 0"
ei=$((P * NS_PER_S / CNT))
[[ $ei -gt 0 ]] || die "LIMIT gives a zero emission interval"
dvt=$((ei * (B + 1)))
ARGV4="$((ei / NS_PER_S)) $((ei % NS_PER_S)) $((dvt / NS_PER_S)) $((dvt % NS_PER_S))"

workdir=$(mktemp -d "${TMPDIR:-/tmp}/cellgate-bench-XXXXXX")
pids=()
cleanup() {
    local pid
    for pid in "${pids[@]+"${pids[@]}"}"; do
        kill "$pid" 2>/dev/null || true
    done
    for pid in "${pids[@]+"${pids[@]}"}"; do
        wait "$pid" 2>/dev/null || true
    done
    rm -rf "$workdir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# True when something accepts TCP connections on 127.0.0.1:$1.
port_open() {
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# Prints a loopback port nobody listens on and no earlier call returned.
used_ports=" "
free_port() {
    local p _
    for _ in $(seq 1 100); do
        p=$((20000 + RANDOM % 40000))
        if [[ $used_ports != *" $p "* ]] && ! port_open "$p"; then
            used_ports+="$p "
            echo "$p"
            return 0
        fi
    done
    die "no free port found"
}

# wait_port PORT PID NAME LOG: waits until PORT accepts, or fails when the
# process died or the bounded wait ran out.
wait_port() {
    local _
    for _ in $(seq 1 "$READY_TRIES"); do
        if port_open "$1"; then
            return 0
        fi
        if ! kill -0 "$2" 2>/dev/null; then
            tail -n 20 "$4" >&2 || true
            die "$3 exited during startup"
        fi
        sleep 0.05
    done
    tail -n 20 "$4" >&2 || true
    die "$3 did not listen on port $1"
}

# ---------------- Start the targets ----------------

rport=$(free_port)
redis-server --port "$rport" --bind 127.0.0.1 --save "" --appendonly no \
    --daemonize no >"$workdir/redis.log" 2>&1 &
pids+=($!)
wait_port "$rport" "$!" redis-server "$workdir/redis.log"

# -x sends the file's exact bytes (the SHA cellgate embeds is of those).
sha=$(redis-cli -p "$rport" -x SCRIPT LOAD <"$SCRIPT" | tr -d '\r')
[[ $sha =~ ^[0-9a-f]{40}$ ]] || die "SCRIPT LOAD failed: $sha"

cport=$(free_port)
"$CELLGATE" --listen "127.0.0.1:$cport" --upstream "127.0.0.1:$rport" \
    --log-level warn >"$workdir/cellgate.log" 2>&1 &
pids+=($!)
wait_port "$cport" "$!" cellgate "$workdir/cellgate.log"

eport=$(free_port)
"$CELLGATE" --listen "127.0.0.1:$eport" --log-level warn \
    >"$workdir/embedded.log" 2>&1 &
pids+=($!)
wait_port "$eport" "$!" "cellgate (embedded)" "$workdir/embedded.log"

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

# One line per run: target pipeline rps p50 p99.
results="$workdir/results"
: >"$results"
for rep in $(seq 1 "$R"); do
    for pl in $PIPELINES; do
        for target in "${targets[@]}"; do
            echo "run $rep/$R: $target -P $pl" >&2
            if [[ $target != embedded ]]; then
                redis-cli -p "$rport" FLUSHALL >/dev/null
            fi
            # shellcheck disable=SC2086 # the command is split into arguments on purpose
            redis-benchmark -h 127.0.0.1 -p "${port_of[$target]}" -c "$C" \
                -n "$N" -r "$KEYSPACE" -P "$pl" --csv ${cmd_of[$target]} \
                2>"$workdir/bench.err" >"$workdir/bench.csv" ||
                { cat "$workdir/bench.err" >&2; die "redis-benchmark failed against $target"; }
            # "test","rps","avg","min","p50","p95","p99","max"
            tr -d '"' <"$workdir/bench.csv" |
                awk -F, -v t="$target" -v p="$pl" \
                    '$1 != "test" && NF >= 7 { print t, p, $2, $5, $7 }' \
                    >>"$results"
        done
    done
done

# ---------------- Report ----------------

# median FIELD TARGET PIPELINE: median of one column over the runs.
median() {
    awk -v f="$1" -v t="$2" -v p="$3" '$1 == t && $2 == p { print $f }' \
        "$results" |
        sort -g |
        awk '{ v[NR] = $1 }
             END {
                 if (NR == 0) { print "-"; exit }
                 if (NR % 2) print v[(NR + 1) / 2];
                 else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2
             }'
}

# ratio A B: A/B to two decimals, or "-" when either is missing.
ratio() {
    awk -v a="$1" -v b="$2" 'BEGIN {
        if (a == "-" || b == "-" || b + 0 == 0) print "-";
        else printf "%.2f\n", a / b
    }'
}

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
