#!/usr/bin/env bash
# Redis's own instructions per CL.THROTTLE decision, counted rather than
# timed: cellgate's GCRA function (the library the build makes, called as
# the proxy batches CL.THROTTLE: FCALL ... "runs" of B keys) against the
# redis-cell module's CL.THROTTLE, on the same keys. A shared machine moves
# limiter.sh's CPU times by 10 to 30 %; an instruction count does not move,
# so a change to the Lua is measured here first (its CPU time still needs
# limiter.sh: instructions do not weigh cache misses).
#
# Each target is a redis-server run under callgrind with instrumentation
# off until the workload starts; the workload is one file of commands sent
# with redis-cli --pipe (so the client's pace does not matter): D decisions
# over KEYSPACE random keys (the same keys for both targets, from a fixed
# seed), in FCALLs of B keys or in single CL.THROTTLE calls. What is counted
# is Redis's user-space instructions while the workload runs (parsing,
# the script or module, replies); the kernel's socket work is not, and the
# module's requests, one per decision, need more of it.
#
# LIMIT's default period is long (15 30 3600: INC 120 s) so that no key
# expires while valgrind slows Redis down: the share of keys in use when
# they come back (about a third with the defaults, as in limiter.sh) is
# then the same for both targets and from run to run.
#
# Environment (all optional):
#   BUILD        build directory with algorithms/library.lua (default build)
#   CELL_MODULE  redis-cell's libredis_cell.so (unset: no module count)
#   D            decisions (default 20032)
#   B            keys per FCALL (default 64, the proxy's largest batch)
#   KEYSPACE     distinct keys drawn from (default 20000)
#   LIMIT        "max_burst count period" (default "15 30 3600")
#   CLUSTER      1: each redis-server runs in cluster mode (one node that
#                serves all 16,384 slots), the FCALLs carry their keys as
#                a cluster node's batch does, spread over its slots, after
#                the runs, undeclared (the library's allow-cross-slot-keys;
#                B is then a node's share of the proxy's batches); 0, the
#                default: a plain Redis, the keys declared
# Prints; never asserts. Needs valgrind (callgrind_control,
# callgrind_annotate).
set -euo pipefail

# Its own default, before lib.sh sets the throughput benchmarks' one.
KEYSPACE=${KEYSPACE:-20000}
# shellcheck source=tests/bench/lib.sh
. "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
D=${D:-20032}
B=${B:-64}
LIMIT=${LIMIT:-"15 30 3600"}
CELL_MODULE=${CELL_MODULE:-}
CLUSTER=${CLUSTER:-0}
READY_TRIES=600 # valgrind starts Redis slowly

require_redis_tools
require_cell_module
for tool in valgrind callgrind_control callgrind_annotate; do
    command -v "$tool" >/dev/null || die "$tool not found (apt-get install valgrind)"
done
lib=$BUILD/algorithms/library.lua
[[ -r $lib ]] || die "no $lib (build cellgate first, or set BUILD)"
check_limit LIMIT
set_gcra_argv "$LIMIT"
[[ $B =~ ^[1-9][0-9]*$ && $D -ge $B ]] || die "B must be 1..D"
[[ $CLUSTER == 0 || $CLUSTER == 1 ]] || die "CLUSTER must be 0 or 1"
fn="$(sed -n '1s/^#!lua name=//p' "$lib")_gcra"

bench_init

# workload MODE FILE: the commands of D decisions (floor(D / B) batches of
# B keys), RESP, FCALLs of the library's gcra function ("fcall") or
# CL.THROTTLE calls ("module").
workload() {
    awk -v mode="$1" -v fn="$fn" -v B="$B" -v D="$D" -v ks="$KEYSPACE" \
        -v lim="$LIMIT" -v argv="$ARGV4" -v spread="$CLUSTER" '
        function bulk(s) { s = s ""; printf "$%d\r\n%s\r\n", length(s), s }
        BEGIN {
            srand(42)
            split(lim, L, " ")
            split(argv, A, " ")
            for (c = 0; c < int(D / B); c++) {
                for (j = 1; j <= B; j++)
                    k[j] = sprintf("key:%012d", int(rand() * ks))
                if (mode == "module") {
                    for (j = 1; j <= B; j++) {
                        printf "*5\r\n"
                        bulk("CL.THROTTLE"); bulk(k[j])
                        bulk(L[1]); bulk(L[2]); bulk(L[3])
                    }
                    continue
                }
                printf "*%d\r\n", B + 10
                bulk("FCALL"); bulk(fn); bulk(spread ? 0 : B)
                if (!spread)
                    for (j = 1; j <= B; j++) bulk(k[j])
                bulk("runs"); bulk(1); bulk(B)
                for (x = 1; x <= 4; x++) bulk(A[x])
                if (spread)
                    for (j = 1; j <= B; j++) bulk(k[j])
            }
        }' >"$2"
}

# count NAME FILE [REDIS ARGS...]: Redis's instructions while FILE is
# piped in (left in instr_of[NAME]), and its commands (cmds_of[NAME]).
count() {
    local name=$1 file=$2 port _
    shift 2
    port=$(free_port)
    if [[ $CLUSTER == 1 ]]; then
        set -- "$@" --cluster-enabled yes --cluster-port "$(free_port)" \
            --cluster-config-file "$workdir/nodes-$name.conf"
    fi
    callgrind_redis "$name" "$port" "$@"
    if [[ $CLUSTER == 1 ]]; then
        redis-cli -p "$port" CLUSTER ADDSLOTSRANGE 0 16383 >/dev/null
        for _ in $(seq 1 "$READY_TRIES"); do
            redis-cli -p "$port" CLUSTER INFO | grep -q '^cluster_state:ok' &&
                break
            sleep 0.1
        done
        redis-cli -p "$port" CLUSTER INFO | grep -q '^cluster_state:ok' ||
            die "$name: the one-node cluster is not ready"
    fi
    if [[ $name == cellgate ]]; then
        redis-cli -p "$port" -x FUNCTION LOAD <"$lib" >/dev/null
    fi
    callgrind_measure "$name" "$port" "$file" "$D"
}

workload fcall "$workdir/fcall.resp"
count cellgate "$workdir/fcall.resp"
names=(cellgate)
if [[ -n $CELL_MODULE ]]; then
    workload module "$workdir/module.resp"
    count module "$workdir/module.resp" --loadmodule "$CELL_MODULE"
    names+=(module)
fi

decisions=$((D / B * B))
echo "machine: $(machine_line)"
echo "$decisions decisions over $KEYSPACE keys, limit $LIMIT (ARGV $ARGV4), FCALLs of $B keys; library $lib"
if [[ $CLUSTER == 1 ]]; then
    echo "cluster mode: one node serving every slot; the FCALLs' keys spread, undeclared"
fi
printf '%-10s %14s %12s  %s\n' target instructions per_decision "commands per decision"
for n in "${names[@]}"; do
    printf '%-10s %14s %12s  %s\n' "$n" "${instr_of[$n]}" \
        "$((instr_of[$n] / decisions))" "${cmds_of[$n]%, }"
done
if [[ -n $CELL_MODULE ]]; then
    echo "cellgate / module: $(awk -v a="${instr_of[cellgate]}" \
        -v b="${instr_of[module]}" 'BEGIN { printf "%.2f", a / b }')"
else
    echo "note: CELL_MODULE unset: no module count"
fi
