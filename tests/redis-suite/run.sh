#!/usr/bin/env bash
# Redis's own test suite (Redis 7.0.15, from Debian bookworm's source package)
# in external mode, run straight against a redis-server and through cellgate
# in front of an identical redis-server, and compared test by test.
#
#   bash tests/redis-suite/run.sh [path/to/cellgate]   (default build/cellgate,
#                                                      built Release if absent)
#   UNITS="unit/type/list unit/multi" bash tests/redis-suite/run.sh ...
#
# Every unit is its own runtest invocation, once direct and once through
# cellgate, each against a fresh redis-server (and a fresh cellgate), one after
# the other (never in parallel: the time comparison needs a quiet machine).
# Units where a test hung or aborted the run through cellgate are rechecked
# with the culprits skipped, so the tests behind them are compared too.
# Prints per-unit pass/fail counts and seconds for both, the cellgate pass
# rate and time ratio, every test that passes directly but fails through
# cellgate (also written to a file), and ends with `N passed, N failed`.
# Exits 0 only when the pass rate is >= PASS_PCT and the time ratio is
# <= TIME_RATIO. See tests/redis-suite/README.md for every knob.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)

# ---------------------------------------------------------------- settings
SRC_CACHE=${REDIS_SUITE_DIR:-/var/cache/cellgate/redis-src}
UNITS=${UNITS:-"unit/type/string unit/type/incr unit/type/list unit/type/list-2
    unit/type/list-3 unit/type/set unit/type/zset unit/type/hash unit/type/stream
    unit/type/stream-cgroups unit/expire unit/keyspace unit/scan unit/sort
    unit/bitops unit/bitfield unit/geo unit/hyperloglog unit/multi unit/scripting
    unit/functions unit/pubsub unit/protocol unit/quit unit/info-command
    unit/dump unit/tracking"}
# Tags as runtest's --tags takes them. `slow` tests are left out as in
# Redis's own external-server CI (.github/workflows/external.yml). `needs:repl`
# tests read the replication stream (SYNC) to check what Redis propagates to
# replicas; they stay in (cellgate gives SYNC a connection of its own);
# TAGS="-slow -needs:repl" leaves them out.
TAGS=${TAGS-"-slow"}
# 1: runtest --singledb (db 0 only, no SELECT 9), so the suite's connections
# use cellgate's shared, multiplexed upstream connections like an
# application's; 0: the suite's default SELECT 9, which puts every one of its
# connections on a private upstream connection in cellgate.
SINGLEDB=${SINGLEDB:-1}
PASS_PCT=${PASS_PCT:-99}
TIME_RATIO=${TIME_RATIO:-1.3}
EXPECTED_FAIL_FILE=${EXPECTED_FAIL_FILE:-$HERE/expected-failures.txt}
# Tests not to run at all, in both modes (same `unit: test name` format):
# for looking past a test that hangs or poisons the rest of its unit.
SKIP_FILE=${SKIP_FILE:-}
RECHECK=${RECHECK:-2}                      # rounds of rechecks (see below)
UNIT_TIMEOUT=${UNIT_TIMEOUT:-900}          # s, hard limit per runtest invocation
PROGRESS_TIMEOUT=${PROGRESS_TIMEOUT:-120}  # s, runtest --timeout (no test progress)
RUNTEST_ARGS=${RUNTEST_ARGS:-}             # more runtest flags, for both modes
CG_ARGS=${CG_ARGS:-}                       # more cellgate flags
OUT=${OUT_DIR:-}                           # logs and results (kept)

SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO=sudo
export DEBIAN_FRONTEND=noninteractive

die() {
    echo "redis-suite: $*" >&2
    echo "0 passed, 1 failed"
    exit 1
}

# ---------------------------------------------------------------- tools
APT_UPDATED=0
apt_install() {  # packages...
    echo "redis-suite: installing $*" >&2
    if [ "$APT_UPDATED" -eq 0 ]; then
        $SUDO apt-get update -qq >/dev/null || return 1
        APT_UPDATED=1
    fi
    $SUDO apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}
need=()
command -v tclsh >/dev/null 2>&1 || need+=(tcl)
command -v dpkg-source >/dev/null 2>&1 || need+=(dpkg-dev)
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
command -v redis-cli >/dev/null 2>&1 || need+=(redis-tools)
if [ "${#need[@]}" -gt 0 ]; then
    apt_install "${need[@]}" || die "cannot install ${need[*]}"
fi
if command -v systemctl >/dev/null 2>&1 && [[ " ${need[*]-} " == *" redis-server "* ]]; then
    $SUDO systemctl disable --now redis-server >/dev/null 2>&1 || true
fi

# ---------------------------------------------------------------- sources
# The suite comes from `apt-get source redis`, unpacked once into SRC_CACHE
# and reused. apt-get source needs a deb-src entry: when there is none, one is
# added that mirrors the deb entries of the Debian sources (deb822
# debian.sources, or the one-line sources.list).
has_deb_src() {
    grep -qsE '^[[:space:]]*deb-src[[:space:]]' /etc/apt/sources.list /etc/apt/sources.list.d/*.list \
        || grep -qsE '^Types:.*deb-src' /etc/apt/sources.list.d/*.sources
}
add_deb_src() {
    local d822=/etc/apt/sources.list.d/debian.sources one=/etc/apt/sources.list done=1
    if [ -f "$d822" ]; then
        # Every stanza whose Types has `deb`, with Types: deb-src.
        awk 'function flush() { if (keep) printf "%s\n", buf; buf = ""; keep = 0 }
             /^[[:space:]]*$/ { flush(); next }
             /^Types:/ { if ($0 ~ /[[:space:]]deb([[:space:]]|$)/) keep = 1
                         buf = buf "Types: deb-src\n"; next }
             { buf = buf $0 "\n" }
             END { flush() }' \
            "$d822" | $SUDO tee /etc/apt/sources.list.d/cellgate-deb-src.sources >/dev/null
        done=0
    fi
    if [ -f "$one" ] && grep -qE '^[[:space:]]*deb[[:space:]]' "$one"; then
        sed -n 's/^[[:space:]]*deb[[:space:]]/deb-src /p' "$one" \
            | $SUDO tee /etc/apt/sources.list.d/cellgate-deb-src.list >/dev/null
        done=0
    fi
    return "$done"
}
find_tree() {  # prints the unpacked source tree in SRC_CACHE, if any
    local d
    for d in "$SRC_CACHE"/redis-*/; do
        [ -f "$d/tests/test_helper.tcl" ] && [ -x "$d/runtest" ] && echo "${d%/}"
    done | sort -V | tail -n 1
}
TREE=$(find_tree)
if [ -z "$TREE" ]; then
    if ! has_deb_src; then
        echo "redis-suite: adding a deb-src entry under /etc/apt/sources.list.d" >&2
        add_deb_src || die "no Debian apt sources to mirror as deb-src"
        APT_UPDATED=0
    fi
    if [ "$APT_UPDATED" -eq 0 ]; then
        $SUDO apt-get update -qq >/dev/null || die "apt-get update failed"
        APT_UPDATED=1
    fi
    $SUDO mkdir -p "$SRC_CACHE" || die "cannot create $SRC_CACHE"
    # Unpacked aside and moved in place, so an interrupted download never
    # leaves a half tree that looks complete.
    tmp=$($SUDO mktemp -d "$SRC_CACHE/.fetch.XXXXXX") || die "cannot write $SRC_CACHE"
    ver=$(dpkg-query -W -f='${Version}' redis-server 2>/dev/null)
    echo "redis-suite: apt-get source redis${ver:+=$ver} into $SRC_CACHE" >&2
    (cd "$tmp" && { $SUDO apt-get source -qq "redis${ver:+=$ver}" >/dev/null 2>&1 \
                    || $SUDO apt-get source -qq redis >/dev/null; }) \
        || { $SUDO rm -rf "$tmp"; die "apt-get source redis failed"; }
    for d in "$tmp"/redis-*/; do
        [ -f "$d/tests/test_helper.tcl" ] || continue
        name=$(basename "$d")
        $SUDO rm -rf "${SRC_CACHE:?}/$name"
        $SUDO mv "$d" "$SRC_CACHE/$name"
    done
    $SUDO rm -rf "$tmp"
    TREE=$(find_tree)
    [ -n "$TREE" ] || die "no test suite in the redis source package"
fi
SUITE_VER=${TREE##*/redis-}
SERVER_VER=$(redis-server --version | sed -n 's/.* v=\([0-9.]*\).*/\1/p')
if [ "$SUITE_VER" != "$SERVER_VER" ]; then
    echo "redis-suite: warning: suite is Redis $SUITE_VER, redis-server is $SERVER_VER" >&2
fi

# ---------------------------------------------------------------- cellgate
if [ "$#" -ge 1 ]; then
    CG=$1
    [ -x "$CG" ] || [ ! -x "$ROOT/$CG" ] || CG=$ROOT/$CG
    [ -x "$CG" ] || die "no cellgate binary at $1"
else
    CG=$ROOT/build/cellgate
    if [ ! -x "$CG" ]; then
        echo "redis-suite: building cellgate (Release) into build/" >&2
        bash "$ROOT/scripts/deps.sh" || die "scripts/deps.sh failed"
        { cmake -S "$ROOT" -B "$ROOT/build" -DCMAKE_BUILD_TYPE=Release \
            && cmake --build "$ROOT/build" -j"$(nproc)" --target cellgate; } >&2 \
            || die "build failed"
    fi
fi
CG=$(cd "$(dirname "$CG")" && pwd)/$(basename "$CG")

# ---------------------------------------------------------------- processes
# Servers live in RUNDIR (removed at exit); logs and results in OUT (kept).
RUNDIR=$(mktemp -d "${TMPDIR:-/tmp}/cellgate-redis-suite.XXXXXX")
if [ -z "$OUT" ]; then
    OUT=$(mktemp -d "${TMPDIR:-/tmp}/cellgate-redis-suite-out.XXXXXX")
fi
mkdir -p "$OUT" || die "cannot write $OUT"
rm -rf "$OUT"/direct/* "$OUT"/cellgate/* "$OUT"/skip "$OUT"/recheck-* "$OUT/times.tsv"
R_PID=""
CG_PID=""
RT_PID=""   # runtest, leader of its own process group (setsid)
# stop and wait_ping
. "$ROOT/scripts/proc.sh"
stop_runtest() {  # the test server and the test client it spawned
    [ -n "$RT_PID" ] || return 0
    kill -TERM -- "-$RT_PID" 2>/dev/null
    sleep 1
    kill -KILL -- "-$RT_PID" 2>/dev/null
    wait "$RT_PID" 2>/dev/null
    RT_PID=""
}
cleanup() {
    stop_runtest
    stop "$CG_PID"
    stop "$R_PID"
    rm -rf "$RUNDIR"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# A redis-server configured as Redis's external-server CI starts it
# (.github/workflows/external.yml of 7.0.15): no RDB snapshots, and DEBUG,
# protected configs (CONFIG SET dir ...) and MODULE enabled, which the suite's
# needs:debug tests use. Sets R_PID and R_PORT.
start_redis() {  # dir
    local _
    mkdir -p "$1"
    for _ in 1 2 3; do  # a free port can be taken between asking and binding
        R_PORT=$(bash "$ROOT/scripts/freeport.sh")
        redis-server --port "$R_PORT" --bind 127.0.0.1 --save "" --appendonly no \
            --enable-protected-configs yes --enable-debug-command yes \
            --enable-module-command yes \
            --dir "$1" --logfile "$1/redis.log" &
        R_PID=$!
        wait_ping "$R_PORT" && return 0
        stop "$R_PID"; R_PID=""
    done
    return 1
}
# cellgate in front of 127.0.0.1:R_PORT, with its defaults except the command
# policy: the suite runs FLUSHALL, CONFIG SET, DEBUG... as an ordinary
# client, so every command is allowed. Sets CG_PID, CG_PORT.
start_cellgate() {  # log
    local _
    for _ in 1 2 3; do
        CG_PORT=$(bash "$ROOT/scripts/freeport.sh")
        [ "$CG_PORT" != "$R_PORT" ] || continue
        # shellcheck disable=SC2086  # CG_ARGS is a word list on purpose
        "$CG" --listen "127.0.0.1:$CG_PORT" --upstream "127.0.0.1:$R_PORT" \
            --commands allcommands $CG_ARGS \
            >"$1" 2>&1 &
        CG_PID=$!
        wait_ping "$CG_PORT" && return 0
        stop "$CG_PID"; CG_PID=""
    done
    return 1
}

# A private copy of the suite per run: runtest writes into tests/tmp, and two
# runs must not share it (nor write into the cache).
SUITE=$RUNDIR/suite
mkdir -p "$SUITE"
cp -a "$TREE/runtest" "$TREE/tests" "$SUITE/" || die "cannot copy the suite"
mkdir -p "$SUITE/tests/tmp"

# Identical flags for both modes. External mode runs one test client whatever
# --clients says, so it is not given. --durable: an unexpected error inside a
# test (an error reply where a value was due, a dropped connection) fails that
# test and the unit goes on, instead of aborting the unit. --timeout: runtest
# gives up after that long without a test finishing and names the test in
# progress.
FLAGS=(--host 127.0.0.1 --durable --timeout "$PROGRESS_TIMEOUT")
[ -n "$TAGS" ] && FLAGS+=(--tags "$TAGS")
[ "$SINGLEDB" = 1 ] && FLAGS+=(--singledb)
# shellcheck disable=SC2206  # RUNTEST_ARGS is a word list on purpose
[ -n "$RUNTEST_ARGS" ] && FLAGS+=($RUNTEST_ARGS)

# The SKIP_FILE lines of one unit, as runtest --skipfile takes them (names).
skip_names() {  # unit
    local line u
    [ -n "$SKIP_FILE" ] || return 0
    while IFS= read -r line || [ -n "$line" ]; do
        line=${line#"${line%%[![:space:]]*}"}
        case "$line" in "" | "#"*) continue ;; esac
        u=${line%%: *}
        [[ $u == unit/* ]] || u=unit/$u
        [ "$u" = "$1" ] && printf '%s\n' "${line#*: }"
    done <"$SKIP_FILE"
}

# Runs one unit against a port, skipping the names in skip file (may be
# empty); the log goes to <dir>/<mode>/<unit>.log. Sets SECS and appends
# `mode unit seconds rc note` to <dir>/times.tsv. note: `-`, `killed`
# (UNIT_TIMEOUT), `cellgate-died`. Not in a subshell: the traps must see RT_PID.
SECS=0
run_unit() {  # dir mode unit port skipfile
    local dir=$1 mode=$2 unit=$3 port=$4 log t0 t1 rc note=- skip=() try
    log=$dir/$mode/${unit//\//_}.log
    [ -s "$5" ] && skip=(--skipfile "$5")
    for try in 1 2 3; do
        # runtest's own test server listens on a port below --baseport (and
        # that port + 10000); a random base keeps runs on one machine apart,
        # and a run that lost the port anyway is started again.
        t0=$(date +%s%N)
        (cd "$SUITE" && TERM=dumb exec setsid ./runtest --port "$port" --single "$unit" \
            --baseport $((12000 + RANDOM % 8000)) "${FLAGS[@]}" "${skip[@]}") \
            </dev/null >"$log" 2>&1 &
        RT_PID=$!
        while kill -0 "$RT_PID" 2>/dev/null; do
            if [ $(( ($(date +%s%N) - t0) / 1000000000 )) -ge "$UNIT_TIMEOUT" ]; then
                note=killed
                echo "[KILLED]: no end after ${UNIT_TIMEOUT}s (UNIT_TIMEOUT)" >>"$log"
                stop_runtest
                break
            fi
            sleep 0.2
        done
        wait "$RT_PID" 2>/dev/null
        rc=$?
        RT_PID=""
        grep -q "^couldn't open socket" "$log" || break
    done
    t1=$(date +%s%N)
    SECS=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", (b - a) / 1e9 }')
    if [ "$mode" = cellgate ] && ! kill -0 "$CG_PID" 2>/dev/null; then
        note=cellgate-died
    fi
    printf '%s\t%s\t%s\t%s\t%s\n' "$mode" "$unit" "$SECS" "$rc" "$note" >>"$dir/times.tsv"
}

# One round: every unit of the list, direct then through cellgate, each on
# fresh servers; logs in <dir>/{direct,cellgate}, skip lists in <dir>/skip.
run_round() {  # dir units...
    local dir=$1 unit base mode port sdir skipf
    shift
    mkdir -p "$dir/direct" "$dir/cellgate" "$dir/skip"
    for unit in "$@"; do
        base=${unit//\//_}
        skipf=$dir/skip/$base.txt
        [ -f "$skipf" ] || skip_names "$unit" >"$skipf"
        for mode in direct cellgate; do
            sdir=$RUNDIR/$mode-$base
            if ! start_redis "$sdir"; then
                echo "[KILLED]: redis-server did not start" >"$dir/$mode/$base.log"
                printf '%s\t%s\t0\t1\tno-server\n' "$mode" "$unit" >>"$dir/times.tsv"
                continue
            fi
            port=$R_PORT
            if [ "$mode" = cellgate ]; then
                if ! start_cellgate "$dir/cellgate/$base.cellgate.log"; then
                    echo "[KILLED]: cellgate did not start" >"$dir/$mode/$base.log"
                    printf '%s\t%s\t0\t1\tno-cellgate\n' "$mode" "$unit" >>"$dir/times.tsv"
                    stop "$R_PID"; R_PID=""
                    continue
                fi
                port=$CG_PORT
            fi
            run_unit "$dir" "$mode" "$unit" "$port" "$skipf"
            printf 'redis-suite: %-26s %-8s %8ss  %s ok, %s err\n' "$unit" "$mode" "$SECS" \
                "$(grep -c '^\[ok\]: ' "$dir/$mode/$base.log")" \
                "$(grep -c '^\[err\]: ' "$dir/$mode/$base.log")"
            stop "$CG_PID"; CG_PID=""
            stop "$R_PID"; R_PID=""
            cp "$sdir/redis.log" "$dir/$mode/$base.redis.log" 2>/dev/null
            rm -rf "$sdir"
        done
    done
}

echo "redis-suite: Redis $SUITE_VER suite from $TREE"
echo "redis-suite: cellgate $CG"
echo "redis-suite: runtest flags: ${FLAGS[*]} (--port, --single <unit>)"
[ -n "$SKIP_FILE" ] && echo "redis-suite: skipping the tests in $SKIP_FILE"
echo "redis-suite: logs in $OUT"
units=()
for unit in $UNITS; do
    if [ -f "$SUITE/tests/$unit.tcl" ]; then
        units+=("$unit")
    else
        echo "redis-suite: no unit $unit, left out" >&2
    fi
done
[ "${#units[@]}" -gt 0 ] || die "no unit to run"
run_round "$OUT" "${units[@]}"

# Rechecks: a test that hangs, or fails leaving Redis busy, stops the rest of
# its unit through cellgate, hiding what comes after it. For each unit with
# tests not run through cellgate, the unit runs again (both modes) with the
# tests that failed or hung through cellgate added to its skip list, up to
# RECHECK more times. Only the tests not run before are taken from a recheck;
# the pass rate and the times come from the first round.
prev=$OUT
for k in $(seq 2 $((RECHECK + 1))); do
    dir=$OUT/recheck-$k
    todo=()
    for unit in "${units[@]}"; do
        base=${unit//\//_}
        [ -f "$prev/cellgate/$base.log" ] || continue
        tclsh "$HERE/report.tcl" --recheck "$prev" "$unit" >"$RUNDIR/new-skips.txt" || continue
        mkdir -p "$dir/skip"
        cat "$prev/skip/$base.txt" "$RUNDIR/new-skips.txt" >"$dir/skip/$base.txt"
        todo+=("$unit")
    done
    [ "${#todo[@]}" -gt 0 ] || break
    echo "redis-suite: recheck $((k - 1)): ${todo[*]}, skipping what failed or hung through cellgate"
    run_round "$dir" "${todo[@]}"
    prev=$dir
done

# ---------------------------------------------------------------- report
tclsh "$HERE/report.tcl" "$OUT" "$EXPECTED_FAIL_FILE" "$PASS_PCT" "$TIME_RATIO" "${units[@]}"
