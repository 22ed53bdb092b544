#!/usr/bin/env bash
# Redis's own instructions per LIMITER CHECK decision, counted rather than
# timed (as throttle_instr.sh does for CL.THROTTLE): the library the build
# makes, its limiter function called as the proxy batches checks (FCALL
# ... "shapes" of B groups, each group the gcra levels of one identity and
# its override hash, "keys" form: no override assumed), D decisions over
# KEYSPACE random identities (a fixed seed). With BASELINE, the same
# workload against a second library.lua (an older build's), so a change to
# the state format or the scripts is measured in one run against what it
# replaces.
#
# A redis-server runs under callgrind with instrumentation off until the
# workload starts; the workload is one file of commands sent with
# redis-cli --pipe (so the client's pace does not matter). What is counted
# is Redis's user-space instructions while the workload runs (parsing, the
# script, the replies); the kernel's socket work is not.
#
# The levels: LEVELS=2 is user:*:trade (gcra 120 s INC, 1800 s DVT, then
# 90 s INC, 540 s DVT: 15 and 6 at once), LEVELS=1 a level of 99 at once,
# LEVELS=nested tenant:*:user:* (a tenant, one of TENANTS, 1,000 a
# second: a record of its string; its user, below a second "*", as
# user:*'s trade level: a key of its own, named "gcra.key" to a library
# that knows the word).
# KEYSPACE decides the mix: about D / KEYSPACE checks per identity, so a
# KEYSPACE far above D is new identities only, one far below it mostly
# identities seen before (and, with two levels, refused once their 6 are
# spent).
#
# Environment (all optional):
#   BUILD      build directory with algorithms/library.lua (default build)
#   BASELINE   another library.lua, counted the same way
#   LEVELS     1, 2 or nested (default 2)
#   TENANTS    tenants of LEVELS=nested (default 100)
#   D          decisions (default 20000)
#   B          groups per FCALL (default 50, about a proxy's batch)
#   KEYSPACE   distinct identities drawn from (default 1000000000)
#   OLD_KEYS   yes (default): the upgrade's lookup of the previous
#              release's keys on, as limiter_read_old_keys yes; no: off
# Prints; never asserts. Needs valgrind (callgrind_control,
# callgrind_annotate).
set -euo pipefail

KEYSPACE=${KEYSPACE:-1000000000}
# shellcheck source=tests/bench/lib.sh
. "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
BASELINE=${BASELINE:-}
LEVELS=${LEVELS:-2}
TENANTS=${TENANTS:-100}
D=${D:-20000}
B=${B:-50}
OLD_KEYS=${OLD_KEYS:-yes}
READY_TRIES=600 # valgrind starts Redis slowly

require_redis_tools
for tool in valgrind callgrind_control callgrind_annotate; do
    command -v "$tool" >/dev/null || die "$tool not found (apt-get install valgrind)"
done
lib=$BUILD/algorithms/library.lua
[[ -r $lib ]] || die "no $lib (build cellgate first, or set BUILD)"
[[ -z $BASELINE || -r $BASELINE ]] || die "no $BASELINE"
[[ $LEVELS == 1 || $LEVELS == 2 || $LEVELS == nested ]] ||
    die "LEVELS must be 1, 2 or nested"
[[ $B =~ ^[1-9][0-9]*$ && $D -ge $B ]] || die "B must be 1..D"
[[ $OLD_KEYS == yes || $OLD_KEYS == no ]] || die "OLD_KEYS must be yes or no"
now=""
[[ $OLD_KEYS == no ]] && now="!"

bench_init

# workload LIBRARY FILE: the FCALLs of D decisions, RESP, for the limiter
# function of LIBRARY.
workload() {
    local fn own=gcra nest=0 lv=$LEVELS
    fn="$(sed -n '1s/^#!lua name=//p' "$1")_limiter"
    if [[ $LEVELS == nested ]]; then
        lv=2 nest=1
        grep -q "'gcra.key'" "$1" && own=gcra.key
    fi
    awk -v fn="$fn" -v B="$B" -v D="$D" -v ks="$KEYSPACE" -v lv="$lv" \
        -v now="$now" -v nest="$nest" -v own="$own" -v nt="$TENANTS" '
        function bulk(s) { s = s ""; printf "$%d\r\n%s\r\n", length(s), s }
        BEGIN {
            srand(42)
            for (c = 0; c < int(D / B); c++) {
                printf "*%d\r\n", 3 + (lv + 1) * B + 6 * lv + 8
                bulk("FCALL"); bulk(fn); bulk((lv + 1) * B)
                for (j = 1; j <= B; j++) {
                    id = sprintf("%012d", int(rand() * ks))
                    if (nest) {
                        t = "cellgate:{tenant:" int(rand() * nt) "}"
                        bulk(t "#0:gcra")
                        bulk(t ":user:" id "#0:gcra")
                        bulk(t "#overrides")
                    } else if (lv == 2) {
                        bulk("cellgate:{user:" id "}#0:gcra")
                        bulk("cellgate:{user:" id "}:trade#0:gcra")
                        bulk("cellgate:{user:" id "}#overrides")
                    } else {
                        bulk("cellgate:{gcra:" id "}#0:gcra")
                        bulk("cellgate:{gcra:" id "}#overrides")
                    }
                }
                bulk("shapes"); bulk(now); bulk(1); bulk("check"); bulk(1)
                bulk(lv)
                if (nest) {
                    # the tenant: 1,000 a second, a burst of a second
                    bulk("gcra"); bulk(0); bulk(1000000); bulk(1); bulk(0)
                    bulk("")
                    bulk(own); bulk(90); bulk(0); bulk(540); bulk(0)
                    bulk("")
                } else if (lv == 2) {
                    bulk("gcra"); bulk(120); bulk(0); bulk(1800); bulk(0)
                    bulk("")
                    bulk("gcra"); bulk(90); bulk(0); bulk(540); bulk(0)
                    bulk("")
                } else {
                    bulk("gcra"); bulk(120); bulk(0); bulk(12000); bulk(0)
                    bulk("")
                }
                bulk("keys"); bulk(B)
            }
        }' >"$2"
}

# count NAME LIBRARY: Redis's instructions while LIBRARY's workload is
# piped in (instr_of[NAME]), and its commands per decision (cmds_of[NAME]).
count() {
    local name=$1 library=$2 port file=$workdir/$1.resp
    port=$(free_port)
    workload "$library" "$file"
    callgrind_redis "$name" "$port"
    redis-cli -p "$port" -x FUNCTION LOAD <"$library" >/dev/null
    callgrind_measure "$name" "$port" "$file" "$D"
}

count cellgate "$lib"
names=(cellgate)
if [[ -n $BASELINE ]]; then
    count baseline "$BASELINE"
    names+=(baseline)
fi

decisions=$((D / B * B))
echo "machine: $(machine_line)"
echo "$decisions LIMITER CHECKs of $LEVELS gcra level(s) over $KEYSPACE identities, FCALLs of $B groups, old keys looked up: $OLD_KEYS; library $lib"
printf '%-10s %14s %12s  %s\n' target instructions per_decision "commands per decision"
for n in "${names[@]}"; do
    printf '%-10s %14s %12s  %s\n' "$n" "${instr_of[$n]}" \
        "$((instr_of[$n] / decisions))" "${cmds_of[$n]}"
done
if [[ -n $BASELINE ]]; then
    echo "cellgate / baseline: $(awk -v a="${instr_of[cellgate]}" \
        -v b="${instr_of[baseline]}" 'BEGIN { printf "%.2f", a / b }')"
fi
