#!/usr/bin/env bash
# Installs dependencies, builds Release into build/, starts a local
# redis-server on a free loopback port and cellgate on 127.0.0.1:7777 in
# front of it, in the foreground. Ctrl-C stops both.
#
#   scripts/run.sh [extra cellgate flags...]
#   LISTEN=127.0.0.1:7777 scripts/run.sh
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DPX_TESTS=OFF >/dev/null
cmake --build build -j"$(nproc)" --target cellgate

LISTEN=${LISTEN:-127.0.0.1:7777}
RUNDIR=$(mktemp -d "${TMPDIR:-/tmp}/cellgate-run.XXXXXX")
RPORT=$(bash scripts/freeport.sh)

cleanup() {
    [ -n "${CG_PID:-}" ] && kill -TERM "$CG_PID" 2>/dev/null && wait "$CG_PID" 2>/dev/null || true
    [ -n "${R_PID:-}" ] && kill -TERM "$R_PID" 2>/dev/null && wait "$R_PID" 2>/dev/null || true
    rm -rf "$RUNDIR"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

redis-server --port "$RPORT" --bind 127.0.0.1 --save "" --appendonly no \
    --dir "$RUNDIR" --logfile "$RUNDIR/redis.log" &
R_PID=$!
for _ in $(seq 1 100); do
    redis-cli -p "$RPORT" ping >/dev/null 2>&1 && break
    sleep 0.05
done
echo "redis-server on 127.0.0.1:$RPORT (log: $RUNDIR/redis.log)" >&2
echo "cellgate on $LISTEN: try  redis-cli -p ${LISTEN##*:} ping" >&2

build/cellgate --listen "$LISTEN" --upstream "127.0.0.1:$RPORT" "$@" &
CG_PID=$!
wait "$CG_PID"
