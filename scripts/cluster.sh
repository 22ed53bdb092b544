#!/usr/bin/env bash
# A local Redis Cluster for humans and benchmarks: 3 masters with 1 replica
# each, from Debian's redis-server, on free loopback ports.
#
#   scripts/cluster.sh start DIR   starts the nodes, creates the cluster, waits
#                                  until it is ready, then prints the seed list
#                                  127.0.0.1:p1,127.0.0.1:p2,... on stdout
#   scripts/cluster.sh seeds DIR   prints the seed list of a running cluster
#   scripts/cluster.sh stop DIR    stops every node started from DIR
#
# "Ready" means: every node says cluster_state:ok and knows every node, all
# nodes agree on slot owners and roles, none is flagged failing, and every
# replica's link to its master is up. Every wait is bounded; a failed start
# stops what it started and exits 1. DIR keeps each node's config
# (node-PORT.conf), log (redis-PORT.log), nodes-PORT.conf and pid file.
# Only the seed list goes to stdout; everything else goes to stderr.
#
# Environment: MASTERS (default 3, at least 3), REPLICAS (per master,
# default 1), NODE_TIMEOUT_MS (cluster-node-timeout, default 2000: a killed
# master is replaced within seconds), TLS_CERTS (a directory made by
# scripts/tls-certs.sh: every node also listens with TLS on a port of its
# own, the bus and replication speak TLS (tls-cluster, tls-replication),
# and the seed list names the TLS ports; the plain ports stay for this
# script's own checks), ANNOUNCE_HOSTNAME (nodes announce this host name
# and CLUSTER SLOTS and -MOVED name them by it: cluster-announce-hostname,
# cluster-preferred-endpoint-type hostname; the seed list uses it too).
set -euo pipefail

MASTERS=${MASTERS:-3}
REPLICAS=${REPLICAS:-1}
NODE_TIMEOUT_MS=${NODE_TIMEOUT_MS:-2000}
START_TIMEOUT_S=10   # each node answers PING
CREATE_TIMEOUT_S=60  # redis-cli --cluster create
READY_TIMEOUT_S=30   # the whole cluster is ready
STOP_TIMEOUT_S=5     # SIGTERM, then SIGKILL
HERE=$(cd "$(dirname "$0")" && pwd)

usage() {
    echo "usage: $0 start|seeds|stop DIR" >&2
    exit 2
}

die() {
    echo "cluster.sh: $*" >&2
    exit 1
}

# True when pid is a live (not zombie) redis-server started from $DIR: its
# title ends with its config file under $DIR (proc-title-template below),
# so a recycled pid is never killed.
is_our_node() {
    local pid=$1 state
    [[ "$pid" =~ ^[0-9]+$ ]] || return 1
    [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = redis-server ] || return 1
    state=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) || return 1
    [ "$state" != Z ] || return 1
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF "$DIR/node-"
}

# Pids of the running nodes of $DIR, one per line.
node_pids() {
    local pf pid
    for pf in "$DIR"/redis-*.pid; do
        [ -e "$pf" ] || continue
        pid=$(cat "$pf" 2>/dev/null || true)
        if is_our_node "$pid"; then
            echo "$pid"
        fi
    done
}

stop_nodes() {
    local pids pid i alive
    mapfile -t pids < <(node_pids)
    for pid in "${pids[@]}"; do
        kill -TERM "$pid" 2>/dev/null || true
    done
    for ((i = 0; i < STOP_TIMEOUT_S * 10; i++)); do
        alive=0
        for pid in "${pids[@]}"; do
            if is_our_node "$pid"; then
                alive=1
            fi
        done
        [ "$alive" -eq 0 ] && break
        sleep 0.1
    done
    for pid in "${pids[@]}"; do
        if is_our_node "$pid"; then
            echo "cluster.sh: pid $pid ignored SIGTERM, killing it" >&2
            kill -KILL "$pid" 2>/dev/null || true
        fi
    done
    rm -f "$DIR"/redis-*.pid
}

# Prints N distinct free loopback ports, one per line: N sockets bound at
# once, so the kernel cannot hand out a port twice (one interpreter start
# instead of N runs of scripts/freeport.sh).
free_ports() {
    local want=$1 i
    if command -v python3 >/dev/null; then
        python3 - "$want" <<'PY'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
for s in socks:
    print(s.getsockname()[1])
PY
        return
    fi
    for ((i = 0; i < want; i++)); do
        bash "$HERE/freeport.sh"
    done | sort -u
}

# Writes the config of one node: cluster mode, its own bus port, no
# persistence, replicas that sync at once (no diskless delay) into their
# own RDB file (nodes share DIR), masters that ping replicas every second
# (CLUSTER SLOTS lists a replica only once its offset moved, and on an idle
# master only these pings move it), daemonized
# with a pid file, and a title naming its config file (is_our_node).
tls_conf() {  # tls port
    [ -n "${TLS_CERTS:-}" ] || return 0
    printf '%s\n' "tls-port $1" \
        "tls-cert-file \"$TLS_CERTS/server.crt\"" \
        "tls-key-file \"$TLS_CERTS/server.key\"" \
        "tls-ca-cert-file \"$TLS_CERTS/ca.crt\"" \
        "tls-cluster yes" "tls-replication yes" "tls-auth-clients optional"
}

hostname_conf() {
    [ -n "${ANNOUNCE_HOSTNAME:-}" ] || return 0
    printf '%s\n' "cluster-announce-hostname $ANNOUNCE_HOSTNAME" \
        "cluster-preferred-endpoint-type hostname"
}

write_conf() {
    local port=$1 bus=$2
    cat >"$DIR/node-$port.conf" <<EOF
port $port
bind 127.0.0.1
cluster-enabled yes
cluster-port $bus
cluster-config-file nodes-$port.conf
cluster-node-timeout $NODE_TIMEOUT_MS
dir "$DIR"
save ""
appendonly no
repl-diskless-sync-delay 0
repl-ping-replica-period 1
dbfilename dump-$port.rdb
$(tls_conf "$3")
$(hostname_conf)
daemonize yes
pidfile "$DIR/redis-$port.pid"
logfile "$DIR/redis-$port.log"
proc-title-template "{title} {listen-addr} {server-mode} {config-file}"
EOF
}

# Waits until a node answers PING.
wait_ping() {
    local port=$1 i
    for ((i = 0; i < START_TIMEOUT_S * 10; i++)); do
        if [ "$(redis-cli -p "$port" ping 2>/dev/null)" = PONG ]; then
            return 0
        fi
        sleep 0.1
    done
    tail -n 20 "$DIR/redis-$port.log" >&2 2>/dev/null || true
    die "node on port $port did not answer PING within ${START_TIMEOUT_S}s"
}

# One node's view, normalised so that views of different nodes compare
# equal: "port role slots" per node, roles by port, migration markers and
# failure flags dropped, FAILING appended when a node is flagged.
node_view() {
    redis-cli -p "$1" cluster nodes 2>/dev/null | awk '
        {
            n = split($2, a, "@"); k = split(a[1], b, ":")
            port[$1] = b[k]; id[NR] = $1; flags[NR] = $3; m[NR] = $4
            line[NR] = $0
        }
        END {
            for (i = 1; i <= NR; i++) {
                nf = split(line[i], f, " "); s = ""
                for (j = 9; j <= nf; j++) {
                    if (f[j] !~ /^\[/) s = s " " f[j]
                }
                role = m[i] == "-" ? "master" : "replica-of-" port[m[i]]
                if (("," flags[i] ",") ~ /,(fail|fail\?|handshake|noaddr),/)
                    role = role "-FAILING"
                print port[id[i]], role s
            }
        }' | sort
}

# Prints why the cluster is not ready yet, or nothing when it is.
not_ready_reason() {
    local port ref="" view info
    for port in "${PORTS[@]}"; do
        info=$(redis-cli -p "$port" cluster info 2>/dev/null | tr -d '\r')
        grep -qx 'cluster_state:ok' <<<"$info" || {
            echo "node $port: cluster_state is not ok"
            return
        }
        grep -qx "cluster_known_nodes:${#PORTS[@]}" <<<"$info" || {
            echo "node $port does not know every node yet"
            return
        }
        view=$(node_view "$port")
        if grep -q FAILING <<<"$view"; then
            echo "node $port flags a node as failing"
            return
        fi
        if [ -z "$ref" ]; then
            ref=$view
        elif [ "$view" != "$ref" ]; then
            echo "nodes ${PORTS[0]} and $port disagree on the slot map"
            return
        fi
    done
    if [ "$(grep -c ' master [0-9]' <<<"$ref")" -ne "$MASTERS" ]; then
        echo "not $MASTERS masters with slots"
        return
    fi
    while read -r port; do
        if ! redis-cli -p "$port" info replication 2>/dev/null | tr -d '\r' |
            grep -qx 'master_link_status:up'; then
            echo "replica $port is not attached yet"
            return
        fi
    done < <(awk '$2 ~ /^replica-of-/ {print $1}' <<<"$ref")
}

wait_ready() {
    local i why=""
    for ((i = 0; i < READY_TIMEOUT_S * 10; i++)); do
        why=$(not_ready_reason)
        [ -z "$why" ] && return 0
        sleep 0.1
    done
    die "cluster not ready within ${READY_TIMEOUT_S}s: $why"
}

# EXIT trap of start: a start that did not finish stops what it started.
start_cleanup() {
    if [ "${STARTED_OK:-0}" -ne 1 ]; then
        echo "cluster.sh: start failed, stopping the nodes (logs in $DIR)" >&2
        stop_nodes
    fi
}

start() {
    local n i port seeds addrs=()
    if ! command -v redis-server >/dev/null || ! command -v redis-cli >/dev/null; then
        die "redis-server and redis-cli are needed (scripts/deps.sh installs them)"
    fi
    [[ "$MASTERS" =~ ^[0-9]+$ && "$MASTERS" -ge 3 ]] ||
        die "MASTERS must be a number >= 3 (redis-cli's minimum)"
    [[ "$REPLICAS" =~ ^[0-9]+$ ]] || die "REPLICAS must be a number"
    [ -z "$(node_pids)" ] || die "a cluster from $DIR is running; stop it first"
    n=$((MASTERS * (1 + REPLICAS)))
    rm -f "$DIR"/node-*.conf "$DIR"/nodes-*.conf "$DIR"/redis-*.log \
        "$DIR"/redis-*.pid "$DIR/seeds" "$DIR/create.log"

    STARTED_OK=0
    trap start_cleanup EXIT
    mapfile -t ALL < <(free_ports $((3 * n)))
    [ "${#ALL[@]}" -eq $((3 * n)) ] || die "could not pick $((3 * n)) distinct ports"
    PORTS=("${ALL[@]:0:n}")
    if [ -n "${TLS_CERTS:-}" ]; then
        TLS_CERTS=$(cd "$TLS_CERTS" && pwd)
        [ -s "$TLS_CERTS/server.crt" ] ||
            die "TLS_CERTS=$TLS_CERTS has no server.crt (scripts/tls-certs.sh makes it)"
    fi
    for ((i = 0; i < n; i++)); do
        write_conf "${PORTS[i]}" "${ALL[n + i]}" "${ALL[2 * n + i]}"
        redis-server "$DIR/node-${PORTS[i]}.conf" >/dev/null ||
            die "redis-server refused $DIR/node-${PORTS[i]}.conf"
    done
    for port in "${PORTS[@]}"; do
        wait_ping "$port"
        addrs+=("127.0.0.1:$port")
    done
    if ! timeout "$CREATE_TIMEOUT_S" redis-cli --cluster create "${addrs[@]}" \
        --cluster-replicas "$REPLICAS" --cluster-yes >"$DIR/create.log" 2>&1; then
        tail -n 20 "$DIR/create.log" >&2 || true
        die "redis-cli --cluster create failed (see $DIR/create.log)"
    fi
    wait_ready
    if [ -n "${TLS_CERTS:-}" ] || [ -n "${ANNOUNCE_HOSTNAME:-}" ]; then
        addrs=()
        for ((i = 0; i < n; i++)); do
            port=${PORTS[i]}
            [ -n "${TLS_CERTS:-}" ] && port=${ALL[2 * n + i]}
            addrs+=("${ANNOUNCE_HOSTNAME:-127.0.0.1}:$port")
        done
    fi
    seeds=$(IFS=,; echo "${addrs[*]}")
    echo "$seeds" >"$DIR/seeds"
    STARTED_OK=1
    echo "cluster.sh: $MASTERS masters + $((MASTERS * REPLICAS)) replicas ready, logs in $DIR" >&2
    echo "$seeds"
}

[ $# -eq 2 ] || usage
VERB=$1
DIR=$2

case "$VERB" in
start)
    mkdir -p "$DIR"
    DIR=$(cd "$DIR" && pwd)
    start
    ;;
seeds)
    [ -d "$DIR" ] || die "no directory $DIR"
    DIR=$(cd "$DIR" && pwd)
    if [ -z "$(node_pids)" ] || [ ! -s "$DIR/seeds" ]; then
        die "no cluster running from $DIR"
    fi
    cat "$DIR/seeds"
    ;;
stop)
    [ -d "$DIR" ] || exit 0
    DIR=$(cd "$DIR" && pwd)
    stop_nodes
    ;;
*)
    usage
    ;;
esac
