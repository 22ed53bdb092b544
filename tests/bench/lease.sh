#!/usr/bin/env bash
# Lease benchmark: what a hot admitted identity costs Redis per decision,
# with a lease (limits.yaml `lease: N` on its node) and without, through
# two proxies in front of one Redis (both hammering the same identity at
# once, as two proxies of a deployment would). The identity's limit is a
# fixed window high enough that it stays admitted.
#
# For each of the two paths (plain:hot, leased:hot), R times, the runs in
# turn: FLUSHALL and CONFIG RESETSTAT on Redis, then one redis-benchmark
# per proxy at once (LIMITER CHECK <path>, -c C, -n N, -P P), then Redis's
# script calls (FCALL, EVALSHA) per decision, the Redis time of those calls
# per decision (INFO commandstats, cmd_usec in lib.sh) and Redis's process
# CPU per decision (INFO cpu). These are counts of Redis's own work: the
# load of other jobs on the machine moves them far less than a rate would.
# Medians are printed, and a markdown table for docs/BENCHMARKS.md. It
# prints; it never asserts.
#
# Environment (all optional): CELLGATE (default build/cellgate; use a
# Release build), N (requests per proxy per run, default 100000), R
# (default 3), C (clients per proxy, default 25), P (pipeline, default 16),
# LEASE (N of the lease, default 100), LEASE_MS (limiter_lease_ms, default
# 100).
set -euo pipefail

C=${C:-25}
P=${P:-16}
# shellcheck source=tests/bench/lib.sh
. "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/../.."
LEASE=${LEASE:-100}
LEASE_MS=${LEASE_MS:-100}

require_redis_tools
require_cellgate
bench_init

tree=$workdir/limits.yaml
cat >"$tree" <<EOF2
plain:
  children:
    "*":
      limits: [{algorithm: fixed_window, max: 1000000000, window: 1d}]
leased:
  children:
    "*":
      limits: [{algorithm: fixed_window, max: 1000000000, window: 1d}]
      lease: $LEASE
EOF2
printf 'limiter_lease_ms: %s\n' "$LEASE_MS" >"$workdir/proxy.yaml"

rport=$(free_port)
start_redis "$rport"
ports=()
for k in 1 2; do
    p=$(free_port)
    start_bg cellgate "$p" "$workdir/cellgate$k.log" \
        "$CELLGATE" --config "$workdir/proxy.yaml" --listen "127.0.0.1:$p" \
        --upstream "127.0.0.1:$rport" --limits "$tree" --log-level warn
    ports+=("$p")
done

# hits: INFO limiter_lease_hits of both proxies, summed.
hits() {
    local p
    for p in "${ports[@]}"; do
        redis-cli -p "$p" INFO proxy
    done | tr -d '\r' | awk -F: '$1 == "limiter_lease_hits" { s += $2 } END { print s + 0 }'
}

# run PATH: one run of both proxies; appends "PATH calls cmd_us cpu_us
# hits" per decision to $results.
run() {
    local path=$1 cpu0 cpu1 stats calls usec p h0 h1 rate
    local -a bench=()
    h0=$(hits)
    redis-cli -p "$rport" FLUSHALL >/dev/null
    redis_resetstat "$rport"
    cpu0=$(redis_cpu_usec "$rport")
    for p in "${ports[@]}"; do
        redis-benchmark -p "$p" -c "$C" -n "$N" -P "$P" -q \
            LIMITER CHECK "$path" >"$workdir/rate.$p" 2>&1 &
        bench+=("$!")
    done
    for p in "${bench[@]}"; do
        wait "$p" || die "redis-benchmark failed on $path"
    done
    cpu1=$(redis_cpu_usec "$rport")
    h1=$(hits)
    stats=$(redis_commandstats "$rport")
    calls=$(awk '$1 ~ /^(fcall|evalsha)$/ { s += $2 } END { print s + 0 }' <<<"$stats")
    usec=$(cmd_usec <<<"$stats")
    # Decisions a second, both proxies summed (a rate: the machine's
    # load moves it, unlike the counts).
    rate=$(for p in "${ports[@]}"; do tr '\r' '\n' <"$workdir/rate.$p"; done |
        awk '/requests per second/ { for (i = 1; i < NF; i++) if ($(i + 1) == "requests") s += $i } END { printf "%.0f", s }')
    awk -v p="$path" -v c="$calls" -v u="$usec" -v a="$cpu0" -v b="$cpu1" \
        -v h="$((h1 - h0))" -v n="$((2 * N))" -v r="$rate" \
        'BEGIN { printf "%s %.4f %.3f %.3f %.3f %s\n", p, c / n, u / n, (b - a) / n, h / n, r }' \
        >>"$results"
}

for rep in $(seq 1 "$R"); do
    for path in plain:hot leased:hot; do
        run "$path"
    done
done

# med PATH COLUMN: the median of COLUMN (2: calls, 3: cmd_us, 4: cpu_us,
# 5: share from a lease, 6: decisions a second).
med() {
    median "$2" "$1"
}

echo "runs (path; per decision: Redis script calls, Redis µs of the calls, Redis CPU µs, share admitted from a lease; decisions a second, both proxies):"
cat "$results"
echo
echo "| two proxies, one hot admitted identity, -c $C each, -P $P | script calls per decision | Redis µs of the calls per decision | Redis CPU µs per decision | admitted from a lease | decisions a second (both proxies; load-dependent) |"
echo "|---|---|---|---|---|---|"
for path in plain:hot leased:hot; do
    label="without a lease"
    [[ $path == leased:hot ]] && label="with \`lease: $LEASE\` (limiter_lease_ms $LEASE_MS)"
    printf '| %s | %s | %s | %s | %s | %s |\n' "$label" "$(med "$path" 2)" \
        "$(med "$path" 3)" "$(med "$path" 4)" "$(med "$path" 5)" "$(med "$path" 6)"
done
echo
machine_line
