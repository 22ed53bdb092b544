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

CELLGATE=${CELLGATE:-build/cellgate}
N=${N:-100000}
R=${R:-3}
C=${C:-50}
PIPELINES=${PIPELINES:-"1 16"}
TESTS=${TESTS:-get,set}
KEYSPACE=${KEYSPACE:-100000}
READY_TRIES=200 # x 50 ms: bounded wait for a port to accept

die() {
    echo "forward.sh: $*" >&2
    exit 1
}

for tool in redis-server redis-benchmark redis-cli; do
    command -v "$tool" >/dev/null || die "$tool not found (apt-get install redis-server redis-tools)"
done

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

targets=()
declare -A port_of

rport=$(free_port)
redis-server --port "$rport" --bind 127.0.0.1 --save "" --appendonly no \
    --daemonize no >"$workdir/redis.log" 2>&1 &
pids+=($!)
wait_port "$rport" "$!" redis-server "$workdir/redis.log"
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
    if ldd "$CELLGATE" 2>/dev/null | grep -q -e libasan -e libubsan; then
        echo "warning: $CELLGATE is a sanitizer build; its numbers are not representative (build with -DCMAKE_BUILD_TYPE=Release)" >&2
    fi
    cport=$(free_port)
    "$CELLGATE" --listen "127.0.0.1:$cport" --upstream "127.0.0.1:$rport" \
        --log-level warn >"$workdir/cellgate.log" 2>&1 &
    pids+=($!)
    wait_port "$cport" "$!" cellgate "$workdir/cellgate.log"
    targets+=(cellgate)
    port_of[cellgate]=$cport
else
    echo "note: cellgate binary '$CELLGATE' not found or not executable; skipping cellgate (set CELLGATE=path)" >&2
fi

echo "redis-benchmark -c $C -n $N -r $KEYSPACE -t $TESTS, pipelines: $PIPELINES, $R runs each, median reported"
echo "targets: ${targets[*]}"
echo

# ---------------- Run ----------------

# One line per run and test: target pipeline test rps p50 p99.
results="$workdir/results"
: >"$results"
for rep in $(seq 1 "$R"); do
    for pl in $PIPELINES; do
        for target in "${targets[@]}"; do
            echo "run $rep/$R: $target -P $pl" >&2
            redis-benchmark -h 127.0.0.1 -p "${port_of[$target]}" -c "$C" \
                -n "$N" -r "$KEYSPACE" -P "$pl" -t "$TESTS" --csv \
                2>"$workdir/bench.err" >"$workdir/bench.csv" ||
                { cat "$workdir/bench.err" >&2; die "redis-benchmark failed against $target"; }
            # "test","rps","avg","min","p50","p95","p99","max"
            tr -d '"' <"$workdir/bench.csv" |
                awk -F, -v t="$target" -v p="$pl" \
                    '$1 != "test" && NF >= 7 { print t, p, $1, $2, $5, $7 }' \
                    >>"$results"
        done
    done
done

# ---------------- Report ----------------

# median FIELD TARGET PIPELINE TEST: median of one column over the runs.
median() {
    awk -v f="$1" -v t="$2" -v p="$3" -v x="$4" \
        '$1 == t && $2 == p && $3 == x { print $f }' "$results" |
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

tests_seen=$(awk '{ print $3 }' "$results" | awk '!seen[$0]++')

printf '%-6s %8s %-10s %12s %9s %9s\n' test pipeline target rps p50_ms p99_ms
for x in $tests_seen; do
    for pl in $PIPELINES; do
        for target in "${targets[@]}"; do
            printf '%-6s %8s %-10s %12s %9s %9s\n' "$x" "$pl" "$target" \
                "$(median 4 "$target" "$pl" "$x")" \
                "$(median 5 "$target" "$pl" "$x")" \
                "$(median 6 "$target" "$pl" "$x")"
        done
    done
done

if [[ -n ${port_of[cellgate]:-} ]]; then
    echo
    echo "ratios (rps: higher is better for cellgate; p99: lower is better)"
    printf '%-6s %8s %14s %14s %14s %14s\n' test pipeline \
        rps_vs_twem rps_vs_direct p99_vs_twem p99_vs_direct
    for x in $tests_seen; do
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
