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
# client talks to; through cellgate the keys spread over all slots.) A
# --cluster test draws from KEYSPACE / MASTERS numbers: its tag makes each
# node's keys its own, so KEYSPACE numbers would be KEYSPACE keys per node,
# MASTERS times the keys cellgate's test spreads over the nodes, each come
# back to less often; a key in use costs cellgate's script a second
# command (a new one, one), the module two either way, so the module's
# test on more keys ran cheaper keys for cellgate's script, not for its own. The
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
#   MODULE_WIDE  1: also cl_module_wide, the module's test on KEYSPACE
#                numbers per node (MASTERS times cellgate's keys, as this
#                benchmark ran it before), to show what that changes
#   CELLGATE_B   a second cellgate binary (for example the build before a
#                change), in front of the same plain cluster: test cl_b,
#                run alternating with the others, so a change is measured
#                against its baseline in one run (unset: no such test)
set -euo pipefail

# shellcheck source=tests/bench/lib.sh
. "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/../.."
LIMIT=${LIMIT:-"15 30 60"}
MASTERS=${MASTERS:-3}
CELL_MODULE=${CELL_MODULE:-}
CELLGATE_B=${CELLGATE_B:-}
MODULE_WIDE=${MODULE_WIDE:-0}

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
if [[ -n $CELLGATE_B ]]; then
    [[ -x $CELLGATE_B ]] || die "CELLGATE_B '$CELLGATE_B' is not an executable"
    bport=$(free_port)
    start_bg "cellgate B" "$bport" "$workdir/cellgate-b.log" \
        "$CELLGATE_B" --listen "127.0.0.1:$bport" --cluster "$plain_seeds" \
        --log-level warn
    bpid=$last_pid
    wait_cluster_proxy "$bport"
fi

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
if [[ -n $CELLGATE_B ]]; then
    add_test cl_b "CL.THROTTLE via cellgate B ($CELLGATE_B), cluster" \
        "-h 127.0.0.1 -p $bport" "$plain_ports" "$bpid" \
        "CL.THROTTLE key:__rand_int__ $LIMIT"
fi
if [[ -n $module_ports ]]; then
    add_test cl_module "CL.THROTTLE module, --cluster" \
        "--cluster -h 127.0.0.1 -p $module_first" "$module_ports" "" \
        "CL.THROTTLE key:{tag}:__rand_int__ $LIMIT"
    if [[ $MODULE_WIDE == 1 ]]; then
        add_test cl_module_wide "CL.THROTTLE module, --cluster, KEYSPACE keys per node" \
            "--cluster -h 127.0.0.1 -p $module_first" "$module_ports" "" \
            "CL.THROTTLE key:{tag}:__rand_int__ $LIMIT"
    fi
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
echo "redis-benchmark -c $C -n $N -r $KEYSPACE (--cluster tests: -r $((KEYSPACE / MASTERS)) per node, the same keys per node), pipelines: $PIPELINES, $R runs each, median reported"
echo "cellgate: $CELLGATE${CELL_MODULE:+, module: $CELL_MODULE}"

# ---------------- Run and report ----------------

# Every test on the same keys per node (see the header): a --cluster test
# draws from KEYSPACE / MASTERS numbers on each node (cost_bench_one reads
# KEYSPACE when it runs).
eval "lib_$(declare -f cost_bench_one)"
cost_bench_one() {
    local KEYSPACE=$KEYSPACE
    if [[ ${where_of[$1]} == --cluster* && $1 != cl_module_wide ]]; then
        KEYSPACE=$((KEYSPACE / MASTERS))
    fi
    lib_cost_bench_one "$@"
}
run_cost_tests
# The batches: decisions per script call (FCALL, EVALSHA or EVAL) of each
# test's last run at every depth, all nodes together. A call's fixed cost
# (about 60,000 Redis instructions, its wake-up and socket work besides)
# is what a node's batch shares.
echo "Decisions per script call (last run at each depth, all nodes)"
for t in "${tests[@]}"; do
    for pl in $PIPELINES; do
        [[ -s $workdir/stats.$t.$pl ]] || continue
        awk -v t="$t" -v pl="$pl" -v n="$N" '
            $1 ~ /^(fcall|evalsha|eval)$/ { c += $2 }
            END { if (c > 0) printf "  %-19s -P %-3s %.1f\n", t, pl, n / c }' \
            "$workdir/stats.$t.$pl"
    done
done
echo
md_header
md_row_ratio "Cluster, CL.THROTTLE random keys: cellgate / module (--cluster)" cl cl_module
md_row_ratio "Cluster, CL.THROTTLE random keys: cellgate / module on KEYSPACE keys per node" cl cl_module_wide
md_row_ratio "Cluster, CL.THROTTLE random keys: cellgate / cellgate B" cl cl_b
md_row_ratio "Cluster, CL.THROTTLE random keys: cellgate / EVALSHA gcra.lua (--cluster)" cl cl_evalsha
for t in "${tests[@]}"; do
    md_row_cost "$t"
done
md_notes
