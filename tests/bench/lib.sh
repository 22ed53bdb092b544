# shellcheck shell=bash
# What the benchmark scripts share (forward.sh, cluster.sh, limiter.sh
# source it; it does nothing on its own): the common settings, a scratch
# directory whose processes are stopped at exit, free loopback ports and
# bounded waits, the run loop around redis-benchmark, and the medians and
# ratios of the report.
#
# A script sources it, then, in order:
#   require_redis_tools, require_cellgate    die early when a tool is missing
#   bench_init                               $workdir, $results, exit traps
#   port=$(free_port)
#   start_bg NAME PORT LOG CMD...            or start_redis PORT
#   targets=(...) and a function bench_one TARGET PIPELINE that runs one
#   benchmark (bench_csv) and appends its rows to $results
#   bench_run_all
#   median FIELD KEY..., ratio A B, print_medians WIDTH for the report
# A script with more to clean up defines bench_on_exit: it runs after the
# processes are stopped and before $workdir is removed.
#
# Environment shared by the scripts (all optional):
#   CELLGATE   cellgate binary (default build/cellgate; use a Release build)
#   N          requests per redis-benchmark run (default 100000)
#   R          repetitions per target and pipeline depth (default 3)
#   C          parallel clients (default 50)
#   PIPELINES  pipeline depths (default "1 16")
#   KEYSPACE   redis-benchmark -r (default 100000)
set -euo pipefail

CELLGATE=${CELLGATE:-build/cellgate}
N=${N:-100000}
R=${R:-3}
C=${C:-50}
PIPELINES=${PIPELINES:-"1 16"}
KEYSPACE=${KEYSPACE:-100000}
READY_TRIES=200 # x 50 ms: bounded wait for a port to accept

# ---------------- Checks ----------------

die() {
    echo "${0##*/}: $*" >&2
    exit 1
}

require_redis_tools() {
    local tool
    for tool in redis-server redis-benchmark redis-cli; do
        command -v "$tool" >/dev/null || die "$tool not found (apt-get install redis-server redis-tools)"
    done
}

# Says so when $CELLGATE carries sanitizers: its numbers would mislead.
warn_if_sanitized() {
    if ldd "$CELLGATE" 2>/dev/null | grep -q -e libasan -e libubsan; then
        echo "warning: $CELLGATE is a sanitizer build; its numbers are not representative (build with -DCMAKE_BUILD_TYPE=Release)" >&2
    fi
}

require_cellgate() {
    [[ -x $CELLGATE ]] || die "cellgate binary '$CELLGATE' not found (cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DPX_TESTS=OFF && cmake --build build --target cellgate)"
    warn_if_sanitized
}

# ---------------- Scratch directory and processes ----------------

# Stops every process in pids, runs the script's bench_on_exit if it has
# one, and removes the scratch directory.
bench_cleanup() {
    local pid
    for pid in "${pids[@]+"${pids[@]}"}"; do
        kill "$pid" 2>/dev/null || true
    done
    for pid in "${pids[@]+"${pids[@]}"}"; do
        wait "$pid" 2>/dev/null || true
    done
    if declare -F bench_on_exit >/dev/null; then
        bench_on_exit || true
    fi
    rm -rf "$workdir"
}

# Makes $workdir, the empty $results file (one line per run and test) and
# the exit traps. Append the pid of every process started to pids.
bench_init() {
    workdir=$(mktemp -d "${TMPDIR:-/tmp}/cellgate-bench-XXXXXX")
    pids=()
    trap bench_cleanup EXIT
    trap 'exit 130' INT TERM
    results="$workdir/results"
    : >"$results"
}

# True when something accepts TCP connections on 127.0.0.1:$1.
port_open() {
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# Prints a loopback port nobody listens on and no earlier call returned.
used_ports=" "
free_port() {
    local p _
    for _ in $(seq 1 100); do
        # Below the kernel's ephemeral range (32768 and up), so no client
        # socket of an earlier run holds it. Called in $(...): mix in the
        # subshell's pid, or calls can draw the parent's same RANDOM.
        p=$((20000 + (RANDOM + BASHPID * 7919) % 12000))
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

# start_bg NAME PORT LOG CMD...: starts CMD in the background with its
# output in LOG, stops it at exit, and waits until it accepts on PORT.
start_bg() {
    local name=$1 port=$2 log=$3
    shift 3
    "$@" >"$log" 2>&1 &
    pids+=($!)
    wait_port "$port" "$!" "$name" "$log"
}

# start_redis PORT: one redis-server without persistence, log redis.log.
start_redis() {
    start_bg redis-server "$1" "$workdir/redis.log" \
        redis-server --port "$1" --bind 127.0.0.1 --save "" --appendonly no \
        --daemonize no
}

# ---------------- Runs ----------------

# bench_csv TARGET ARGS...: runs `redis-benchmark --csv ARGS...` (a custom
# command goes last in ARGS) into $workdir/bench.csv, whose rows are
# "test","rps","avg","min","p50","p95","p99","max"; dies naming TARGET
# when it fails.
bench_csv() {
    local target=$1
    shift
    redis-benchmark --csv "$@" 2>"$workdir/bench.err" >"$workdir/bench.csv" ||
        { cat "$workdir/bench.err" >&2; die "redis-benchmark failed against $target"; }
}

# Runs bench_one TARGET PIPELINE R times for every pipeline depth and
# target, the targets in turn (alternating, so drift hits every target
# alike).
# shellcheck disable=SC2154 # targets is set by the sourcing script
bench_run_all() {
    local rep pl target
    for rep in $(seq 1 "$R"); do
        for pl in $PIPELINES; do
            for target in "${targets[@]}"; do
                echo "run $rep/$R: $target -P $pl" >&2
                bench_one "$target" "$pl"
            done
        done
    done
}

# ---------------- Report ----------------

# median FIELD KEY...: median of column FIELD of $results over the rows
# whose first columns are KEY... ("-" when there is none).
median() {
    local field=$1
    shift
    awk -v f="$field" -v keys="$*" \
        'BEGIN { n = split(keys, k, " ") }
         { for (i = 1; i <= n; i++) if ($i != k[i]) next; print $f }' \
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

# The tests of $results rows "target pipeline test rps p50 p99", in the
# order they first ran.
bench_tests() {
    awk '{ print $3 }' "$results" | awk '!seen[$0]++'
}

# print_medians WIDTH: the median rps, p50 and p99 of every test, pipeline
# and target of such rows, the target column WIDTH characters wide.
# shellcheck disable=SC2154 # targets is set by the sourcing script
print_medians() {
    local fmt="%-6s %8s %-${1}s %12s %9s %9s\n" x pl target
    # shellcheck disable=SC2059 # the format is built above on purpose
    printf "$fmt" test pipeline target rps p50_ms p99_ms
    for x in $(bench_tests); do
        for pl in $PIPELINES; do
            for target in "${targets[@]}"; do
                # shellcheck disable=SC2059
                printf "$fmt" "$x" "$pl" "$target" \
                    "$(median 4 "$target" "$pl" "$x")" \
                    "$(median 5 "$target" "$pl" "$x")" \
                    "$(median 6 "$target" "$pl" "$x")"
            done
        done
    done
}
