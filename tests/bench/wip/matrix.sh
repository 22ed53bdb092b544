#!/usr/bin/env bash
# Alternating main / branch runs of two.sh; one line per run.
M=/work/main/build-rel2/cellgate; B=${B:-/work/wt-hash/build-rel/cellgate}
cd /tmp/h6/hash
cases=${CASES:-"2:100000:16:100000:yes 2:20000:16:50000:yes 2:100000:1:100000:yes 2:20000:1:50000:yes 2:100000:16:100000:no 2:20000:16:50000:no 1:100000:16:100000:yes 1:20000:16:50000:yes"}
for c in $cases; do
  IFS=: read lv ks p n old <<< "$c"
  for i in 1 2; do
    echo "main   $(./two.sh $M $ks $p $n $lv yes 2>/dev/null)"
    echo "branch $(./two.sh $B $ks $p $n $lv $old 2>/dev/null)"
  done
done
