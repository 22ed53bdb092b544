#!/usr/bin/env bash
# TLS benchmark: GET/SET through cellgate with TLS on both sides, through
# cellgate in plaintext, and with redis-benchmark --tls straight to a TLS
# Redis, side by side in one run; then the memory an idle TLS client costs
# cellgate.
#
# One redis-server listens on a plain port and a TLS port (certificates from
# scripts/tls-certs.sh). Targets:
#   direct-tls    redis-benchmark --tls to Redis's tls-port
#   cellgate      plaintext client -> cellgate -> Redis's plain port
#   cellgate-tls  redis-benchmark --tls -> cellgate's tls_listen ->
#                 upstream_tls -> Redis's tls-port (certificates verified)
# For each: median rps, p50, p99, cellgate's CPU time per request (/proc,
# clock ticks over the run) and Redis's (INFO cpu: what a shard runs out
# of; TLS costs it too). Ratios printed: cellgate-tls /
# direct-tls rps (goal >= 0.8 at -P 16) and cellgate-tls / cellgate CPU per
# request (goal <= 2). Then IDLE (default 1000) TLS clients connect,
# finish their handshake, send one PING and stay idle: cellgate's RSS
# growth per client is printed (goal <= 64 KB). It prints; it never
# asserts. Exit status is 0 unless the setup fails.
#
# Environment: those of lib.sh (CELLGATE: use a Release build), TESTS
# (default get,set), IDLE (default 1000).
set -euo pipefail

# shellcheck source=tests/bench/lib.sh
. "$(dirname "$0")/lib.sh"
TESTS=${TESTS:-get,set}
IDLE=${IDLE:-1000}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)

require_redis_tools
require_cellgate
bench_init
certs=$workdir/tls
bash "$ROOT/scripts/tls-certs.sh" "$certs"

rport=$(free_port)
rtls=$(free_port)
start_redis "$rport" "$workdir/redis.log" --tls-port "$rtls" \
    --tls-cert-file "$certs/server.crt" --tls-key-file "$certs/server.key" \
    --tls-ca-cert-file "$certs/ca.crt" --tls-auth-clients no

cport=$(free_port)
start_bg cellgate "$cport" "$workdir/cellgate.log" \
    "$CELLGATE" --listen "127.0.0.1:$cport" --upstream "127.0.0.1:$rport" \
    --log-level warn
declare -A pid_of port_of tls_of
pid_of[cellgate]=$last_pid
port_of[cellgate]=$cport

tplain=$(free_port)
tport=$(free_port)
cat >"$workdir/tls.yaml" <<YAML
listen: 127.0.0.1:$tplain
tls_listen: 127.0.0.1:$tport
tls_cert_file: $certs/server.crt
tls_key_file: $certs/server.key
tls_auth_clients: no
upstream: 127.0.0.1:$rtls
upstream_tls: yes
upstream_tls_ca_cert_file: $certs/ca.crt
log_level: warn
YAML
start_bg cellgate-tls "$tport" "$workdir/cellgate-tls.log" \
    "$CELLGATE" --config "$workdir/tls.yaml"
pid_of[cellgate-tls]=$last_pid
port_of[cellgate-tls]=$tport
tls_of[cellgate-tls]=1
port_of[direct-tls]=$rtls
tls_of[direct-tls]=1
targets=(direct-tls cellgate cellgate-tls)

echo "redis-benchmark -c $C -n $N -r $KEYSPACE -t $TESTS, pipelines: $PIPELINES, $R runs each, median reported"
echo "machine: $(machine_line)"
echo

# bench_one TARGET PIPELINE: rows "target pipeline test rps p50 p99 cg_us
# redis_us", the CPU per request over the whole run of cellgate ("-"
# direct) and of Redis.
bench_one() {
    local t0=- t1=- r0 r1 n cg_us redis_us tls=()
    [[ -n ${tls_of[$1]:-} ]] && tls=(--tls --cacert "$certs/ca.crt")
    [[ -n ${pid_of[$1]:-} ]] && t0=$(proc_ticks "${pid_of[$1]}")
    r0=$(redis_cpu_usec "$rport")
    bench_csv "$1" "${tls[@]}" -h 127.0.0.1 -p "${port_of[$1]}" -c "$C" \
        -n "$N" -r "$KEYSPACE" -P "$2" -t "$TESTS"
    r1=$(redis_cpu_usec "$rport")
    [[ -n ${pid_of[$1]:-} ]] && t1=$(proc_ticks "${pid_of[$1]}")
    n=$((N * $(tr ',' '\n' <<<"$TESTS" | grep -c .)))
    cg_us=$(awk -v a="$t0" -v b="$t1" -v hz="$CLK_TCK" -v n="$n" \
        'BEGIN { if (a == "-" || b == "-") print "-";
                 else printf "%.2f\n", (b - a) / hz * 1e6 / n }')
    redis_us=$(awk -v a="$r0" -v b="$r1" -v n="$n" \
        'BEGIN { printf "%.2f\n", (b - a) / n }')
    tr -d '"' <"$workdir/bench.csv" |
        awk -F, -v t="$1" -v p="$2" -v cg="$cg_us" -v r="$redis_us" \
            '$1 != "test" && NF >= 7 { print t, p, $1, $2, $5, $7, cg, r }' \
            >>"$results"
}
bench_run_all

print_medians 13
echo
echo "CPU per request (us, whole run of all tests): cellgate's, Redis's"
for pl in $PIPELINES; do
    printf '  -P %-3s cellgate %s / %s  cellgate-tls %s / %s  direct-tls - / %s\n' "$pl" \
        "$(median 7 cellgate "$pl")" "$(median 8 cellgate "$pl")" \
        "$(median 7 cellgate-tls "$pl")" "$(median 8 cellgate-tls "$pl")" \
        "$(median 8 direct-tls "$pl")"
done
echo
echo "ratios"
printf '%-6s %8s %22s %22s\n' test pipeline tls_rps_vs_direct_tls tls_cpu_vs_plain_cpu
for x in $(bench_tests); do
    for pl in $PIPELINES; do
        printf '%-6s %8s %22s %22s\n' "$x" "$pl" \
            "$(ratio "$(median 4 cellgate-tls "$pl" "$x")" "$(median 4 direct-tls "$pl" "$x")")" \
            "$(ratio "$(median 7 cellgate-tls "$pl" "$x")" "$(median 7 cellgate "$pl" "$x")")"
    done
done

# ---------------- Idle TLS clients ----------------
rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }
pid=${pid_of[cellgate-tls]}
before=$(rss_kb "$pid")
python3 - "$tport" "$certs/ca.crt" "$IDLE" "$workdir/idle.ready" "$workdir/idle.done" <<'PY' &
import os, socket, ssl, sys, time
port, ca, n, ready, done = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
ctx = ssl.create_default_context(cafile=ca)
conns = []
for _ in range(n):
    s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port)), server_hostname="localhost")
    s.sendall(b"PING\r\n")
    assert s.recv(16) == b"+PONG\r\n"
    conns.append(s)
open(ready, "w").close()
while not os.path.exists(done):
    time.sleep(0.1)
PY
idle_pid=$!
pids+=("$idle_pid")
for _ in $(seq 1 600); do
    [[ -e $workdir/idle.ready ]] && break
    kill -0 "$idle_pid" 2>/dev/null || die "the idle TLS clients failed"
    sleep 0.1
done
sleep 1 # let cellgate settle (buffers of the last handshakes released)
after=$(rss_kb "$pid")
touch "$workdir/idle.done"
echo
echo "idle TLS clients: $IDLE, cellgate RSS ${before} KB -> ${after} KB:" \
    "$(( (after - before) / IDLE )) KB per idle TLS client"
