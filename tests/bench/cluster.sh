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

# shellcheck source=tests/bench/lib.sh
. "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/../.."
TESTS=${TESTS:-get,set}
export MASTERS=${MASTERS:-3}
export REPLICAS=${REPLICAS:-0}

require_redis_tools
require_cellgate
[[ -x scripts/cluster.sh ]] || die "scripts/cluster.sh not found"

cluster_started=0
# Runs at exit, once cellgate is stopped.
bench_on_exit() {
    if [[ $cluster_started -eq 1 ]]; then
        scripts/cluster.sh stop "$workdir/cluster" || true
    fi
}
bench_init

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
start_bg cellgate "$cport" "$workdir/cellgate.log" \
    "$CELLGATE" --listen "127.0.0.1:$cport" --cluster "$seeds" --log-level warn
wait_cluster_proxy "$cport"

targets=(cellgate direct)
echo "cluster: $MASTERS masters, $REPLICAS replicas each ($seeds)"
echo "redis-benchmark -c $C -n $N -r $KEYSPACE -t $TESTS, pipelines: $PIPELINES, $R runs each, median reported"
echo "  cellgate  -h 127.0.0.1 -p $cport"
echo "  direct    --cluster -h 127.0.0.1 -p $nport"
echo

# ---------------- Run ----------------

# bench_one TARGET PIPELINE: one line per test: target pipeline test rps
# p50 p99.
bench_one() {
    local where
    if [[ $1 == cellgate ]]; then
        where=(-h 127.0.0.1 -p "$cport")
    else
        where=(--cluster -h 127.0.0.1 -p "$nport")
    fi
    bench_csv "$1" "${where[@]}" -c "$C" -n "$N" -r "$KEYSPACE" -P "$2" \
        -t "$TESTS"
    # --cluster prints its node list first, which has no test rows.
    tr -d '"' <"$workdir/bench.csv" |
        awk -F, -v t="$1" -v p="$2" \
            '$1 ~ /^[A-Z]+$/ && NF >= 7 { print t, p, $1, $2, $5, $7 }' \
            >>"$results"
}
bench_run_all

# ---------------- Report ----------------

print_medians 9

echo
echo "ratios cellgate/direct (rps: higher is better for cellgate; p99: lower is better)"
printf '%-6s %8s %14s %14s\n' test pipeline rps_ratio p99_ratio
for x in $(bench_tests); do
    for pl in $PIPELINES; do
        printf '%-6s %8s %14s %14s\n' "$x" "$pl" \
            "$(ratio "$(median 4 cellgate "$pl" "$x")" "$(median 4 direct "$pl" "$x")")" \
            "$(ratio "$(median 6 cellgate "$pl" "$x")" "$(median 6 direct "$pl" "$x")")"
    done
done
