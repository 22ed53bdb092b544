#!/usr/bin/env bash
# Forwarding benchmark: GET/SET through cellgate, through twemproxy
# (nutcracker) and straight to redis, side by side in one run.
#
# Starts one redis-server, one nutcracker with a one-server pool and one
# cellgate on free loopback ports, then runs redis-benchmark against each
# target in turn (alternating, so drift hits every target alike), R times
# per pipeline depth and test, and prints the median rps, p50, p99 and the
# proxy's CPU per request (its user + system ticks in /proc/PID/stat over
# the run, divided by the requests) per target, with the ratios
# cellgate/twemproxy and cellgate/direct. It prints; it never asserts. Exit
# status is 0 unless the setup fails.
#
# Environment (all optional):
#   CELLGATE   cellgate binary (default build/cellgate; use a Release build)
#   N          requests per redis-benchmark run (default 100000)
#   R          repetitions per target and pipeline depth (default 3)
#   C          parallel clients (default 50)
#   PIPELINES  pipeline depths (default "1 16")
#   TESTS      redis-benchmark -t list (default get,set)
#   KEYSPACE   redis-benchmark -r (default 100000)
#   BASELINE   a second cellgate binary (say a build of the previous
#              commit), run as one more target "baseline" in the same
#              alternation, so a change is measured against it in one run
#   STRACE     1: after the runs, one more GET run at -P 1 per proxy under
#              strace -c, printing its system calls per request by name
#              (strace slows the proxy: its rps is not reported)
#
# CPU per request comes in clock ticks (1/CLK_TCK s, 10 ms usually): with
# N=100000 a run gives about 100 ticks, so its resolution is about 1 %.
# A target whose binary is missing (cellgate not built, nutcracker not
# installed) is skipped with a message; the others still run.
set -euo pipefail

# shellcheck source=tests/bench/lib.sh
. "$(dirname "$0")/lib.sh"
TESTS=${TESTS:-get,set}

require_redis_tools
bench_init

# ---------------- Start the targets ----------------

targets=()
declare -A port_of pid_of

rport=$(free_port)
start_redis "$rport"
targets+=(direct)
port_of[direct]=$rport

if command -v nutcracker >/dev/null; then
    tport=$(free_port)
    sport=$(free_port)
    cat >"$workdir/nutcracker.yml" <<EOF
bench:
  listen: 127.0.0.1:$tport
  redis: true
  hash: fnv1a_64
  distribution: ketama
  auto_eject_hosts: false
  preconnect: true
  servers:
   - 127.0.0.1:$rport:1
EOF
    nutcracker -t -c "$workdir/nutcracker.yml" >"$workdir/nutcracker.log" 2>&1 ||
        { cat "$workdir/nutcracker.log" >&2; die "bad nutcracker config"; }
    nutcracker -c "$workdir/nutcracker.yml" -s "$sport" -a 127.0.0.1 \
        -o "$workdir/nutcracker.log" &
    pids+=($!)
    wait_port "$tport" "$!" nutcracker "$workdir/nutcracker.log"
    targets+=(twemproxy)
    port_of[twemproxy]=$tport
    pid_of[twemproxy]=$!
else
    echo "note: nutcracker not installed; skipping twemproxy" >&2
fi

if [[ -x $CELLGATE ]]; then
    warn_if_sanitized
    cport=$(free_port)
    start_bg cellgate "$cport" "$workdir/cellgate.log" \
        "$CELLGATE" --listen "127.0.0.1:$cport" --upstream "127.0.0.1:$rport" \
        --log-level warn
    targets+=(cellgate)
    port_of[cellgate]=$cport
    pid_of[cellgate]=$last_pid
else
    echo "note: cellgate binary '$CELLGATE' not found or not executable; skipping cellgate (set CELLGATE=path)" >&2
fi

if [[ -n ${BASELINE:-} ]]; then
    [[ -x $BASELINE ]] || die "BASELINE '$BASELINE' is not an executable"
    bport=$(free_port)
    start_bg baseline "$bport" "$workdir/baseline.log" \
        "$BASELINE" --listen "127.0.0.1:$bport" --upstream "127.0.0.1:$rport" \
        --log-level warn
    targets+=(baseline)
    port_of[baseline]=$bport
    pid_of[baseline]=$last_pid
fi

echo "redis-benchmark -c $C -n $N -r $KEYSPACE -t $TESTS, pipelines: $PIPELINES, $R runs each, median reported"
echo "targets: ${targets[*]}"
echo

# ---------------- Run ----------------

# bench_one TARGET PIPELINE: one redis-benchmark run per test, one line
# each: target pipeline test rps p50 p99 us, us the proxy's CPU per request
# in microseconds ("-" for direct).
bench_one() {
    local t pid k0 k1 us
    pid=${pid_of[$1]:-}
    for t in ${TESTS//,/ }; do
        k0=-
        [[ -n $pid ]] && k0=$(proc_ticks "$pid")
        bench_csv "$1" -h 127.0.0.1 -p "${port_of[$1]}" -c "$C" -n "$N" \
            -r "$KEYSPACE" -P "$2" -t "$t"
        k1=-
        [[ -n $pid ]] && k1=$(proc_ticks "$pid")
        us=$(awk -v a="$k0" -v b="$k1" -v hz="$CLK_TCK" -v n="$N" 'BEGIN {
            if (a == "-" || b == "-") print "-";
            else printf "%.2f\n", (b - a) / hz * 1e6 / n }')
        tr -d '"' <"$workdir/bench.csv" |
            awk -F, -v t="$1" -v p="$2" -v us="$us" \
                '$1 != "test" && NF >= 7 { print t, p, $1, $2, $5, $7, us }' \
                >>"$results"
    done
}
bench_run_all

# strace_one TARGET: system calls per request of the proxy TARGET over one
# GET run at -P 1, by name, the most frequent first.
strace_one() {
    local pid=${pid_of[$1]} spid _
    strace -c -f -o "$workdir/strace.$1" -p "$pid" 2>"$workdir/strace.err" &
    spid=$!
    # strace says it attached on stderr once it has.
    for _ in $(seq 1 "$READY_TRIES"); do
        grep -q attached "$workdir/strace.err" && break
        kill -0 "$spid" 2>/dev/null || { cat "$workdir/strace.err" >&2; return 0; }
        sleep 0.05
    done
    bench_csv "$1" -h 127.0.0.1 -p "${port_of[$1]}" -c "$C" -n "$N" \
        -r "$KEYSPACE" -P 1 -t get
    kill -INT "$spid"
    wait "$spid" || true
    # strace -c rows: % time, seconds, usecs/call, calls, [errors,] name.
    printf '%-10s %6s total:' "$1" "$(awk -v n="$N" \
        '$NF == "total" { printf "%.2f", $4 / n }' "$workdir/strace.$1")"
    awk -v n="$N" '$1 ~ /^[0-9.]+$/ && $NF != "total" && $4 / n >= 0.01 {
            printf "%d %s %.2f\n", $4, $NF, $4 / n }' "$workdir/strace.$1" |
        sort -rn | awk '{ printf " %s %s", $2, $3 } END { print "" }'
}

# ---------------- Report ----------------

print_medians 10 cpu_us

# ratios OTHER: cellgate against OTHER and against direct.
ratios() {
    local x pl c_rps c_p99 c_us o_rps o_p99 o_us d_rps
    echo
    echo "ratios, cellgate / $1 (rps: higher is better for cellgate; p99 and CPU per request: lower is)"
    printf '%-6s %8s %10s %13s %10s %10s\n' test pipeline rps rps_vs_direct p99 cpu_us
    for x in $(bench_tests); do
        for pl in $PIPELINES; do
            c_rps=$(median 4 cellgate "$pl" "$x")
            c_p99=$(median 6 cellgate "$pl" "$x")
            c_us=$(median 7 cellgate "$pl" "$x")
            o_rps=$(median 4 "$1" "$pl" "$x")
            o_p99=$(median 6 "$1" "$pl" "$x")
            o_us=$(median 7 "$1" "$pl" "$x")
            d_rps=$(median 4 direct "$pl" "$x")
            printf '%-6s %8s %10s %13s %10s %10s\n' "$x" "$pl" \
                "$(ratio "$c_rps" "$o_rps")" "$(ratio "$c_rps" "$d_rps")" \
                "$(ratio "$c_p99" "$o_p99")" "$(ratio "$c_us" "$o_us")"
        done
    done
}
if [[ -n ${port_of[cellgate]:-} ]]; then
    [[ -n ${port_of[twemproxy]:-} ]] && ratios twemproxy
    [[ -n ${port_of[baseline]:-} ]] && ratios baseline
fi

if [[ ${STRACE:-0} == 1 ]]; then
    echo
    echo "system calls per request (strace -c, one GET run at -P 1 each, calls under 0.01 per request left out)"
    for target in "${targets[@]}"; do
        [[ -n ${pid_of[$target]:-} ]] && strace_one "$target"
    done
fi
