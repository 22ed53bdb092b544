#!/usr/bin/env bash
# usage: two.sh CELLGATE KEYSPACE P [N] [LEVELS 1|2] [OLD yes|no]
#  -> prints redis cpu us/decision, cellgate cpu us/decision, rps
# LEVELS 2: LIMITER CHECK user:<id>:trade (two gcra levels); 1: gcra:<id>
# (one gcra level, [99, 100, 60]). OLD: limiter_read_old_keys.
set -e
CG=$1; KS=$2; P=$3; N=${4:-100000}; LV=${5:-2}; OLD=${6:-yes}
d=$(mktemp -d)
cat > $d/limits.yaml <<'Y'
gcra:
  children:
    "*":
      limits: [99, 100, 60]
user:
  children:
    "*":
      limits: [15, 30, 60]
      children:
        trade:
          limits: [5, 10, 15]
Y
echo "limiter_read_old_keys: $OLD" > $d/proxy.yaml
if [ "$LV" = 1 ]; then PATHK='gcra:__rand_int__'; else PATHK='user:__rand_int__:trade'; fi
rp=$((20000 + RANDOM % 10000)); cp=$((rp + 1))
redis-server --port $rp --save '' --appendonly no --daemonize yes --logfile $d/r.log --dir $d >/dev/null
sleep 0.3
cfg=""
# main's binary knows no limiter_read_old_keys: give the yaml only when asked for "no"
[ "$OLD" = no ] && cfg="--config $d/proxy.yaml"
$CG $cfg --listen 127.0.0.1:$cp --upstream 127.0.0.1:$rp --limits $d/limits.yaml --log-level warn >$d/c.log 2>&1 &
cg=$!
sleep 0.5
kill -0 $cg 2>/dev/null || { echo "cellgate failed: $(cat $d/c.log)"; redis-cli -p $rp shutdown nosave >/dev/null 2>&1; rm -rf $d; exit 1; }
redis-benchmark -p $cp -c 50 -n 5000 -r $KS -P $P -q LIMITER CHECK $PATHK >/dev/null
redis-cli -p $rp FLUSHALL >/dev/null
cpu() { redis-cli -p $rp INFO cpu | awk -F: '/used_cpu_(user|sys):/{s+=$2} END{printf "%.6f", s}'; }
cgcpu() { awk '{print ($14+$15)/100}' /proc/$cg/stat; }
rpid=$(redis-cli -p $rp INFO server | awk -F: '/process_id/{print $2}' | tr -d '\r')
if [ -n "$INS" ]; then perf stat -e instructions -x, -p $rpid -o $d/ins.txt & pp=$!; sleep 0.2; fi
r0=$(cpu); c0=$(cgcpu)
out=$(redis-benchmark -p $cp -c 50 -n $N -r $KS -P $P -q LIMITER CHECK $PATHK | tr '\r' '\n' | grep -o '[0-9.]* requests per second' | tail -1)
r1=$(cpu); c1=$(cgcpu)
ins=""
if [ -n "$INS" ]; then kill -INT $pp; wait $pp 2>/dev/null || true; ins=" kins=$(awk -F, -v n=$N '/instructions/{printf "%.1f", $1/n/1000}' $d/ins.txt)"; fi
echo "lv=$LV old=$OLD ks=$KS P=$P redis_us=$(echo "($r1-$r0)*1000000/$N" | bc -l | cut -c1-5) cg_us=$(echo "($c1-$c0)*1000000/$N" | bc -l | cut -c1-5) $out$ins keys=$(redis-cli -p $rp DBSIZE)"
if [ -n "$STATS" ]; then redis-cli -p $rp INFO commandstats | grep -v "^#" | cut -d, -f1-3; fi
kill $cg; wait $cg 2>/dev/null || true
redis-cli -p $rp shutdown nosave >/dev/null 2>&1 || true
rm -rf $d
