#!/usr/bin/env bash
# Forwarding benchmark: GET/SET through cellgate, through twemproxy
# (nutcracker) and straight to redis, side by side in one run.
#
# Starts one redis-server, one nutcracker with a one-server pool and one
# cellgate on free loopback ports, then runs redis-benchmark against each
# target in turn (alternating, so drift hits every target alike), R times
# per pipeline depth, and prints the median rps, p50 and p99 per target with
# the ratios cellgate/twemproxy and cellgate/direct. It prints; it never
# asserts. Exit status is 0 unless the setup fails.
#
# Environment (all optional):
#   CELLGATE   cellgate binary (default build/cellgate; use a Release build)
#   N          requests per redis-benchmark run (default 100000)
#   R          repetitions per target and pipeline depth (default 3)
#   C          parallel clients (default 50)
#   PIPELINES  pipeline depths (default "1 16")
#   TESTS      redis-benchmark -t list (default get,set)
#   KEYSPACE   redis-benchmark -r (default 100000)
#
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
declare -A port_of

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
else
    echo "note: cellgate binary '$CELLGATE' not found or not executable; skipping cellgate (set CELLGATE=path)" >&2
fi

echo "redis-benchmark -c $C -n $N -r $KEYSPACE -t $TESTS, pipelines: $PIPELINES, $R runs each, median reported"
echo "targets: ${targets[*]}"
echo

# ---------------- Run ----------------

# bench_one TARGET PIPELINE: one line per test: target pipeline test rps
# p50 p99.
bench_one() {
    bench_csv "$1" -h 127.0.0.1 -p "${port_of[$1]}" -c "$C" -n "$N" \
        -r "$KEYSPACE" -P "$2" -t "$TESTS"
    tr -d '"' <"$workdir/bench.csv" |
        awk -F, -v t="$1" -v p="$2" \
            '$1 != "test" && NF >= 7 { print t, p, $1, $2, $5, $7 }' \
            >>"$results"
}
bench_run_all

# ---------------- Report ----------------

print_medians 10

if [[ -n ${port_of[cellgate]:-} ]]; then
    echo
    echo "ratios (rps: higher is better for cellgate; p99: lower is better)"
    printf '%-6s %8s %14s %14s %14s %14s\n' test pipeline \
        rps_vs_twem rps_vs_direct p99_vs_twem p99_vs_direct
    for x in $(bench_tests); do
        for pl in $PIPELINES; do
            c_rps=$(median 4 cellgate "$pl" "$x")
            c_p99=$(median 6 cellgate "$pl" "$x")
            t_rps=$(median 4 twemproxy "$pl" "$x")
            t_p99=$(median 6 twemproxy "$pl" "$x")
            d_rps=$(median 4 direct "$pl" "$x")
            d_p99=$(median 6 direct "$pl" "$x")
            printf '%-6s %8s %14s %14s %14s %14s\n' "$x" "$pl" \
                "$(ratio "$c_rps" "$t_rps")" "$(ratio "$c_rps" "$d_rps")" \
                "$(ratio "$c_p99" "$t_p99")" "$(ratio "$c_p99" "$d_p99")"
        done
    done
fi
