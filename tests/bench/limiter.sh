#!/usr/bin/env bash
# Limiter benchmark: the limiter against Redis's own speed. CL.THROTTLE
# through cellgate against the redis-cell module loaded in a plain Redis
# (the baseline users compare with), against the same GCRA run as a Lua
# script straight on Redis with EVALSHA, and against cellgate's embedded
# store; a hot key; LIMITER CHECK per algorithm and on a two-level path;
# and what each decision costs Redis. All in one run, the tests in turn
# (alternating, so drift hits every test alike), R times per pipeline depth,
# medians reported.
#
# Starts on free loopback ports: one plain redis-server; one cellgate in
# front of it with a limits tree (one node per algorithm, each about 100 per
# minute, and user:*:trade as in conf/limits.example.yaml); one embedded
# cellgate (no Redis); and, when CELL_MODULE names redis-cell's
# libredis_cell.so, a second redis-server with --loadmodule CELL_MODULE.
# The tests (redis-benchmark -c C -n N -r KEYSPACE -P depth):
#   cl              CL.THROTTLE key:__rand_int__ B C P    -> cellgate -> redis
#   cl_module       CL.THROTTLE key:__rand_int__ B C P    -> redis + module
#   cl_evalsha      EVALSHA <gcra.lua> 1 key:__rand_int__ <4 ARGV> -> redis
#   cl_embedded     CL.THROTTLE key:__rand_int__ B C P    -> cellgate alone
#   hot             CL.THROTTLE hot HOT_LIMIT             -> cellgate -> redis
#   hot_module      CL.THROTTLE hot HOT_LIMIT             -> redis + module
#                   (one key, 50 clients; HOT_LIMIT 0 1 3600 admits the
#                   first call of a run and refuses the rest)
#   hot_chk         LIMITER CHECK hot                     -> cellgate -> redis
#                   (one path, 50 clients; its level holds one limit of each
#                   algorithm the refusal cache knows, 1 an hour each: the
#                   first call of a run admits, the rest are refused)
#   chk_gcra        LIMITER CHECK gcra:__rand_int__       (one GCRA level)
#   chk_two_level   LIMITER CHECK user:__rand_int__:trade (two GCRA levels)
#   chk_<algorithm> LIMITER CHECK <algorithm>:__rand_int__, for ALGOS
# The Redis a test uses is flushed before every run, so every run starts
# from the same state. The EVALSHA test needs the built algorithms/gcra.lua
# beside CELLGATE and its four-value reply (ARGV inc_s inc_ns dvt_s dvt_ns,
# INC = EI and DVT = EI * (B + 1): "2 0 32 0" for 15 30 60); when the build
# has no such script, it is skipped with a note. Without CELL_MODULE the
# module tests are skipped with a note.
#
# Costs, per run: CONFIG RESETSTAT on the test's Redis before it, INFO
# commandstats after it: the Redis time of the decisions (cmd_us: the usec of
# EVALSHA, EVAL, FCALL, FCALL_RO, CL.THROTTLE and whatever else the proxy
# sent, without the commands scripts ran inside them, which Redis counts
# twice; see cmd_usec in lib.sh) divided by the decisions made (N); the
# Redis process CPU per decision (cpu_us, INFO cpu: includes reading and
# writing the sockets); Redis's and cellgate's CPU in % of one core while
# redis-benchmark ran (cellgate's from /proc/<pid>/stat), and cellgate's CPU
# per decision. Also the Redis commands per decision of the last run at the
# deepest pipeline (how well calls are batched), and the Redis memory one
# identity costs per algorithm (MEMORY USAGE after 1 check and after 100).
#
# Prints the medians per test, the ratios, and a markdown table
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
#   LIMIT        "max_burst count period" of CL.THROTTLE (default "15 30 60")
#   HOT_LIMIT    the same for the hot key (default "0 1 3600")
#   ALGOS        algorithms of the per-algorithm rows (default: all seven;
#                gcra always runs: the others are relative to it)
set -euo pipefail

# shellcheck source=tests/bench/lib.sh
. "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/../.."
LIMIT=${LIMIT:-"15 30 60"}
HOT_LIMIT=${HOT_LIMIT:-"0 1 3600"}
ALGOS=${ALGOS-"gcra token_bucket leaky_bucket fixed_window sliding_window sliding_log sliding_counter"}
CELL_MODULE=${CELL_MODULE:-}

require_redis_tools
require_cellgate
require_cell_module
check_limit LIMIT
check_limit HOT_LIMIT
set_gcra_argv "$LIMIT"

# About 100 per minute each, so random identities admit.
declare -A limit_of=(
    [gcra]="[99, 100, 60]"
    [token_bucket]="[{algorithm: token_bucket, capacity: 100, refill_per_sec: 1.67}]"
    [leaky_bucket]="[{algorithm: leaky_bucket, size: 100, drip_ms: 600}]"
    [fixed_window]="[{algorithm: fixed_window, max: 100, window: 1m}]"
    [sliding_window]="[{algorithm: sliding_window, max: 100, window: 1m, resolution: 1s}]"
    [sliding_log]="[{algorithm: sliding_log, max: 100, window: 1m}]"
    [sliding_counter]="[{algorithm: sliding_counter, max: 100, window: 1m}]"
)
algos=(gcra)
for a in $ALGOS; do
    [[ -n ${limit_of[$a]:-} ]] || die "ALGOS: unknown algorithm $a"
    [[ $a == gcra ]] || algos+=("$a")
done

bench_init

# ---------------- Start the targets ----------------

# The limits tree: one node per algorithm, the hot path's node (one limit
# of each algorithm the refusal cache knows), and conf/limits.example.yaml's
# user:* (16 at once, 30 per minute) with user:*:trade (6 at once, 10 per
# 15 s) below it.
tree=$workdir/limits.yaml
: >"$tree"
for a in "${algos[@]}"; do
    printf '%s:\n  children:\n    "*":\n      limits: %s\n' "$a" \
        "${limit_of[$a]}" >>"$tree"
done
cat >>"$tree" <<'EOF'
hot:
  limits:
    - {algorithm: gcra, max_burst: 0, count: 1, period: 1h}
    - {algorithm: token_bucket, capacity: 1, refill_per_sec: 0.0003}
    - {algorithm: leaky_bucket, size: 1, drip_ms: 3600000}
    - {algorithm: fixed_window, max: 1, window: 1h}
    - {algorithm: sliding_window, max: 1, window: 1h, resolution: 1m}
    - {algorithm: sliding_counter, max: 1, window: 1h}
user:
  children:
    "*":
      limits: [15, 30, 60]
      children:
        trade:
          limits: [5, 10, 15]
EOF

rport=$(free_port)
start_redis "$rport"

cport=$(free_port)
start_bg cellgate "$cport" "$workdir/cellgate.log" \
    "$CELLGATE" --listen "127.0.0.1:$cport" --upstream "127.0.0.1:$rport" \
    --limits "$tree" --log-level warn
cpid=$last_pid

eport=$(free_port)
start_bg "cellgate (embedded)" "$eport" "$workdir/embedded.log" \
    "$CELLGATE" --listen "127.0.0.1:$eport" --log-level warn
epid=$last_pid

mport=""
if [[ -n $CELL_MODULE ]]; then
    mport=$(free_port)
    start_redis "$mport" "$workdir/module.log" --loadmodule "$CELL_MODULE"
else
    notes+=("CELL_MODULE unset: no redis-cell module baseline (set it to a built libredis_cell.so)")
fi

load_gcra_script "$rport"

# The tests, in the order they run (tests compared with each other side by
# side, so that drift hits them alike).
at_cg="-h 127.0.0.1 -p $cport"
add_test cl "CL.THROTTLE via cellgate" "$at_cg" "$rport" "$cpid" \
    "CL.THROTTLE key:__rand_int__ $LIMIT"
if [[ -n $mport ]]; then
    add_test cl_module "CL.THROTTLE redis-cell module" "-h 127.0.0.1 -p $mport" \
        "$mport" "" "CL.THROTTLE key:__rand_int__ $LIMIT"
fi
if [[ -n $sha ]]; then
    add_test cl_evalsha "EVALSHA gcra.lua" "-h 127.0.0.1 -p $rport" "$rport" "" \
        "EVALSHA $sha 1 key:__rand_int__ $ARGV4"
fi
add_test cl_embedded "CL.THROTTLE cellgate embedded" "-h 127.0.0.1 -p $eport" \
    "" "$epid" "CL.THROTTLE key:__rand_int__ $LIMIT"
add_test hot "hot key CL.THROTTLE via cellgate" "$at_cg" "$rport" "$cpid" \
    "CL.THROTTLE hot $HOT_LIMIT"
if [[ -n $mport ]]; then
    add_test hot_module "hot key CL.THROTTLE module" "-h 127.0.0.1 -p $mport" \
        "$mport" "" "CL.THROTTLE hot $HOT_LIMIT"
fi
add_test hot_chk "hot path LIMITER CHECK via cellgate" "$at_cg" "$rport" \
    "$cpid" "LIMITER CHECK hot"
add_test chk_gcra "LIMITER CHECK gcra" "$at_cg" "$rport" "$cpid" \
    "LIMITER CHECK gcra:__rand_int__"
add_test chk_two_level "LIMITER CHECK user:*:trade (2 levels)" "$at_cg" \
    "$rport" "$cpid" "LIMITER CHECK user:__rand_int__:trade"
for a in "${algos[@]:1}"; do
    add_test "chk_$a" "LIMITER CHECK $a" "$at_cg" "$rport" "$cpid" \
        "LIMITER CHECK $a:__rand_int__"
done

# shellcheck disable=SC2119 # no redis-cli option for a single Redis
check_test_replies

# Memory of one identity per algorithm: its key after 1 check, and after
# 100 (full). The key name is cellgate's (<prefix>{path}#<limit>:<algo>);
# "-" when this build names it otherwise.
declare -A mem1_of mem100_of
redis-cli -p "$rport" FLUSHALL >/dev/null
for a in "${algos[@]}"; do
    key="cellgate:{$a:mem}#0:$a"
    redis-cli -p "$cport" LIMITER CHECK "$a:mem" >/dev/null
    mem1_of[$a]=$(redis-cli -p "$rport" MEMORY USAGE "$key" | tr -d '\r')
    for _ in $(seq 2 100); do
        echo "LIMITER CHECK $a:mem"
    done | redis-cli -p "$cport" >/dev/null
    mem100_of[$a]=$(redis-cli -p "$rport" MEMORY USAGE "$key" | tr -d '\r')
    mem1_of[$a]=${mem1_of[$a]:--}
    mem100_of[$a]=${mem100_of[$a]:--}
done

echo "machine: $(machine_line)"
echo "redis-benchmark -c $C -n $N -r $KEYSPACE, pipelines: $PIPELINES, $R runs each, median reported"
echo "limit: $LIMIT, hot key: $HOT_LIMIT${sha:+, gcra.lua sha $sha (ARGV $ARGV4)}"
echo "cellgate: $CELLGATE${CELL_MODULE:+, module: $CELL_MODULE}"

# ---------------- Run and report ----------------

run_cost_tests
echo "Redis memory per identity (MEMORY USAGE of its key, bytes): after 1 check, after 100"
for a in "${algos[@]}"; do
    printf '  %-16s %8s %8s\n' "$a" "${mem1_of[$a]}" "${mem100_of[$a]}"
done

echo
md_header
md_row_ratio "CL.THROTTLE random keys: cellgate / module" cl cl_module
md_row_ratio "CL.THROTTLE random keys: cellgate / EVALSHA gcra.lua" cl cl_evalsha
md_row_ratio "CL.THROTTLE random keys: embedded / module" cl_embedded cl_module
md_row_ratio "CL.THROTTLE one hot key, refused: cellgate / module" hot hot_module
md_row_ratio "LIMITER CHECK one hot path of 6 algorithms, refused / module's hot key" hot_chk hot_module
md_row_ratio "LIMITER CHECK gcra (1 level) / CL.THROTTLE, same cellgate" chk_gcra cl
md_row_ratio "LIMITER CHECK user:*:trade (2 levels) / CL.THROTTLE" chk_two_level cl
for a in "${algos[@]:1}"; do
    md_row_ratio "LIMITER CHECK $a / LIMITER CHECK gcra" "chk_$a" chk_gcra
done
for t in "${tests[@]}"; do
    md_row_cost "$t"
done
md_notes
