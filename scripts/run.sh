#!/usr/bin/env bash
# Installs dependencies, builds Release into build/, starts a local Redis
# Cluster (3 masters, 3 replicas, on free loopback ports) and cellgate in
# cluster mode on 127.0.0.1:7777 in front of it, in the foreground. Ctrl-C
# stops everything.
#
#   scripts/run.sh [extra cellgate flags...]
#   LISTEN=127.0.0.1:7777 scripts/run.sh
#   MODE=single scripts/run.sh      one redis-server instead of a cluster
#   MODE=embedded scripts/run.sh    no Redis: the in-process limiter store
#   LIMITS=my.yaml scripts/run.sh   another limits tree (LIMITS= for none);
#                                   by default conf/limits.example.yaml, unless
#                                   the flags name --limits or --config
#   METRICS=127.0.0.1:9200 scripts/run.sh
#                                   the Prometheus endpoint elsewhere (METRICS=
#                                   for none); by default 127.0.0.1:9121,
#                                   unless the flags name --metrics-listen or
#                                   --config
#   ADMIN_PASSWORD=secret scripts/run.sh
#                                   the password of `AUTH admin` (LIMITER
#                                   OVERRIDE, RESET, RELOAD); by default a
#                                   random one, printed at start, unless the
#                                   flags name --config
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DPX_TESTS=OFF >/dev/null
cmake --build build -j"$(nproc)" --target cellgate

LISTEN=${LISTEN:-127.0.0.1:7777}
MODE=${MODE:-cluster}
RUNDIR=$(mktemp -d "${TMPDIR:-/tmp}/cellgate-run.XXXXXX")

cleanup() {
    if [ -n "${CG_PID:-}" ]; then
        kill -TERM "$CG_PID" 2>/dev/null || true
        wait "$CG_PID" 2>/dev/null || true
    fi
    if [ -n "${R_PID:-}" ]; then
        kill -TERM "$R_PID" 2>/dev/null || true
        wait "$R_PID" 2>/dev/null || true
    fi
    if [ "$MODE" = cluster ]; then
        bash scripts/cluster.sh stop "$RUNDIR/cluster" >/dev/null 2>&1 || true
    fi
    rm -rf "$RUNDIR"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

case "$MODE" in
cluster)
    mkdir -p "$RUNDIR/cluster"
    SEEDS=$(bash scripts/cluster.sh start "$RUNDIR/cluster")
    echo "Redis Cluster: $SEEDS (logs: $RUNDIR/cluster)" >&2
    UPSTREAM=(--cluster "$SEEDS")
    ;;
single)
    RPORT=$(bash scripts/freeport.sh)
    redis-server --port "$RPORT" --bind 127.0.0.1 --save "" --appendonly no \
        --dir "$RUNDIR" --logfile "$RUNDIR/redis.log" &
    R_PID=$!
    for _ in $(seq 1 100); do
        redis-cli -p "$RPORT" ping >/dev/null 2>&1 && break
        sleep 0.05
    done
    echo "redis-server on 127.0.0.1:$RPORT (log: $RUNDIR/redis.log)" >&2
    UPSTREAM=(--upstream "127.0.0.1:$RPORT")
    ;;
embedded)
    UPSTREAM=()
    ;;
*)
    echo "run.sh: MODE must be cluster, single or embedded" >&2
    exit 2
    ;;
esac

LIMITS_ARGS=()
case " $* " in
*" --limits"* | *" --config"*) ;;
*)
    LIMITS=${LIMITS-conf/limits.example.yaml}
    if [ -n "$LIMITS" ]; then
        LIMITS_ARGS=(--limits "$LIMITS")
        echo "limits: $LIMITS" >&2
    fi
    ;;
esac

METRICS_ARGS=()
case " $* " in
*" --metrics-listen"* | *" --config"*) ;;
*)
    METRICS=${METRICS-127.0.0.1:9121}
    if [ -n "$METRICS" ]; then
        METRICS_ARGS=(--metrics-listen "$METRICS")
    fi
    ;;
esac

# Limiter administration needs an admin password (there is none by
# default): this run gets one, in a proxy.yaml of its own, and says it.
CONFIG_ARGS=()
case " $* " in
*" --config"*) ADMIN_PASSWORD="" ;;
*)
    ADMIN_PASSWORD=${ADMIN_PASSWORD:-$(od -An -N9 -tx1 /dev/urandom | tr -d ' \n')}
    printf 'admin_password: "%s"\n' "$ADMIN_PASSWORD" >"$RUNDIR/proxy.yaml"
    chmod 600 "$RUNDIR/proxy.yaml"
    CONFIG_ARGS=(--config "$RUNDIR/proxy.yaml")
    ;;
esac

PORT=${LISTEN##*:}
echo "cellgate on $LISTEN: try  redis-cli -p $PORT ping" >&2
if [ ${#LIMITS_ARGS[@]} -gt 0 ]; then
    echo "               and  redis-cli -p $PORT limiter check user:alex:trade" >&2
fi
if [ -n "$ADMIN_PASSWORD" ]; then
    echo "admin:         redis-cli -p $PORT --user admin --pass $ADMIN_PASSWORD limiter rules" >&2
fi
if [ ${#METRICS_ARGS[@]} -gt 0 ]; then
    echo "metrics:       curl -s http://$METRICS/metrics" >&2
fi
build/cellgate "${CONFIG_ARGS[@]+"${CONFIG_ARGS[@]}"}" --listen "$LISTEN" \
    "${UPSTREAM[@]+"${UPSTREAM[@]}"}" \
    "${LIMITS_ARGS[@]+"${LIMITS_ARGS[@]}"}" \
    "${METRICS_ARGS[@]+"${METRICS_ARGS[@]}"}" "$@" &
CG_PID=$!
wait "$CG_PID"
