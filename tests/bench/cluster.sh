#!/usr/bin/env bash
# Cluster benchmark: GET/SET through cellgate in cluster mode against
# `redis-benchmark --cluster` straight to the nodes, side by side in one run.
#
# Starts a local cluster with scripts/cluster.sh (3 masters; no replicas by
# default, so that replication does not compete for the CPU with the
# measured paths) and one cellgate with --cluster on free loopback ports,
# then runs redis-benchmark against each target in turn (alternating, so
# drift hits both alike), R times per pipeline depth:
#   cellgate  redis-benchmark -h 127.0.0.1 -p <cellgate> ...   (one address)
#   direct    redis-benchmark --cluster -p <a node> ...        (the client
#             reads the slot map, connects to every master and sends each
#             key to its owner; its keys carry hash tags of their node)
# and prints the median rps, p50 and p99 per target with the ratio
# cellgate/direct. It prints; it never asserts. Exit status is 0 unless the
# setup fails.
#
# Environment (all optional):
#   CELLGATE   cellgate binary (default build/cellgate; use a Release build)
#   N          requests per redis-benchmark run (default 100000)
#   R          repetitions per target and pipeline depth (default 3)
#   C          parallel clients (default 50)
#   PIPELINES  pipeline depths (default "1 16")
#   TESTS      redis-benchmark -t list (default get,set)
#   KEYSPACE   redis-benchmark -r (default 100000)
#   MASTERS    masters of the cluster (default 3)
#   REPLICAS   replicas per master (default 0)
set -euo pipefail

cd "$(dirname "$0")/../.."
CELLGATE=${CELLGATE:-build/cellgate}
N=${N:-100000}
R=${R:-3}
C=${C:-50}
PIPELINES=${PIPELINES:-"1 16"}
TESTS=${TESTS:-get,set}
KEYSPACE=${KEYSPACE:-100000}
export MASTERS=${MASTERS:-3}
export REPLICAS=${REPLICAS:-0}
READY_TRIES=200 # x 50 ms: bounded wait for a port to accept

die() {
    echo "cluster.sh: $*" >&2
    exit 1
}

for tool in redis-server redis-benchmark redis-cli; do
    command -v "$tool" >/dev/null || die "$tool not found (apt-get install redis-server redis-tools)"
done
[[ -x $CELLGATE ]] || die "cellgate binary '$CELLGATE' not found (cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DPX_TESTS=OFF && cmake --build build --target cellgate)"
[[ -x scripts/cluster.sh ]] || die "scripts/cluster.sh not found"
if ldd "$CELLGATE" 2>/dev/null | grep -q -e libasan -e libubsan; then
    echo "warning: $CELLGATE is a sanitizer build; its numbers are not representative (build with -DCMAKE_BUILD_TYPE=Release)" >&2
fi

workdir=$(mktemp -d "${TMPDIR:-/tmp}/cellgate-bench-XXXXXX")
pids=()
cluster_started=0
cleanup() {
    local pid
    for pid in "${pids[@]+"${pids[@]}"}"; do
        kill "$pid" 2>/dev/null || true
    done
    for pid in "${pids[@]+"${pids[@]}"}"; do
        wait "$pid" 2>/dev/null || true
    done
    if [[ $cluster_started -eq 1 ]]; then
        scripts/cluster.sh stop "$workdir/cluster" || true
    fi
    rm -rf "$workdir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# True when something accepts TCP connections on 127.0.0.1:$1.
port_open() {
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# Prints a loopback port nobody listens on.
free_port() {
    local p _
    for _ in $(seq 1 100); do
        p=$((20000 + RANDOM % 40000))
        if ! port_open "$p"; then
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

# ---------------- Start the cluster and cellgate ----------------

mkdir -p "$workdir/cluster"
# cluster.sh stops what it started when its start fails; from here on the
# trap stops the nodes.
cluster_started=1
seeds=$(scripts/cluster.sh start "$workdir/cluster") || die "the cluster did not start"
[[ -n $seeds ]] || die "scripts/cluster.sh printed no seed list"
first=${seeds%%,*}
nport=${first##*:}

cport=$(free_port)
"$CELLGATE" --listen "127.0.0.1:$cport" --cluster "$seeds" --log-level warn \
    >"$workdir/cellgate.log" 2>&1 &
pids+=($!)
wait_port "$cport" "$!" cellgate "$workdir/cellgate.log"
# The proxy answers once it has the slot map: a SET on any key works.
for _ in $(seq 1 "$READY_TRIES"); do
    [[ $(redis-cli -p "$cport" SET bench:ready 1 2>/dev/null) == OK ]] && break
    sleep 0.05
done
[[ $(redis-cli -p "$cport" SET bench:ready 1 2>/dev/null) == OK ]] ||
    die "cellgate does not serve the cluster: $(redis-cli -p "$cport" SET bench:ready 1 2>&1)"

targets=(cellgate direct)
echo "cluster: $MASTERS masters, $REPLICAS replicas each ($seeds)"
echo "redis-benchmark -c $C -n $N -r $KEYSPACE -t $TESTS, pipelines: $PIPELINES, $R runs each, median reported"
echo "  cellgate  -h 127.0.0.1 -p $cport"
echo "  direct    --cluster -h 127.0.0.1 -p $nport"
echo

# ---------------- Run ----------------

# One line per run and test: target pipeline test rps p50 p99.
results="$workdir/results"
: >"$results"
for rep in $(seq 1 "$R"); do
    for pl in $PIPELINES; do
        for target in "${targets[@]}"; do
            echo "run $rep/$R: $target -P $pl" >&2
            if [[ $target == cellgate ]]; then
                where=(-h 127.0.0.1 -p "$cport")
            else
                where=(--cluster -h 127.0.0.1 -p "$nport")
            fi
            redis-benchmark "${where[@]}" -c "$C" -n "$N" -r "$KEYSPACE" \
                -P "$pl" -t "$TESTS" --csv \
                2>"$workdir/bench.err" >"$workdir/bench.csv" ||
                { cat "$workdir/bench.err" >&2; die "redis-benchmark failed against $target"; }
            # "test","rps","avg","min","p50","p95","p99","max"; --cluster
            # prints its node list first, which has no such rows.
            tr -d '"' <"$workdir/bench.csv" |
                awk -F, -v t="$target" -v p="$pl" \
                    '$1 ~ /^[A-Z]+$/ && NF >= 7 { print t, p, $1, $2, $5, $7 }' \
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

printf '%-6s %8s %-9s %12s %9s %9s\n' test pipeline target rps p50_ms p99_ms
for x in $tests_seen; do
    for pl in $PIPELINES; do
        for target in "${targets[@]}"; do
            printf '%-6s %8s %-9s %12s %9s %9s\n' "$x" "$pl" "$target" \
                "$(median 4 "$target" "$pl" "$x")" \
                "$(median 5 "$target" "$pl" "$x")" \
                "$(median 6 "$target" "$pl" "$x")"
        done
    done
done

echo
echo "ratios cellgate/direct (rps: higher is better for cellgate; p99: lower is better)"
printf '%-6s %8s %14s %14s\n' test pipeline rps_ratio p99_ratio
for x in $tests_seen; do
    for pl in $PIPELINES; do
        printf '%-6s %8s %14s %14s\n' "$x" "$pl" \
            "$(ratio "$(median 4 cellgate "$pl" "$x")" "$(median 4 direct "$pl" "$x")")" \
            "$(ratio "$(median 6 cellgate "$pl" "$x")" "$(median 6 direct "$pl" "$x")")"
    done
done
