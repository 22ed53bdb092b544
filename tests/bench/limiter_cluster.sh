#!/usr/bin/env bash
# Limiter benchmark in cluster mode: CL.THROTTLE through cellgate in front
# of a Redis Cluster against the redis-cell module loaded in every node of a
# second cluster, called with `redis-benchmark --cluster` (the client reads
# the slot map, connects to every master and sends each key to its owner),
# side by side in one run, the tests in turn (alternating, so drift hits
# every test alike), R times per pipeline depth, medians reported.
#
# Starts on free loopback ports two local clusters of MASTERS masters each
# (no replicas, so that replication does not compete for the CPU with the
# measured paths): a plain one with one cellgate --cluster in front of it,
# and, when CELL_MODULE names redis-cell's libredis_cell.so, one whose every
# node runs redis-server --loadmodule CELL_MODULE. The tests
# (redis-benchmark -c C -n N -r KEYSPACE -P depth):
#   cl          CL.THROTTLE key:__rand_int__ B C P    -> cellgate -> cluster
#   cl_module   --cluster CL.THROTTLE key:{tag}:__rand_int__ B C P
#                                                     -> module cluster
#   cl_evalsha  --cluster EVALSHA <gcra.lua> 1 key:{tag}:__rand_int__ <ARGV>
#                                                     -> plain cluster
# ({tag} is replaced by redis-benchmark with a hash tag of the node each
# client talks to; through cellgate the keys spread over all slots.) The
# EVALSHA test, as in limiter.sh, needs the built algorithms/gcra.lua beside
# CELLGATE, loaded into every node; without it, or without CELL_MODULE, that
# test is skipped with a note. Every node of a test's cluster is flushed
# before each run.
#
# The costs are limiter.sh's (see "Tests with their costs" in lib.sh),
# summed over the nodes of the cluster: Redis us per decision by INFO
# commandstats and by process CPU, Redis CPU % (all nodes together, so up to
# MASTERS x 100) and cellgate's CPU.
#
# Prints the medians, the Redis commands per decision, and a markdown table
# (what | -P 1 | -P 16) with the machine and date, for docs/BENCHMARKS.md. It
# prints; it never asserts. Exit status is 0 unless the setup fails.
#
# Environment (all optional):
#   CELLGATE     cellgate binary (default build/cellgate; use a Release build)
#   CELL_MODULE  redis-cell's libredis_cell.so (unset: no module baseline)
#   N            requests per redis-benchmark run (default 100000)
#   R            repetitions per test and pipeline depth (default 3)
#   C            parallel clients (default 50)
#   PIPELINES    pipeline depths (default "1 16")
#   KEYSPACE     redis-benchmark -r (default 100000)
#   LIMIT        "max_burst count period" (default "15 30 60")
#   MASTERS      masters per cluster (default 3)
set -euo pipefail

# shellcheck source=tests/bench/lib.sh
. "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/../.."
LIMIT=${LIMIT:-"15 30 60"}
MASTERS=${MASTERS:-3}
CELL_MODULE=${CELL_MODULE:-}

require_redis_tools
require_cellgate
require_cell_module
[[ $MASTERS =~ ^[0-9]+$ && $MASTERS -ge 3 ]] || die "MASTERS must be a number >= 3"
check_limit LIMIT
set_gcra_argv "$LIMIT"

bench_init

# ---------------- Start the clusters and cellgate ----------------

start_cluster plain "$MASTERS"
plain_ports="${cluster_ports[*]}"
plain_first=${cluster_ports[0]}
plain_seeds=$cluster_seeds

cport=$(free_port)
start_bg cellgate "$cport" "$workdir/cellgate.log" \
    "$CELLGATE" --listen "127.0.0.1:$cport" --cluster "$plain_seeds" \
    --log-level warn
cpid=$last_pid
wait_cluster_proxy "$cport"

module_ports=""
if [[ -n $CELL_MODULE ]]; then
    start_cluster module "$MASTERS" --loadmodule "$CELL_MODULE"
    module_ports="${cluster_ports[*]}"
    module_first=${cluster_ports[0]}
    module_seeds=$cluster_seeds
else
    notes+=("CELL_MODULE unset: no redis-cell module baseline (set it to a built libredis_cell.so)")
fi

# shellcheck disable=SC2086 # one argument per port on purpose
load_gcra_script $plain_ports

add_test cl "CL.THROTTLE via cellgate, cluster" "-h 127.0.0.1 -p $cport" \
    "$plain_ports" "$cpid" "CL.THROTTLE key:__rand_int__ $LIMIT"
if [[ -n $module_ports ]]; then
    add_test cl_module "CL.THROTTLE module, --cluster" \
        "--cluster -h 127.0.0.1 -p $module_first" "$module_ports" "" \
        "CL.THROTTLE key:{tag}:__rand_int__ $LIMIT"
fi
if [[ -n $sha ]]; then
    add_test cl_evalsha "EVALSHA gcra.lua, --cluster" \
        "--cluster -h 127.0.0.1 -p $plain_first" "$plain_ports" "" \
        "EVALSHA $sha 1 key:{tag}:__rand_int__ $ARGV4"
fi

# On a key of the node redis-cli asks (-c follows a redirection).
check_test_replies -c

echo "machine: $(machine_line)"
echo "clusters: $MASTERS masters, no replicas; plain $plain_seeds${module_ports:+; module ${module_seeds:-}}"
echo "redis-benchmark -c $C -n $N -r $KEYSPACE, pipelines: $PIPELINES, $R runs each, median reported"
echo "cellgate: $CELLGATE${CELL_MODULE:+, module: $CELL_MODULE}"

# ---------------- Run and report ----------------

run_cost_tests
md_header
md_row_ratio "Cluster, CL.THROTTLE random keys: cellgate / module (--cluster)" cl cl_module
md_row_ratio "Cluster, CL.THROTTLE random keys: cellgate / EVALSHA gcra.lua (--cluster)" cl cl_evalsha
for t in "${tests[@]}"; do
    md_row_cost "$t"
done
md_notes
