#!/usr/bin/env bash
# Client-compatibility suite: real client libraries (redis-py, ioredis,
# node-redis, redis-rb, phpredis, Perl Redis, redigo, BullMQ, redis-cli,
# redis-benchmark) used as an application would, pointed at cellgate and
# compared with the same operations straight against Redis.
#
#   bash tests/clients/run.sh [path/to/cellgate]      (default build-test/cellgate)
#   ONLY="py ioredis6" bash tests/clients/run.sh ...  (a subset of the parts)
#   MODE=single|cluster|tls|tls-cluster|sentinel|both|all   (default all)
#
# Runs every part in `single` (cellgate in front of one redis-server) and
# `cluster` (cellgate in front of a local 3-master Redis Cluster from
# scripts/cluster.sh); then the libraries that speak TLS (TLS_PARTS) in
# `tls` and `tls-cluster`: the same, with TLS on every connection (clients
# to cellgate's tls_listen port, cellgate to Redis with upstream_tls, the
# direct side to Redis's tls-port; certificates from scripts/tls-certs.sh,
# checked on both sides; the TLS cluster announces the host name localhost,
# which cellgate checks against the nodes' certificates); and in `sentinel`:
# cellgate finds a master through three redis-sentinels (`--sentinel`), a
# replica beside it. Each mode starts its servers on free loopback ports,
# runs every client part with a time limit, and stops them (also on failure or
# Ctrl-C). Every check name is prefixed by its mode (`ok - cluster: py: ...`).
# Ends with the line `N passed, N failed`; exits non-zero if any check failed.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)

CG=${1:-build-test/cellgate}
if [ ! -x "$CG" ] && [ -x "$ROOT/$CG" ]; then
    CG=$ROOT/$CG
fi
if [ ! -x "$CG" ]; then
    echo "clients: no cellgate binary at $CG (build it first)" >&2
    echo "0 passed, 1 failed"
    exit 1
fi
CG=$(cd "$(dirname "$CG")" && pwd)/$(basename "$CG")

case "${MODE:-all}" in
single | cluster | tls | tls-cluster | sentinel) MODES=("$MODE") ;;
both) MODES=(single cluster) ;;
all) MODES=(single cluster tls tls-cluster sentinel) ;;
*)
    echo "clients: MODE must be single, cluster, tls, tls-cluster, sentinel, both or all (not '${MODE}')" >&2
    echo "0 passed, 1 failed"
    exit 1
    ;;
esac

# Checks that fail because of a known cellgate bug, not because of this suite.
# Each one still runs and still prints `not ok`; it is listed here only so the
# lead's CI stays green until the bug is fixed. Names exactly as printed,
# mode prefix included (`single: py: ...`).
KNOWN_FAIL=(
)

# ---------------------------------------------------------------- what the clients need
# scripts/deps.sh's test set installs all of it (`bash scripts/deps.sh test`);
# this suite installs nothing. A missing runtime or library fails the run
# here, naming it, rather than skipping its part.
PY=""
for cand in /usr/bin/python3 python3; do
    if command -v "$cand" >/dev/null 2>&1 && "$cand" -c 'import redis' 2>/dev/null; then
        PY=$cand
        break
    fi
done
GOPATH_DEBIAN=/usr/share/gocode
REDIGO=$GOPATH_DEBIAN/src/github.com/gomodule/redigo/redis
NODE_MODULES="ioredis ioredis5 redis redis6 bullmq express"
missing=()
[ -n "$PY" ] || missing+=("redis-py (python3-redis)")
ruby -e 'require "redis"' 2>/dev/null || missing+=("redis-rb (ruby-redis)")
command -v php >/dev/null || missing+=("php (php-cli)")
php -r 'exit(class_exists("Redis") ? 0 : 1);' 2>/dev/null || missing+=("phpredis (php-redis)")
perl -MRedis -e 1 2>/dev/null || missing+=("Perl's Redis (libredis-perl)")
command -v go >/dev/null || missing+=("go (golang-go)")
[ -d "$REDIGO" ] || missing+=("redigo (golang-github-gomodule-redigo-dev)")
command -v ss >/dev/null || missing+=("ss (iproute2)")
for tool in redis-server redis-cli redis-benchmark node timeout; do
    command -v "$tool" >/dev/null || missing+=("$tool")
done
if command -v node >/dev/null; then
    for m in $NODE_MODULES; do
        (cd "$HERE" && node -e "require('$m')") >/dev/null 2>&1 ||
            missing+=("npm package $m (tests/clients/node_modules)")
    done
fi
if [ "${#missing[@]}" -gt 0 ]; then
    echo "clients: missing: ${missing[*]}" >&2
    echo "clients: bash scripts/deps.sh test installs every one" >&2
    echo "0 passed, 1 failed"
    exit 1
fi

# Which runtimes and library versions ran, for reading a failure later.
node_major=$(node -p 'process.versions.node.split(".")[0]')
echo "clients: node $(node --version), npm $(npm --version 2>/dev/null || echo '?'):" \
    "$(cd "$HERE" && node -p "'$NODE_MODULES'.split(' ').map(m =>
        m + ' ' + require(m + '/package.json').version).join(', ')")"
echo "clients: $($PY --version 2>&1) (redis-py $($PY -c 'import redis; print(redis.__version__)'))," \
    "ruby $(ruby -e 'print RUBY_VERSION') (redis-rb $(ruby -e 'require "redis"; print Redis::VERSION'))," \
    "php $(php -r 'echo PHP_VERSION;') (phpredis $(php -r 'echo phpversion("redis");'))," \
    "perl $(perl -e 'print substr($^V, 1)') (Redis $(perl -MRedis -e 'print $Redis::VERSION'))," \
    "$(go version | awk '{ print $3 }') (redigo $(dpkg-query -W -f='${Version}' golang-github-gomodule-redigo-dev 2>/dev/null || echo '?'))," \
    "$(redis-server --version | awk '{ print $1, $3 }')"
if [ "$node_major" -lt 20 ]; then
    # Debian 12's nodejs is Node 18: these two declare "engines": node >= 20.
    echo "clients: note: Node $node_major is below 20, what ioredis 6 (ioredis6) and node-redis 6 (node-redis6) ask: their failures here may be Node's, not cellgate's" >&2
fi

# The first error in a part's stderr, with a few lines around it (a Python
# traceback whole, up to its exception line): the line that says what went
# wrong, not the bottom of a long stack.
first_error() {  # file
    local at n
    n=$(wc -l <"$1")
    at=$(grep -n -m1 -E 'Traceback|Error|error|FAIL|panic:|Fatal|fatal' "$1" | cut -d: -f1)
    if [ -z "$at" ]; then
        echo "-- (no line names an error: its first lines, of $n)"
        head -n 15 "$1"
    elif sed -n "${at}p" "$1" | grep -q '^Traceback'; then
        echo "-- (line $at of $n)"
        awk -v a="$at" 'NR >= a { print; if (NR > a && $0 !~ /^[ \t]/) exit } NR >= a + 40 { exit }' "$1"
    else
        echo "-- (line $at of $n)"
        sed -n "$((at > 3 ? at - 3 : 1)),$((at + 8))p" "$1"
    fi
}

# ---------------------------------------------------------------- servers
RUNDIR=$(mktemp -d "${TMPDIR:-/tmp}/cellgate-clients.XXXXXX")
R_PID=""
CG_PID=""
CLUSTER_DIR=""
# stop and wait_ping
. "$ROOT/scripts/proc.sh"
EXTRA_PIDS=()  # sentinel mode: the replica and the sentinels
stop_servers() {
    local pid
    stop "$CG_PID"
    CG_PID=""
    for pid in "${EXTRA_PIDS[@]}"; do
        stop "$pid"
    done
    EXTRA_PIDS=()
    stop "$R_PID"
    R_PID=""
    if [ -n "$CLUSTER_DIR" ]; then
        bash "$ROOT/scripts/cluster.sh" stop "$CLUSTER_DIR" 2>/dev/null
        CLUSTER_DIR=""
    fi
}
cleanup() {
    stop_servers
    rm -rf "$RUNDIR"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:detect_stack_use_after_return=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

# Waits until cellgate serves keys (in cluster mode: has the slot map).
wait_serving() {  # port
    local _
    for _ in $(seq 1 100); do
        [ "$(timeout 2 redis-cli -p "$1" set clients:warmup 1 2>/dev/null)" = OK ] && return 0
        sleep 0.1
    done
    return 1
}

start_cellgate() {  # log, upstream args...
    local log=$1 _
    shift
    for _ in 1 2 3; do  # a free port can be taken between asking and binding
        PPORT=$(bash "$ROOT/scripts/freeport.sh")
        # limits.yaml: the tree node_express.js's app checks.
        "$CG" --listen "127.0.0.1:$PPORT" --limits "$HERE/limits.yaml" "$@" >"$log" 2>&1 &
        CG_PID=$!
        if wait_ping "$PPORT" && wait_serving "$PPORT"; then
            return 0
        fi
        stop "$CG_PID"; CG_PID=""
    done
    return 1
}

start_single_redis() {
    local _
    for _ in 1 2 3; do
        RPORT=$(bash "$ROOT/scripts/freeport.sh")
        redis-server --port "$RPORT" --bind 127.0.0.1 --save "" --appendonly no \
            --dir "$MODEDIR" --logfile "$MODEDIR/redis.log" &
        R_PID=$!
        if wait_ping "$RPORT"; then
            break
        fi
        stop "$R_PID"; R_PID=""
    done
    [ -n "$R_PID" ] || return 1
}

start_single() {
    start_single_redis || return 1
    NODE_PORTS=$RPORT
    DIRECT_TAG=""
    start_cellgate "$MODEDIR/cellgate.log" --upstream "127.0.0.1:$RPORT"
}

# Cluster mode: 3 masters, no replicas (REPLICAS=0: the suite needs no
# failover, and three processes fewer on a 2-core machine). The direct side of
# every comparison talks to the one master that owns the hash tag {cgd}, and
# every direct key carries that tag (DIRECT_TAG); the keys through cellgate
# have no common tag, so they spread over every master.
start_cluster() {
    local seeds slot
    CLUSTER_DIR=$MODEDIR/cluster
    seeds=$(REPLICAS=0 bash "$ROOT/scripts/cluster.sh" start "$CLUSTER_DIR" 2>"$MODEDIR/cluster-start.log") || return 1
    NODE_PORTS=$(tr ',' '\n' <<<"$seeds" | sed 's/.*://' | paste -sd, -)
    slot=$(timeout 5 redis-cli -p "${NODE_PORTS%%,*}" cluster keyslot cgd)
    RPORT=$(timeout 5 redis-cli -p "${NODE_PORTS%%,*}" cluster nodes | awk -v s="$slot" '
        $3 ~ /master/ {
            for (i = 9; i <= NF; i++) {
                n = split($i, r, "-"); lo = r[1]; hi = (n == 2 ? r[2] : r[1])
                if ($i !~ /^\[/ && s + 0 >= lo + 0 && s + 0 <= hi + 0) {
                    split($2, a, "@"); m = split(a[1], b, ":"); print b[m]; exit
                }
            }
        }')
    [ -n "$RPORT" ] || return 1
    DIRECT_TAG="{cgd}"
    start_cellgate "$MODEDIR/cellgate.log" --cluster "$seeds"
}

# TLS modes. Redis keeps its plain port for this script's PINGs; everything
# the parts do goes over TLS: cellgate's tls_listen port is PROXY_PORT, Redis's
# tls-port the direct side, and redis-cli / redis-benchmark on the parts' PATH
# are wrappers adding --tls --cacert (TLS_BIN).
TLS_DIR=$RUNDIR/tls
tls_setup() {
    bash "$ROOT/scripts/tls-certs.sh" "$TLS_DIR" || return 1
    TLS_BIN=$MODEDIR/bin
    mkdir -p "$TLS_BIN"
    local tool
    for tool in redis-cli redis-benchmark; do
        printf '#!/bin/sh\nexec %s --tls --cacert %s "$@"\n' "$(command -v $tool)" \
            "$TLS_DIR/ca.crt" >"$TLS_BIN/$tool"
        chmod +x "$TLS_BIN/$tool"
    done
}

# cellgate with TLS on both sides: plain `listen` (for wait_serving) and
# tls_listen, a client certificate of its own towards Redis.
start_cellgate_tls() {  # upstream key, its value
    local _ tport
    for _ in 1 2 3; do
        PLAIN_PPORT=$(bash "$ROOT/scripts/freeport.sh")
        tport=$(bash "$ROOT/scripts/freeport.sh")
        cat >"$MODEDIR/proxy.yaml" <<EOF
listen: 127.0.0.1:$PLAIN_PPORT
tls_listen: 127.0.0.1:$tport
tls_cert_file: $TLS_DIR/server.crt
tls_key_file: $TLS_DIR/server.key
tls_ca_cert_file: $TLS_DIR/ca.crt
tls_auth_clients: optional
$1: $2
upstream_tls: yes
upstream_tls_ca_cert_file: $TLS_DIR/ca.crt
upstream_tls_cert_file: $TLS_DIR/client.crt
upstream_tls_key_file: $TLS_DIR/client.key
EOF
        # The same limits.yaml as the plain modes: the limiter's checks run
        # over TLS too.
        "$CG" --config "$MODEDIR/proxy.yaml" --limits "$HERE/limits.yaml" \
            >"$MODEDIR/cellgate.log" 2>&1 &
        CG_PID=$!
        if wait_ping "$PLAIN_PPORT" && wait_serving "$PLAIN_PPORT"; then
            PPORT=$tport
            return 0
        fi
        stop "$CG_PID"; CG_PID=""
    done
    return 1
}

start_tls() {
    local _ plain
    tls_setup || return 1
    for _ in 1 2 3; do
        plain=$(bash "$ROOT/scripts/freeport.sh")
        RPORT=$(bash "$ROOT/scripts/freeport.sh")
        redis-server --port "$plain" --bind 127.0.0.1 --save "" --appendonly no \
            --tls-port "$RPORT" --tls-cert-file "$TLS_DIR/server.crt" \
            --tls-key-file "$TLS_DIR/server.key" --tls-ca-cert-file "$TLS_DIR/ca.crt" \
            --tls-auth-clients optional \
            --dir "$MODEDIR" --logfile "$MODEDIR/redis.log" &
        R_PID=$!
        if wait_ping "$plain"; then
            break
        fi
        stop "$R_PID"; R_PID=""
    done
    [ -n "$R_PID" ] || return 1
    NODE_PORTS=$RPORT
    DIRECT_TAG=""
    start_cellgate_tls upstream "127.0.0.1:$RPORT"
}

start_tls-cluster() {
    local seeds slot
    tls_setup || return 1
    CLUSTER_DIR=$MODEDIR/cluster
    seeds=$(TLS_CERTS=$TLS_DIR ANNOUNCE_HOSTNAME=localhost REPLICAS=0 \
        bash "$ROOT/scripts/cluster.sh" start "$CLUSTER_DIR" 2>"$MODEDIR/cluster-start.log") || return 1
    NODE_PORTS=$(tr ',' '\n' <<<"$seeds" | sed 's/.*://' | paste -sd, -)
    slot=$(timeout 5 "$TLS_BIN/redis-cli" -p "${NODE_PORTS%%,*}" cluster keyslot cgd)
    RPORT=$(timeout 5 "$TLS_BIN/redis-cli" -p "${NODE_PORTS%%,*}" cluster shards | tr -d '\r' | awk -v s="$slot" '
        $0 == "slots" { getline lo; getline hi; inrange = (s + 0 >= lo + 0 && s + 0 <= hi + 0) }
        $0 == "tls-port" && inrange { getline p; print p; exit }')
    [ -n "$RPORT" ] || return 1
    NODE_INFO_PORTS=$(for p in ${NODE_PORTS//,/ }; do
        timeout 5 "$TLS_BIN/redis-cli" -p "$p" info server | tr -d '\r' |
            sed -n 's/^tcp_port://p'
    done | paste -sd, -)
    DIRECT_TAG="{cgd}"
    start_cellgate_tls cluster "$seeds"
}

# Sentinel mode: a master, a replica and three redis-sentinels monitoring
# the master as "cg-master"; cellgate asks them for it. The direct side is
# the master.
start_sentinel() {
    local port i sports=() list="" _
    start_single_redis || return 1
    port=$(bash "$ROOT/scripts/freeport.sh")
    redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no \
        --replicaof 127.0.0.1 "$RPORT" --dir "$MODEDIR" \
        --logfile "$MODEDIR/replica.log" &
    EXTRA_PIDS+=($!)
    wait_ping "$port" || return 1
    for i in 1 2 3; do
        port=$(bash "$ROOT/scripts/freeport.sh")
        printf '%s\n' "port $port" "bind 127.0.0.1" "dir \"$MODEDIR\"" \
            "sentinel monitor cg-master 127.0.0.1 $RPORT 2" \
            "sentinel down-after-milliseconds cg-master 5000" \
            >"$MODEDIR/sentinel-$i.conf"
        redis-server "$MODEDIR/sentinel-$i.conf" --sentinel \
            --logfile "$MODEDIR/sentinel-$i.log" &
        EXTRA_PIDS+=($!)
        sports+=("$port")
        list+="${list:+,}127.0.0.1:$port"
    done
    for port in "${sports[@]}"; do
        wait_ping "$port" || return 1
    done
    NODE_PORTS=$RPORT
    DIRECT_TAG=""
    start_cellgate "$MODEDIR/cellgate.log" --sentinel "$list" \
        --sentinel-master cg-master
}

# ---------------------------------------------------------------- parts
# The Go part is built once, offline: redigo from Debian in GOPATH mode.
GO_BIN=$RUNDIR/go_clients
GO_ERR=""
if [ -z "${ONLY:-}" ] || [[ " $ONLY " == *" go "* ]]; then
    if ! (cd "$HERE" && GO111MODULE=off GOPATH=$GOPATH_DEBIAN GOFLAGS='' GOPROXY=off \
        timeout 120 go build -o "$GO_BIN" go_clients.go) >"$RUNDIR/go-build.log" 2>&1; then
        GO_ERR=$(tr '\n' ' ' <"$RUNDIR/go-build.log" | cut -c1-300)
    fi
fi

# name, time limit (s), command. The limits add up to about 6 minutes per
# mode; a whole run (both modes) takes about 3.
PARTS=(
    "py|40|$PY $HERE/py_clients.py"
    "ioredis6|20|node $HERE/node_ioredis.js ioredis"
    "ioredis5|20|node $HERE/node_ioredis.js ioredis5"
    "node-redis|20|node $HERE/node_redis.js"
    "node-redis-resp3|20|node $HERE/node_redis.js redis --resp3"
    "node-redis6|20|node $HERE/node_redis.js redis6"
    "rb|30|ruby $HERE/rb_clients.rb"
    "php|30|php $HERE/php_clients.php"
    "perl|30|perl $HERE/perl_clients.pl"
    "go|30|$GO_BIN"
    "bullmq|60|node $HERE/node_bullmq.js"
    "express|20|node $HERE/node_express.js"
    "cli|40|bash $HERE/cli_bench.sh"
)
# The parts whose libraries speak TLS, run again in the TLS modes (redis-cli
# in front of one Redis only: its cluster checks are the plain mode's), and
# the one run in sentinel mode (redis-py's checks cover what a client sees;
# failovers are it_sentinel's). Fewer parts than the plain modes, to keep
# the whole suite short.
TLS_PARTS=" py ioredis6 node-redis cli "
TLS_CLUSTER_PARTS=" py ioredis6 node-redis "
SENTINEL_PARTS=" py "

OUT=$RUNDIR/results.txt
: >"$OUT"

run_mode() {  # mode
    local mode=$1 part name limit cmd log err rc t0 tm
    MODEDIR=$RUNDIR/$mode
    mkdir -p "$MODEDIR"
    tm=$SECONDS
    if ! "start_$mode"; then
        echo "not ok - $mode: clients: start Redis and cellgate: see below" | tee -a "$OUT"
        tail -n 20 "$MODEDIR"/*.log 2>/dev/null
        stop_servers
        return
    fi
    echo "clients: mode $mode: Redis nodes on 127.0.0.1:{$NODE_PORTS} (direct side: $RPORT), cellgate ($CG) on 127.0.0.1:$PPORT"
    # UPSTREAM_POOL, PRIVATE_POOL: cellgate's defaults (its proxy.yaml, if
    # any, leaves them).
    local cg_mode=${mode#tls-} path=$PATH
    [ "$mode" = tls ] || [ "$mode" = sentinel ] && cg_mode=single
    unset CG_TLS_CA
    [ "$mode" = tls-cluster ] && export NODE_INFO_PORTS || unset NODE_INFO_PORTS
    if [[ "$mode" == tls* ]]; then
        export CG_TLS_CA=$TLS_DIR/ca.crt
        path=$TLS_BIN:$PATH
    fi
    export PROXY_PORT=$PPORT REDIS_PORT=$RPORT CG_MODE=$cg_mode DIRECT_TAG NODE_PORTS CG_PID UPSTREAM_POOL=2 PRIVATE_POOL=4 CLIENTS_DIR=$HERE
    for part in "${PARTS[@]}"; do
        IFS='|' read -r name limit cmd <<<"$part"
        if [ -n "${ONLY:-}" ] && [[ " $ONLY " != *" $name "* ]]; then
            continue
        fi
        if [ "$mode" = tls ] && [[ "$TLS_PARTS" != *" $name "* ]]; then
            continue
        fi
        if [ "$mode" = tls-cluster ] && [[ "$TLS_CLUSTER_PARTS" != *" $name "* ]]; then
            continue
        fi
        if [ "$mode" = sentinel ] && [[ "$SENTINEL_PARTS" != *" $name "* ]]; then
            continue
        fi
        echo "== clients: $mode: $name"
        log=$MODEDIR/part-$name.txt
        err=$MODEDIR/part-$name.err
        t0=$SECONDS
        if [ "$name" = go ] && [ -n "$GO_ERR" ]; then
            echo "not ok - $mode: $name: build with redigo (GOPATH mode, offline): $GO_ERR" >"$log"
            : >"$err"
            rc=1
        else
            # shellcheck disable=SC2086  # cmd is a word list on purpose
            PATH=$path timeout -k 5 "$limit" $cmd >"$log.raw" 2>"$err"
            rc=$?
            # Every check and every information line names its mode.
            sed -E "s/^(ok|not ok) - /\1 - $mode: /; s/^# /# $mode: /" "$log.raw" >"$log"
        fi
        cat "$log"
        grep -E '^(ok|not ok) - ' "$log" >>"$OUT"
        if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
            echo "not ok - $mode: $name: timed out after ${limit}s" | tee -a "$OUT"
        elif [ "$rc" -ne 0 ] && ! grep -q '^not ok - ' "$log"; then
            echo "not ok - $mode: $name: exited with status $rc" | tee -a "$OUT"
        fi
        if [ "$rc" -ne 0 ] && [ -s "$err" ]; then
            echo "-- $mode: $name stderr, its first error:"
            first_error "$err"
        fi
        echo "-- $mode: $name: $((SECONDS - t0)) s"
    done

    # cellgate must have survived all of it, and without sanitizer reports.
    if kill -0 "$CG_PID" 2>/dev/null && [ "$(PATH=$path timeout 2 redis-cli -p "$PPORT" ping 2>/dev/null)" = PONG ]; then
        echo "ok - $mode: cellgate still serving after every client" | tee -a "$OUT"
    else
        echo "not ok - $mode: cellgate still serving after every client: it died or stopped answering" | tee -a "$OUT"
    fi
    stop "$CG_PID"
    CG_PID=""
    if grep -qE 'ERROR: (LeakSanitizer|AddressSanitizer)|runtime error:' "$MODEDIR/cellgate.log"; then
        echo "not ok - $mode: cellgate: no sanitizer report: see its log below" | tee -a "$OUT"
        grep -E -A30 'ERROR: (LeakSanitizer|AddressSanitizer)|runtime error:' "$MODEDIR/cellgate.log" | head -60
    else
        echo "ok - $mode: cellgate: no sanitizer report" | tee -a "$OUT"
    fi
    if [ -n "${CLIENTS_KEEP_LOGS:-}" ]; then  # a directory: keep this mode's logs there
        mkdir -p "$CLIENTS_KEEP_LOGS/$mode"
        cp "$MODEDIR"/*.txt "$MODEDIR"/*.err "$MODEDIR"/*.log "$CLIENTS_KEEP_LOGS/$mode/" 2>/dev/null
    fi
    stop_servers
    echo "-- mode $mode: $((SECONDS - tm)) s"
}

for mode in "${MODES[@]}"; do
    run_mode "$mode"
done

# ---------------------------------------------------------------- summary
is_known() {  # a `not ok - name: why` line
    local kf
    for kf in "${KNOWN_FAIL[@]}"; do
        case "$1" in "not ok - $kf: "* | "not ok - $kf") return 0 ;; esac
    done
    return 1
}
passed=$(grep -c '^ok - ' "$OUT")
failed=0
known=()
while IFS= read -r line; do
    if is_known "$line"; then
        known+=("$line")
    else
        failed=$((failed + 1))
    fi
done < <(grep '^not ok - ' "$OUT")
for kf in "${KNOWN_FAIL[@]}"; do
    if grep -qxF "ok - $kf" "$OUT"; then
        echo "clients: KNOWN_FAIL '$kf' passes now: remove it from KNOWN_FAIL in tests/clients/run.sh"
    fi
done
if [ "${#known[@]}" -gt 0 ]; then
    echo "clients: ${#known[@]} known failure(s), not counted (KNOWN_FAIL in tests/clients/run.sh):"
    printf '  KNOWN_FAIL: %s\n' "${known[@]}"
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
