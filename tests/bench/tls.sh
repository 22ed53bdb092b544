#!/usr/bin/env bash
# TLS benchmark: GET/SET through cellgate with TLS on both sides, through
# cellgate in plaintext, and `redis-benchmark --tls` straight to a TLS
# Redis, side by side in one run, with the CPU time each process spends
# per request.
#
# Starts one redis-server with a plaintext and a TLS port (a CA and a
# server certificate made with the openssl CLI in the scratch directory),
# a cellgate speaking TLS to clients (tls_listen) and to Redis
# (upstream_tls), and a plaintext cellgate in front of the plaintext port.
# redis-benchmark runs against each target in turn, R times per pipeline
# depth; it prints the median rps, p50 and p99, then the median CPU time
# per request of cellgate and of Redis (from /proc and INFO cpu, over
# each run's GET and SET). It prints; it never asserts.
#
# Environment (all optional): CELLGATE, N, R, C, PIPELINES, KEYSPACE as in
# lib.sh; TESTS (redis-benchmark -t, default get,set).
set -euo pipefail

# shellcheck source=tests/bench/lib.sh
. "$(dirname "$0")/lib.sh"
TESTS=${TESTS:-get,set}

require_redis_tools
require_cellgate
command -v openssl >/dev/null || die "openssl not found (apt-get install openssl)"
bench_init

# ---------------- Certificates ----------------

(
    cd "$workdir"
    k='-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes'
    # shellcheck disable=SC2086 # $k is several arguments
    openssl req -x509 $k -keyout ca.key -out ca.crt -days 30 \
        -subj /CN=bench-ca 2>/dev/null
    # shellcheck disable=SC2086
    openssl req $k -keyout server.key -out server.csr -subj /CN=localhost \
        2>/dev/null
    echo 'subjectAltName=DNS:localhost,IP:127.0.0.1' >san.ext
    openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -set_serial 1 \
        -days 30 -extfile san.ext -out server.crt 2>/dev/null
) || die "could not make the certificates"

# ---------------- Start the targets ----------------

declare -A port_of pid_of tls_of
rport=$(free_port)
rtls=$(free_port)
start_redis "$rport" "$workdir/redis.log" --tls-port "$rtls" \
    --tls-cert-file "$workdir/server.crt" --tls-key-file "$workdir/server.key" \
    --tls-ca-cert-file "$workdir/ca.crt" --tls-auth-clients no
redis_pid=$last_pid

targets=(direct-tls cellgate-tls cellgate)
port_of[direct-tls]=$rtls
tls_of[direct-tls]=1
pid_of[direct-tls]=

ctls=$(free_port)
cat >"$workdir/tls.yaml" <<EOF
listen: off
tls_listen: 127.0.0.1:$ctls
tls_cert_file: $workdir/server.crt
tls_key_file: $workdir/server.key
tls_auth_clients: no
upstream: 127.0.0.1:$rtls
upstream_tls: yes
upstream_tls_ca_cert_file: $workdir/ca.crt
log_level: warn
EOF
start_bg cellgate-tls "$ctls" "$workdir/cellgate-tls.log" \
    "$CELLGATE" --config "$workdir/tls.yaml"
port_of[cellgate-tls]=$ctls
tls_of[cellgate-tls]=1
pid_of[cellgate-tls]=$last_pid

cport=$(free_port)
start_bg cellgate "$cport" "$workdir/cellgate.log" \
    "$CELLGATE" --listen "127.0.0.1:$cport" --upstream "127.0.0.1:$rport" \
    --log-level warn
port_of[cellgate]=$cport
tls_of[cellgate]=
pid_of[cellgate]=$last_pid

echo "redis-benchmark -c $C -n $N -r $KEYSPACE -t $TESTS, pipelines: $PIPELINES, $R runs each, median reported"
echo "targets: direct-tls (redis-benchmark --tls to Redis), cellgate-tls (TLS both sides), cellgate (plaintext)"
echo

# ---------------- Run ----------------

cpu="$workdir/cpu"
: >"$cpu"

# bench_one TARGET PIPELINE: the rows of each test, and one row of CPU
# microseconds per request: target pipeline cellgate_us redis_us.
bench_one() {
    local target=$1 pl=$2 pid=${pid_of[$1]} tls=() t0 t1 r0 r1 n
    [[ -z ${tls_of[$1]} ]] || tls=(--tls --cacert "$workdir/ca.crt")
    t0=$([[ -n $pid ]] && proc_ticks "$pid" || echo -)
    r0=$(redis_cpu_usec "$rport")
    bench_csv "$target" -h 127.0.0.1 -p "${port_of[$target]}" "${tls[@]}" \
        -c "$C" -n "$N" -r "$KEYSPACE" -P "$pl" -t "$TESTS"
    t1=$([[ -n $pid ]] && proc_ticks "$pid" || echo -)
    r1=$(redis_cpu_usec "$rport")
    tr -d '"' <"$workdir/bench.csv" |
        awk -F, -v t="$target" -v p="$pl" \
            '$1 != "test" && NF >= 7 { print t, p, $1, $2, $5, $7 }' \
            >>"$results"
    n=$(($(tr -d '"' <"$workdir/bench.csv" | grep -vc '^test') * N))
    awk -v t="$target" -v p="$pl" -v a="$t0" -v b="$t1" -v ra="$r0" \
        -v rb="$r1" -v n="$n" -v hz="$CLK_TCK" 'BEGIN {
            cg = (a == "-" || b == "-") ? "-" : sprintf("%.2f", (b - a) / hz * 1e6 / n)
            printf "%s %s %s %.2f\n", t, p, cg, (rb - ra) / n
        }' >>"$cpu"
}
bench_run_all

# ---------------- Report ----------------

print_medians 12
echo
echo "CPU time per request, microseconds (median; Redis: INFO cpu)"
printf '%8s %-12s %12s %12s\n' pipeline target cellgate_us redis_us
for pl in $PIPELINES; do
    for target in "${targets[@]}"; do
        printf '%8s %-12s %12s %12s\n' "$pl" "$target" \
            "$(results=$cpu median 3 "$target" "$pl")" \
            "$(results=$cpu median 4 "$target" "$pl")"
    done
done
