#!/usr/bin/env bash
# The speed summary, in one run: what Redis spends per limiter decision
# through cellgate against the redis-cell module, what a lease saves a hot
# identity, and the forwarding hop against twemproxy. It runs the other
# benchmarks of this directory one after another and prints one markdown
# table of their results (the README's and docs/BENCHMARKS.md's), the
# scripts' own outputs kept in a directory it names:
#
#   limiter.sh (ALGOS=gcra)  Redis CPU per decision: CL.THROTTLE through
#                            cellgate / the module; one LIMITER level / one
#                            module call; two levels (user:*:trade) / two
#                            module calls (one call per level, as a user
#                            without cellgate would make them)
#   limiter_cluster.sh       the same for CL.THROTTLE in a 3-master cluster
#                            (Redis CPU summed over the masters)
#   lease.sh, P=1 and P=16   two proxies, one hot admitted identity: script
#                            calls and Redis CPU per decision, without and
#                            with a lease
#   forward.sh               GET and SET through cellgate / twemproxy at
#                            -P 1 and -P 16: rate, and CPU per request
#
# Redis CPU per decision comes from INFO cpu (the process's own time,
# sockets included), which other load on the machine moves far less than a
# rate; the rates are only worth reading on a quiet machine. It prints; it
# never asserts.
#
# Environment (all optional): CELLGATE (default build/cellgate; use a
# Release build), CELL_MODULE (redis-cell's libredis_cell.so: without it
# the module ratios are "-"), N (requests per redis-benchmark run, default
# 50000), R (runs per test, default 3), OUT (where the logs go, default a
# new directory under ${TMPDIR:-/tmp}), SKIP (words among "cluster lease
# forward": parts left out).
set -euo pipefail

cd "$(dirname "$0")/../.."
export CELLGATE=${CELLGATE:-build/cellgate}
export N=${N:-50000} R=${R:-3}
SKIP=${SKIP:-}
OUT=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/cellgate-speed.XXXXXX")}
mkdir -p "$OUT"

skipped() {
    [[ " $SKIP " == *" $1 "* ]]
}

# step NAME COMMAND...: runs a benchmark, its output to $OUT/NAME.log.
step() {
    local name=$1
    shift
    echo "running $name ..." >&2
    if ! "$@" >"$OUT/$name.log" 2>&1; then
        echo "note: $name failed; see $OUT/$name.log" >&2
    fi
}

step limiter env ALGOS=gcra bash tests/bench/limiter.sh
skipped cluster || step cluster bash tests/bench/limiter_cluster.sh
if ! skipped lease; then
    step lease1 env P=1 bash tests/bench/lease.sh
    step lease16 env P=16 bash tests/bench/lease.sh
fi
skipped forward || step forward bash tests/bench/forward.sh

# cost LOG TEST P: the median Redis CPU per decision (the cpu_us column of
# the "Medians per test" table) of TEST at -P P; empty when it did not run.
cost() {
    [[ -s $OUT/$1.log ]] || return 0
    awk -v t="$2" -v p="$3" '
        /^Medians per test/ { on = 1; next }
        on && $1 == t && $2 == p { print $7; exit }' "$OUT/$1.log"
}

# ratio A B [K]: A / (K * B) to two decimals, "-" when either is missing.
ratio() {
    awk -v a="$1" -v b="$2" -v k="${3:-1}" 'BEGIN {
        if (a == "" || b == "" || b + 0 == 0) print "-"
        else printf "%.2f\n", a / (k * b) }'
}

# pair A B [K]: "ratio (A / K*B)".
pair() {
    local kb=$2
    if [[ -n $2 && ${3:-1} != 1 ]]; then
        kb=$(awk -v b="$2" -v k="$3" 'BEGIN { printf "%.2f", k * b }')
    fi
    echo "$(ratio "$1" "$2" "${3:-1}") (${1:--} / ${kb:--})"
}

# lease_row LOG N: the lease.sh markdown row whose label starts with N
# ("without" or "with"): calls, Redis CPU per decision, share from a lease.
lease_row() {
    [[ -s $OUT/$1.log ]] || { echo "- | - | -"; return; }
    awk -F'|' -v w="$2" '
        $2 ~ "^ " w " " { gsub(/ /, "", $3); gsub(/ /, "", $5);
                          gsub(/ /, "", $6); print $3 " | " $5 " | " $6; exit }
    ' "$OUT/$1.log"
}

# fwd TEST P: the forward.sh ratio line of cellgate / twemproxy for TEST at
# -P P: "rps ratio | CPU ratio".
fwd() {
    [[ -s $OUT/forward.log ]] || { echo "- | -"; return; }
    awk -v t="$2" -v p="$3" '
        /^ratios, cellgate \/ twemproxy/ { on = 1; next }
        /^ratios, / { on = 0 }
        on && $1 == t && $2 == p { print $3 " | " $6; exit }' "$OUT/forward.log"
}

echo
echo "| Redis CPU µs per decision, cellgate / redis-cell module | \`-P 1\` | \`-P 16\` | target |"
echo "| --- | --- | --- | --- |"
for pl in 1 16; do
    cl[pl]=$(cost limiter cl "$pl")
    mod[pl]=$(cost limiter cl_module "$pl")
    one[pl]=$(cost limiter chk_gcra "$pl")
    two[pl]=$(cost limiter chk_two_level "$pl")
    ccl[pl]=$(cost cluster cl "$pl")
    cmod[pl]=$(cost cluster cl_module "$pl")
done
echo "| \`CL.THROTTLE\`, single | $(pair "${cl[1]}" "${mod[1]}") | $(pair "${cl[16]}" "${mod[16]}") | ≤ 1 |"
echo "| \`CL.THROTTLE\`, cluster (3 masters) | $(pair "${ccl[1]}" "${cmod[1]}") | $(pair "${ccl[16]}" "${cmod[16]}") | ≤ 1 |"
echo "| \`LIMITER CHECK\`, one GCRA level / one module call | $(pair "${one[1]}" "${mod[1]}") | $(pair "${one[16]}" "${mod[16]}") | |"
echo "| \`LIMITER CHECK\`, two levels / two module calls | $(pair "${two[1]}" "${mod[1]}" 2) | $(pair "${two[16]}" "${mod[16]}" 2) | ≤ 0.8 |"
echo
echo "| two proxies, one hot admitted identity | script calls per decision | Redis CPU µs per decision | admitted from a lease |"
echo "| --- | --- | --- | --- |"
for pl in 1 16; do
    echo "| \`-P $pl\`, without a lease | $(lease_row "lease$pl" without) |"
    echo "| \`-P $pl\`, with \`lease: 100\` | $(lease_row "lease$pl" with) |"
done
echo
echo "| forwarding, cellgate / twemproxy | rate | CPU per request | target |"
echo "| --- | --- | --- | --- |"
for t in GET SET; do
    for pl in 1 16; do
        echo "| $t \`-P $pl\` | $(fwd forward "$t" "$pl") | rate ≥ 1, CPU ≤ 1 |"
    done
done
echo
grep -m 1 '^machine' "$OUT/limiter.log" || true
echo "logs: $OUT"
