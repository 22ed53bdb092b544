#!/usr/bin/env bash
# usage: instr.sh LIBRARY.lua [D] [B] [KEYSPACE] [LEVELS] [NOW]
# Redis's instructions per LIMITER decision (callgrind), FCALL shapes
# batches of B groups, random identities (fixed seed). NOW "" or "!".
set -uo pipefail
lib=$1; D=${2:-20000}; B=${3:-50}; KS=${4:-20000}; LV=${5:-2}; NOW=${6:-}
d=$(mktemp -d)
fn="$(sed -n '1s/^#!lua name=//p' "$lib")_limiter"
awk -v fn="$fn" -v B="$B" -v D="$D" -v ks="$KS" -v lv="$LV" -v now="$NOW" '
  function bulk(s) { s = s ""; printf "$%d\r\n%s\r\n", length(s), s }
  BEGIN {
    srand(42)
    for (c = 0; c < int(D / B); c++) {
      nk = (lv + 1) * B
      na = 6 + 6 * lv + 2
      printf "*%d\r\n", 3 + nk + na
      bulk("FCALL"); bulk(fn); bulk(nk)
      for (j = 1; j <= B; j++) {
        id = sprintf("%012d", int(rand() * ks))
        if (lv == 2) {
          bulk("cellgate:{user:" id "}#0:gcra"); bulk("cellgate:{user:" id "}:trade#0:gcra")
          bulk("cellgate:{user:" id "}#overrides")
        } else {
          bulk("cellgate:{gcra:" id "}#0:gcra"); bulk("cellgate:{gcra:" id "}#overrides")
        }
      }
      bulk("shapes"); bulk(now); bulk(1); bulk("check"); bulk(1); bulk(lv)
      if (lv == 2) {
        bulk("gcra"); bulk(120); bulk(0); bulk(1800); bulk(0); bulk("")
        bulk("gcra"); bulk(90); bulk(0); bulk(540); bulk(0); bulk("")
      } else {
        bulk("gcra"); bulk(120); bulk(0); bulk(11880); bulk(0); bulk("")
      }
      bulk("keys"); bulk(B)
    }
  }' > $d/w.resp
port=$((31000 + RANDOM % 2000))
valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file=$d/cg.out redis-server --port $port --bind 127.0.0.1 --save "" --appendonly no >$d/r.log 2>&1 &
vp=$!
for i in $(seq 1 300); do redis-cli -p $port PING >/dev/null 2>&1 && break; sleep 0.1; done
redis-cli -p $port -x FUNCTION LOAD < "$lib" >/dev/null
callgrind_control -i on $vp >/dev/null 2>&1
redis-cli -p $port --pipe < $d/w.resp > $d/pipe.txt 2>&1
callgrind_control -i off $vp >/dev/null 2>&1
grep -q 'errors: 0,' $d/pipe.txt || { echo "errors: $(tail -1 $d/pipe.txt)"; }
cmds=$(redis-cli -p $port INFO commandstats | tr -d '\r' | awk -F'[:=,]' -v d="$D" '/^cmdstat_/ && $1 !~ /info|function/ { sub("cmdstat_", "", $1); printf "%s %.3f, ", $1, $3 / d }')
redis-cli -p $port SHUTDOWN NOSAVE >/dev/null 2>&1 || true
wait $vp 2>/dev/null || true
ins=$(callgrind_annotate $d/cg.out 2>/dev/null | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }')
echo "lv=$LV B=$B ks=$KS now='$NOW' instr/decision=$((ins / D)) $cmds"
[ -n "${KEEP:-}" ] && cp $d/cg.out ${KEEP} 
[ -n "${KEEPD:-}" ] || rm -rf $d
