#!/usr/bin/env bash
# How many connections cellgate holds to each Redis node, as the nodes see
# them. Called by every part's connection-count check while its 20 clients
# are connected to cellgate.
#
#   bash upstream_conns.sh
#
# Environment (set by run.sh): CG_PID (cellgate's pid), NODE_PORTS (every
# Redis node, comma separated, on 127.0.0.1), UPSTREAM_POOL and PRIVATE_POOL
# (cellgate's upstream_pool and private_pool, defaults 2 and 4).
#
# A connection is cellgate's when its client address (addr=127.0.0.1:PORT in
# the node's CLIENT LIST) is the local end of a TCP socket that the cellgate
# process holds (ss -p), so the test's own direct connections, redis-cli and
# replication links are never counted.
#
# Of those, a connection whose last command was RESET (cmd=reset) is an idle
# private connection in cellgate's pool: cellgate RESETs a private connection
# when its client lets it go and keeps up to private_pool of them per node
# for the next transaction, subscriber or blocking call (earlier checks leave
# some there). They are counted apart: at most private_pool per node.
#
# Every other connection is in use, and a node may see at most
# upstream_pool RESP2 shared connections + upstream_pool RESP3 ones (opened
# for the first RESP3 client) + the limiter's own (opened by its first call
# to the node) + ALLOWANCE. The allowance (2) is for
# cellgate's own control traffic (a shared connection being replaced while
# the old one closes, a private connection whose RESET is still on its way)
# and is not room for per-client connections: 20 idle clients that ran
# ordinary commands must never hold one each.
#
# Prints one line, `limit L in use, P idle: 127.0.0.1:P1=n1 (idle i1) ...`
# (a node over a limit is marked `(>L)`), and exits 1 when a node is over a
# limit, 2 when it could not count.
set -uo pipefail
ALLOWANCE=2
POOL=${UPSTREAM_POOL:-2}
PRIVATE=${PRIVATE_POOL:-4}
LIMIT=$((POOL * 2 + 1 + ALLOWANCE))

if [ -z "${CG_PID:-}" ] || [ -z "${NODE_PORTS:-}" ]; then
    echo "cannot count: CG_PID and NODE_PORTS must be set (run.sh sets them)"
    exit 2
fi
if ! command -v ss >/dev/null; then
    echo "cannot count: ss (iproute2) is missing"
    exit 2
fi

out=""
over=0
IFS=',' read -r -a ports <<<"$NODE_PORTS"
for port in "${ports[@]}"; do
    # Local ports of cellgate's established sockets to this node.
    mine=$(ss -Htnp state established "( dport = :$port )" 2>/dev/null |
        grep -F "pid=$CG_PID," | awk '{ n = split($3, a, ":"); print a[n] }' | sort -u)
    list=$(timeout 5 redis-cli -h 127.0.0.1 -p "$port" client list 2>/dev/null) || {
        echo "cannot count: CLIENT LIST on 127.0.0.1:$port failed"
        exit 2
    }
    # "port cmd" of every client of the node, then only cellgate's.
    conns=$(tr -d '\r' <<<"$list" | awk '{
        port = ""; cmd = ""
        for (i = 1; i <= NF; i++) {
            if ($i ~ /^addr=/) { n = split($i, a, ":"); port = a[n] }
            if ($i ~ /^cmd=/) { cmd = substr($i, 5) }
        }
        print port, cmd
    }' | awk 'NR == FNR { mine[$1] = 1; next } ($1 in mine)' <(echo "$mine") -)
    [ -n "$mine" ] || conns=""
    idle=0
    inuse=0
    if [ -n "$conns" ]; then
        idle=$(awk '$2 == "reset"' <<<"$conns" | wc -l)
        inuse=$(awk '$2 != "reset"' <<<"$conns" | wc -l)
    fi
    item="127.0.0.1:$port=$inuse"
    if [ "$inuse" -gt "$LIMIT" ]; then
        item="$item(>$LIMIT)"
        over=1
    fi
    item="$item (idle $idle"
    if [ "$idle" -gt "$PRIVATE" ]; then
        item="$item(>$PRIVATE)"
        over=1
    fi
    out="$out $item)"
done
echo "limit $LIMIT in use, $PRIVATE idle:$out"
exit "$over"
