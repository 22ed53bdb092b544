# shellcheck shell=bash
# What the benchmark scripts share (every script of tests/bench sources
# it; it does nothing on its own): the common settings, a scratch
# directory whose processes are stopped at exit, free loopback ports and
# bounded waits, the run loop around redis-benchmark, and the medians and
# ratios of the report.
#
# A script sources it, then, in order:
#   require_redis_tools, require_cellgate    die early when a tool is missing
#   bench_init                               $workdir, $results, exit traps
#   port=$(free_port)
#   start_bg NAME PORT LOG CMD...            or start_redis PORT, or
#                                            start_cluster NAME MASTERS
#                                            (wait_cluster_proxy PORT for
#                                            a cellgate in front of it)
#   targets=(...) and a function bench_one TARGET PIPELINE that runs one
#   benchmark (bench_csv) and appends its rows to $results
#   bench_run_all
#   median FIELD KEY..., ratio A B, print_medians WIDTH for the report
# and, to measure what a decision costs: proc_ticks PID and cpu_pct (CPU of
# a process), redis_resetstat, redis_commandstats and cmd_usec (Redis time
# by INFO commandstats), redis_cpu_usec (Redis process CPU by INFO cpu),
# machine_line (nproc, CPU model, date); to count Redis's instructions
# instead, callgrind_redis NAME PORT [ARG...] then callgrind_measure NAME
# PORT FILE D.
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
# output in LOG, stops it at exit, and waits until it accepts on PORT. Its
# pid is left in last_pid.
start_bg() {
    local name=$1 port=$2 log=$3
    shift 3
    "$@" >"$log" 2>&1 &
    last_pid=$!
    pids+=("$last_pid")
    wait_port "$port" "$last_pid" "$name" "$log"
}

# start_redis PORT [LOG [ARGS...]]: one redis-server without persistence,
# log LOG (default redis.log), ARGS added to its command line (for example
# --loadmodule FILE). Its pid is left in last_pid.
start_redis() {
    local port=$1 log=${2:-$workdir/redis.log}
    shift
    [[ $# -eq 0 ]] || shift
    start_bg redis-server "$port" "$log" \
        redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no \
        --daemonize no "$@"
}

# start_cluster NAME MASTERS [ARGS...]: a local Redis Cluster of MASTERS
# masters (no replicas) on free loopback ports, each node a redis-server
# like start_redis's (ARGS added to every node's command line), its files
# under $workdir/NAME. Waits (bounded) until every node serves all 16384
# slots and knows every node. Leaves the node ports in cluster_ports, their
# pids in cluster_pids and the seed list host:port,... in cluster_seeds.
# The nodes are in pids: stopped at exit like every other process.
start_cluster() {
    local name=$1 masters=$2 dir=$workdir/$1 i port bus addrs=() why info _
    shift 2
    mkdir -p "$dir"
    cluster_ports=()
    cluster_pids=()
    for ((i = 0; i < masters; i++)); do
        port=$(free_port)
        bus=$(free_port)
        start_bg "$name node" "$port" "$dir/redis-$port.log" \
            redis-server --port "$port" --bind 127.0.0.1 --save "" \
            --appendonly no --daemonize no --dir "$dir" \
            --cluster-enabled yes --cluster-port "$bus" \
            --cluster-config-file "nodes-$port.conf" \
            --cluster-node-timeout 5000 "$@"
        cluster_ports+=("$port")
        cluster_pids+=("$last_pid")
        addrs+=("127.0.0.1:$port")
    done
    # --foreground: in the script's process group, so that Ctrl-C stops it
    # too (the nodes it waits for stop at once).
    timeout --foreground 60 redis-cli --cluster create "${addrs[@]}" --cluster-replicas 0 \
        --cluster-yes >"$dir/create.log" 2>&1 ||
        { tail -n 20 "$dir/create.log" >&2; die "$name: redis-cli --cluster create failed"; }
    for _ in $(seq 1 "$READY_TRIES") $(seq 1 "$READY_TRIES"); do
        why=""
        for port in "${cluster_ports[@]}"; do
            info=$(redis-cli -p "$port" CLUSTER INFO 2>/dev/null | tr -d '\r')
            if ! grep -qx cluster_state:ok <<<"$info" ||
                ! grep -qx cluster_slots_ok:16384 <<<"$info" ||
                ! grep -qx "cluster_known_nodes:$masters" <<<"$info"; then
                why="node $port not ready"
                break
            fi
        done
        [[ -z $why ]] && break
        sleep 0.05
    done
    [[ -z $why ]] || die "$name: cluster not ready: $why"
    # shellcheck disable=SC2034 # for the sourcing script
    cluster_seeds=$(IFS=,; echo "${addrs[*]}")
}

# wait_cluster_proxy PORT: waits (bounded) until the cellgate on PORT
# serves its cluster. It answers once it has the slot map: a SET on any key
# works.
wait_cluster_proxy() {
    local _
    for _ in $(seq 1 "$READY_TRIES"); do
        [[ $(redis-cli -p "$1" SET bench:ready 1 2>/dev/null) == OK ]] && break
        sleep 0.05
    done
    [[ $(redis-cli -p "$1" SET bench:ready 1 2>/dev/null) == OK ]] ||
        die "cellgate does not serve the cluster: $(redis-cli -p "$1" SET bench:ready 1 2>&1)"
}

# ---------------- Costs ----------------

# proc_ticks PID: user + system CPU time of the process (all its threads)
# in clock ticks, from /proc/PID/stat ("-" when it cannot be read).
proc_ticks() {
    local stat
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || { echo -; return 0; }
    # Fields after the ")" that closes the command name: utime is the 12th,
    # stime the 13th.
    awk '{ print $12 + $13 }' <<<"${stat##*) }"
}
CLK_TCK=$(getconf CLK_TCK 2>/dev/null || echo 100)

# cpu_pct T0 T1 NS: percent of one CPU between tick counts T0 and T1 over
# NS nanoseconds of wall time ("-" when one is missing).
cpu_pct() {
    awk -v a="$1" -v b="$2" -v ns="$3" -v hz="$CLK_TCK" 'BEGIN {
        if (a == "-" || b == "-" || ns <= 0) print "-";
        else printf "%.0f\n", (b - a) / hz * 1e9 / ns * 100
    }'
}

# redis_cpu_usec PORT...: used_cpu_user + used_cpu_sys (INFO cpu) of the
# redis-servers on PORT..., summed, in microseconds.
redis_cpu_usec() {
    local port
    for port in "$@"; do
        redis-cli -p "$port" INFO cpu
    done | tr -d '\r' | awk -F: '
        $1 == "used_cpu_user" || $1 == "used_cpu_sys" { s += $2 }
        END { printf "%.0f\n", s * 1e6 }'
}

# redis_resetstat PORT...: CONFIG RESETSTAT on each (commandstats to zero).
redis_resetstat() {
    local port
    for port in "$@"; do
        redis-cli -p "$port" CONFIG RESETSTAT >/dev/null
    done
}

# redis_commandstats PORT...: "name calls usec" per command of INFO
# commandstats since the last redis_resetstat, summed over PORT..., without
# what the benchmark itself sends (CONFIG, INFO, FLUSHALL).
redis_commandstats() {
    local port
    for port in "$@"; do
        redis-cli -p "$port" INFO commandstats
    done | tr -d '\r' | awk -F'[:,=]' '
        /^cmdstat_/ {
            name = substr($1, 9)
            if (name ~ /^config\|/ || name == "info" || name == "flushall") next
            calls[name] += $3; usec[name] += $5
        }
        END { for (n in calls) print n, calls[n], usec[n] }' | sort
}

# cmd_usec: the Redis time (usec) of the decisions, from redis_commandstats
# lines on stdin. Redis counts the commands a script or function runs
# (redis.call) under their own names too, inside the time of the EVALSHA or
# FCALL that ran them; so when any script, function or module command ran
# (eval*, fcall*, a name with a dot like cl.throttle), the total is theirs
# plus the commands a script cannot have run or would not (connection,
# cluster, script and function management); otherwise, every command.
cmd_usec() {
    awk '
        { name[NR] = $1; usec[NR] = $3 }
        $1 ~ /^(eval|evalsha|eval_ro|evalsha_ro|fcall|fcall_ro)$/ || $1 ~ /\./ { entry = 1 }
        END {
            for (i = 1; i <= NR; i++) {
                n = name[i]
                if (!entry || n ~ /^(eval|evalsha|eval_ro|evalsha_ro|fcall|fcall_ro)$/ || n ~ /\./ ||
                    n ~ /^(ping|echo|hello|auth|select|readonly|readwrite|multi|exec|discard|quit|command.*|client\|.*|cluster\|.*|script\|.*|function\|.*)$/)
                    s += usec[i]
            }
            printf "%d\n", s
        }'
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

# ---------------- Tests with their costs ----------------
#
# For limiter.sh and limiter_cluster.sh: a list of tests (add_test), each
# one redis-benchmark command against one address, checked once
# (check_test_replies) and run with run_cost_tests, measuring besides rps
# and latency what each decision costs the Redis nodes behind it and the
# cellgate in between. Its $results rows: test pipeline rps p50 p99 cmd_us cpu_us
# redis_pct cg_us cg_pct, "-" where one does not apply:
#   cmd_us     Redis time per decision by INFO commandstats (cmd_usec) after
#              CONFIG RESETSTAT, over every node of the test, divided by N;
#              Redis times commands by the clock, so on a machine with more
#              busy processes than cores it includes waits for a core (and
#              can exceed cpu_us)
#   cpu_us     Redis process CPU per decision (INFO cpu, all nodes): also
#              reading and writing the sockets
#   redis_pct  that CPU in % of one core over the run's wall time
#   cg_us      cellgate's CPU per decision (/proc, clock ticks)
#   cg_pct     cellgate's CPU in % of one core
# A decision is one request of redis-benchmark (N per run).

tests=()
notes=()
declare -A label_of where_of cmd_of redis_of cg_of

# require_cell_module: dies unless CELL_MODULE (redis-cell's
# libredis_cell.so, the module baseline) is unset or a readable file.
require_cell_module() {
    if [[ -n ${CELL_MODULE:-} ]]; then
        [[ -r $CELL_MODULE ]] || die "CELL_MODULE '$CELL_MODULE' is not a readable file"
    fi
}

# check_limit NAME: dies unless the variable NAME holds a CL.THROTTLE limit
# "max_burst count period": three non-negative integers, count and period
# > 0.
check_limit() {
    local b c p
    read -r b c p <<<"${!1}"
    [[ $b =~ ^[0-9]+$ && $c =~ ^[1-9][0-9]*$ && $p =~ ^[1-9][0-9]*$ ]] ||
        die "$1 must be three non-negative integers, count and period > 0"
}

# set_gcra_argv LIMIT: leaves in ARGV4 the gcra.lua arguments cellgate
# sends for LIMIT (checked by check_limit) and quantity 1: INC = EI =
# period / count and DVT = EI * (max_burst + 1), each as "s ns"
# (docs/ARCHITECTURE.md "CL.THROTTLE, exactly"; gcra.h: s = d / 1e9,
# ns = d % 1e9), "2 0 32 0" for 15 30 60.
set_gcra_argv() {
    local b cnt p ei dvt ns_per_s=1000000000
    read -r b cnt p <<<"$1"
    ei=$((p * ns_per_s / cnt))
    [[ $ei -gt 0 ]] || die "LIMIT gives a zero emission interval"
    dvt=$((ei * (b + 1)))
    # shellcheck disable=SC2034 # for the sourcing script
    ARGV4="$((ei / ns_per_s)) $((ei % ns_per_s)) $((dvt / ns_per_s)) $((dvt % ns_per_s))"
}

# load_gcra_script PORT...: SCRIPT LOAD of the script as built (its shared
# parts pasted in), algorithms/gcra.lua beside $CELLGATE, on every PORT.
# Leaves its sha1 in sha, or "" and a note (no EVALSHA test then) when the
# build has no such script or a load failed.
load_gcra_script() {
    local script port
    script=$(dirname "$CELLGATE")/algorithms/gcra.lua
    sha=""
    if [[ ! -r $script ]]; then
        notes+=("no $script in this build: no EVALSHA test")
        return 0
    fi
    for port in "$@"; do
        # -x sends the file's exact bytes.
        sha=$(redis-cli -p "$port" -x SCRIPT LOAD <"$script" 2>&1 | tr -d '\r')
        if [[ ! $sha =~ ^[0-9a-f]{40}$ ]]; then
            notes+=("SCRIPT LOAD of $script failed ($sha): no EVALSHA test")
            sha=""
            return 0
        fi
    done
}

# add_test NAME LABEL WHERE REDIS_PORTS CG_PID CMD: a test named NAME (one
# word), LABEL in the report, WHERE redis-benchmark's address arguments
# ("-h 127.0.0.1 -p PORT", or "--cluster -h 127.0.0.1 -p PORT"), the ports
# of the Redis nodes it costs (space separated; flushed before every run;
# empty for none), the pid of the cellgate it goes through (empty for none)
# and the command (with __rand_int__, and {tag} in cluster mode).
add_test() {
    tests+=("$1")
    label_of[$1]=$2
    where_of[$1]=$3
    redis_of[$1]=$4
    cg_of[$1]=$5
    cmd_of[$1]=$6
}

# has TEST: true when TEST was added.
has() { [[ -n ${label_of[$1]:-} ]]; }

# cost_bench_one TEST PIPELINE: one run of TEST, its row appended to
# $results, the Redis commands it ran kept in $workdir/stats.TEST.PIPELINE
# ("name calls usec" lines).
cost_bench_one() {
    local t=$1 pl=$2 rc0="" g0="-" t0 t1 rp gp where
    local cmd_us=- cpu_us=- r_pct=- g_us=- g_pct=- rc1 g1 line port
    read -r -a rp <<<"${redis_of[$1]}"
    gp=${cg_of[$1]}
    read -r -a where <<<"${where_of[$1]}"
    if [[ ${#rp[@]} -gt 0 ]]; then
        for port in "${rp[@]}"; do
            redis-cli -p "$port" FLUSHALL >/dev/null
        done
        redis_resetstat "${rp[@]}"
        rc0=$(redis_cpu_usec "${rp[@]}")
    fi
    [[ -n $gp ]] && g0=$(proc_ticks "$gp")
    t0=$(date +%s%N)
    # shellcheck disable=SC2086 # the command is split into arguments on purpose
    bench_csv "$t" "${where[@]}" -c "$C" -n "$N" -r "$KEYSPACE" -P "$pl" \
        ${cmd_of[$t]}
    t1=$(date +%s%N)
    if [[ -n $gp ]]; then
        g1=$(proc_ticks "$gp")
        g_pct=$(cpu_pct "$g0" "$g1" $((t1 - t0)))
        g_us=$(awk -v a="$g0" -v b="$g1" -v hz="$CLK_TCK" -v n="$N" 'BEGIN {
            if (a == "-" || b == "-") print "-";
            else printf "%.2f\n", (b - a) / hz * 1e6 / n }')
    fi
    if [[ ${#rp[@]} -gt 0 ]]; then
        rc1=$(redis_cpu_usec "${rp[@]}")
        redis_commandstats "${rp[@]}" >"$workdir/stats.$t.$pl"
        cmd_us=$(awk -v u="$(cmd_usec <"$workdir/stats.$t.$pl")" -v n="$N" \
            'BEGIN { printf "%.2f\n", u / n }')
        cpu_us=$(awk -v a="$rc0" -v b="$rc1" -v n="$N" \
            'BEGIN { printf "%.2f\n", (b - a) / n }')
        r_pct=$(awk -v a="$rc0" -v b="$rc1" -v ns=$((t1 - t0)) \
            'BEGIN { printf "%.0f\n", (b - a) * 1000 / ns * 100 }')
    fi
    # --cluster prints its node list first, which has no CSV rows.
    line=$(tr -d '"' <"$workdir/bench.csv" |
        awk -F, '$1 != "test" && NF >= 7 { print $2, $5, $7; exit }')
    [[ -n $line ]] || die "$t: no result line from redis-benchmark"
    echo "$t $pl $line $cmd_us $cpu_us $r_pct $g_us $g_pct" >>"$results"
}

# check_test_replies [REDIS_CLI_OPTION...]: dies unless every test answers
# the way it will be measured, asked once with redis-cli OPTION... at its
# address (__rand_int__ replaced by check-TEST, {tag} by {TEST}): five
# integers; the EVALSHA test (cl_evalsha) the script's four values, the nil
# TAT of a new key printed by redis-cli as an empty line, so three
# non-empty lines.
check_test_replies() {
    local t cmd out want lines
    for t in "${tests[@]}"; do
        cmd=${cmd_of[$t]//__rand_int__/check-$t}
        cmd=${cmd//\{tag\}/\{$t\}}
        # shellcheck disable=SC2086 # the command is split into arguments on purpose
        out=$(redis-cli "$@" -p "${where_of[$t]##* }" $cmd 2>&1)
        want=5
        [[ $t == cl_evalsha ]] && want=3
        lines=$(grep -c . <<<"$out" || true)
        if [[ $lines -ne $want ]] || grep -qi err <<<"$out"; then
            die "$t: unexpected reply to '$cmd': $out"
        fi
    done
}

# run_cost_tests: prints the tests (print_tests_header), runs each R times
# per depth (bench_run_all, one cost_bench_one a run), then prints their
# medians and the Redis commands per decision, each part followed by an
# empty line.
run_cost_tests() {
    print_tests_header
    echo
    bench_one() { cost_bench_one "$@"; }
    targets=("${tests[@]}")
    bench_run_all
    print_cost_medians
    echo
    print_commands_per_decision
    echo
}

# print_tests_header: every test's address and command, and the notes.
print_tests_header() {
    local t note
    for t in "${tests[@]}"; do
        printf '  %-19s %-34s %s\n' "$t" "${where_of[$t]}" "${cmd_of[$t]}"
    done
    for note in "${notes[@]+"${notes[@]}"}"; do
        echo "note: $note"
    done
}

# print_cost_medians: the medians of every column per test and depth.
print_cost_medians() {
    local fmt='%-19s %3s %10s %7s %7s %8s %8s %7s %8s %7s\n' t pl
    echo "Medians per test (rps; latency ms; Redis us per decision by commandstats"
    echo "and by process CPU; Redis and cellgate CPU % of one core; cellgate us per decision)"
    # shellcheck disable=SC2059 # the format is built above on purpose
    printf "$fmt" test P rps p50_ms p99_ms cmd_us cpu_us redis% cg_us cg%
    for t in "${tests[@]}"; do
        for pl in $PIPELINES; do
            # shellcheck disable=SC2059
            printf "$fmt" "$t" "$pl" "$(median 3 "$t" "$pl")" \
                "$(median 4 "$t" "$pl")" "$(median 5 "$t" "$pl")" \
                "$(median 6 "$t" "$pl")" "$(median 7 "$t" "$pl")" \
                "$(median 8 "$t" "$pl")" "$(median 9 "$t" "$pl")" \
                "$(median 10 "$t" "$pl")"
        done
    done
}

# print_commands_per_decision: the Redis commands per decision of each
# test's last run at the deepest pipeline (how well calls are batched).
print_commands_per_decision() {
    local deepest t
    deepest=$(tr ' ' '\n' <<<"$PIPELINES" | grep . | sort -n | tail -n 1)
    echo "Redis commands per decision (last run at -P $deepest, all nodes; the benchmark's own CONFIG/INFO/FLUSHALL left out)"
    for t in "${tests[@]}"; do
        [[ -s $workdir/stats.$t.$deepest ]] || continue
        printf '  %-19s %s\n' "$t" "$(awk -v n="$N" \
            '{ printf "%s%s %.3f", (NR > 1 ? ", " : ""), $1, $2 / n }' \
            "$workdir/stats.$t.$deepest")"
    done
}

# fmt_rps X: X rounded, with thousands separators ("-" stays).
fmt_rps() {
    awk -v x="$1" 'BEGIN {
        if (x == "-") { print "-"; exit }
        s = sprintf("%.0f", x)
        while (s ~ /[0-9][0-9][0-9][0-9]/) sub(/[0-9][0-9][0-9]($|,)/, ",&", s)
        print s
    }'
}

# md_header: the legend, the machine and the head of the markdown table.
md_header() {
    local head="| what |" sep="| --- |" pl
    for pl in $PIPELINES; do
        head+=" -P $pl |"
        sep+=" --- |"
    done
    echo "Markdown (ratio: rps of the first / rps of the second, both rps in"
    echo "parentheses; cost: Redis us per decision by INFO commandstats · by Redis"
    echo "process CPU · Redis CPU % · cellgate CPU %, % of one core):"
    echo
    echo "Machine: $(machine_line); redis-benchmark -c $C -n $N -r $KEYSPACE, median of $R."
    echo
    echo "$head"
    echo "$sep"
}

# md_row_ratio WHAT A B: "A/B (rps A / rps B)" per depth; nothing unless
# both tests ran.
md_row_ratio() {
    local what=$1 a=$2 b=$3 pl cells="" ra rb
    has "$a" && has "$b" || return 0
    for pl in $PIPELINES; do
        ra=$(median 3 "$a" "$pl")
        rb=$(median 3 "$b" "$pl")
        cells+=" $(ratio "$ra" "$rb") ($(fmt_rps "$ra") / $(fmt_rps "$rb")) |"
    done
    echo "| $what |$cells"
}

# md_row_cost TEST: its costs per depth.
md_row_cost() {
    local t=$1 pl cells=""
    has "$t" || return 0
    for pl in $PIPELINES; do
        cells+=" $(median 6 "$t" "$pl") · $(median 7 "$t" "$pl") · $(median 8 "$t" "$pl") · $(median 10 "$t" "$pl") |"
    done
    echo "| cost: ${label_of[$t]} |$cells"
}

# md_notes: the notes, after the table.
md_notes() {
    local note
    for note in "${notes[@]+"${notes[@]}"}"; do
        echo
        echo "Note: $note."
    done
}

# ---------------- Report ----------------

# median FIELD KEY...: median of column FIELD of $results over the rows
# whose first columns are KEY... ("-" when there is none; "-" values are
# left out).
median() {
    local field=$1
    shift
    awk -v f="$field" -v keys="$*" \
        'BEGIN { n = split(keys, k, " ") }
         { for (i = 1; i <= n; i++) if ($i != k[i]) next }
         $f != "-" && $f != "" { print $f }' \
        "$results" |
        sort -g |
        awk '{ v[NR] = $1 }
             END {
                 if (NR == 0) { print "-"; exit }
                 if (NR % 2) print v[(NR + 1) / 2];
                 else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2
             }'
}

# machine_line: "N CPUs (model), date" of this machine.
machine_line() {
    local model
    model=$(awk -F': *' '/^model name/ { print $2; exit }' /proc/cpuinfo 2>/dev/null)
    echo "$(nproc) CPUs (${model:-unknown CPU}), $(date -u '+%Y-%m-%d %H:%M UTC')"
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

# print_medians WIDTH [COLUMN...]: the median rps, p50 and p99 of every
# test, pipeline and target of such rows, the target column WIDTH
# characters wide; each COLUMN named adds the median of the next field of
# the rows (the 7th, then the 8th...).
# shellcheck disable=SC2154 # targets is set by the sourcing script
print_medians() {
    local fmt="%-6s %8s %-${1}s %12s %9s %9s" x pl target f last
    local -a vals
    shift
    for _ in "$@"; do
        fmt+=" %9s"
    done
    fmt+="\n"
    last=$((6 + $#))
    # shellcheck disable=SC2059 # the format is built above on purpose
    printf "$fmt" test pipeline target rps p50_ms p99_ms "$@"
    for x in $(bench_tests); do
        for pl in $PIPELINES; do
            for target in "${targets[@]}"; do
                vals=()
                for ((f = 4; f <= last; f++)); do
                    vals+=("$(median "$f" "$target" "$pl" "$x")")
                done
                # shellcheck disable=SC2059
                printf "$fmt" "$x" "$pl" "$target" "${vals[@]}"
            done
        done
    done
}

# What callgrind_measure counts, by the NAME of each server.
declare -A instr_of cmds_of

# callgrind_redis NAME PORT [ARG...]: a redis-server on PORT (with ARGs)
# under callgrind, its instrumentation off until callgrind_measure; its pid
# in last_pid, its counts to $workdir/NAME.callgrind.
callgrind_redis() {
    local name=$1 port=$2
    shift 2
    start_bg "redis-server under callgrind ($name)" "$port" \
        "$workdir/$name.log" valgrind --tool=callgrind --instr-atstart=no \
        --callgrind-out-file="$workdir/$name.callgrind" redis-server \
        --port "$port" --bind 127.0.0.1 --save "" --appendonly no "$@"
}

# callgrind_measure NAME PORT FILE D: pipes FILE (commands in RESP) into
# callgrind_redis's server NAME with its instrumentation on (dies on an
# error reply), then stops it: Redis's instructions while FILE ran go to
# instr_of[NAME], its commands per decision (D decisions; INFO and
# FUNCTION left out) to cmds_of[NAME].
callgrind_measure() {
    local name=$1 port=$2 file=$3 d=$4 vp=$last_pid
    callgrind_control -i on "$vp" >/dev/null 2>&1
    redis-cli -p "$port" --pipe <"$file" >"$workdir/$name.pipe" 2>&1
    callgrind_control -i off "$vp" >/dev/null 2>&1
    grep -q 'errors: 0,' "$workdir/$name.pipe" ||
        die "$name: error replies ($(tail -n 1 "$workdir/$name.pipe"))"
    # shellcheck disable=SC2034 # for the sourcing script
    cmds_of[$name]=$(redis-cli -p "$port" INFO commandstats | tr -d '\r' |
        awk -F'[:=,]' -v d="$d" '/^cmdstat_/ && $1 !~ /info|function/ {
            sub("cmdstat_", "", $1); printf "%s %.3f, ", $1, $3 / d }')
    redis-cli -p "$port" SHUTDOWN NOSAVE >/dev/null 2>&1 || true
    wait "$vp" 2>/dev/null || true
    # shellcheck disable=SC2034 # for the sourcing script
    instr_of[$name]=$(callgrind_annotate "$workdir/$name.callgrind" \
        2>/dev/null | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }')
}
