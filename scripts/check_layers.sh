#!/usr/bin/env bash
# Checks the layers of proxy/ and the imports between their modules.
#
#   scripts/check_layers.sh [dir...]     (default: proxy/core proxy/limiter)
#
# A module is a file pair x.c/x.h (its path without the extension); module
# A imports B when A.c or A.h has `#include "B.h"`. Only "proxy/..."
# includes count. For the files of the directories given, it fails (exit
# 1, printing why) when:
#   - the imports form a circle (printed as a -> b -> ... -> a), or
#   - a file breaks its layer: proxy/core includes only proxy/core/
#     headers; proxy/limiter includes only proxy/core/ and proxy/limiter/
#     headers (never the top layer, proxy/*.h).
# Runs from anywhere; paths are relative to the repository root. Needs
# bash, grep, sed and python3.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

if [ $# -eq 0 ]; then
    set -- proxy/core proxy/limiter
fi

edges=$(mktemp)
trap 'rm -f "$edges"' EXIT

status=0
for dir in "$@"; do
    dir=${dir%/}
    if [ ! -d "$dir" ]; then
        echo "check_layers: no directory $dir" >&2
        exit 2
    fi
    for f in "$dir"/*.c "$dir"/*.h; do
        [ -e "$f" ] || continue
        # "file header" for every #include "proxy/..." line.
        grep -E '^[[:space:]]*#[[:space:]]*include[[:space:]]*"proxy/' "$f" |
            sed -E 's/^[^"]*"([^"]+)".*/\1/' |
            while read -r inc; do
                printf '%s %s\n' "$f" "$inc"
            done >>"$edges" || true
    done
done

# The layer rules: which header directories each directory may include.
while read -r f inc; do
    dir=${f%/*}
    case "$dir" in
    proxy/core) allowed='^proxy/core/' ;;
    proxy/limiter) allowed='^proxy/(core|limiter)/' ;;
    *) allowed='' ;;
    esac
    if [ -n "$allowed" ] && ! printf '%s\n' "$inc" | grep -Eq "$allowed"; then
        echo "layer: $f includes \"$inc\" (outside its layer)"
        status=1
    fi
done <"$edges"

# Circles among the modules: for every strongly connected component with
# more than one module, one circle through it (and the whole component).
python3 - "$edges" <<'EOF' || status=1
import sys
from collections import defaultdict

def module(path):
    for ext in (".c", ".h"):
        if path.endswith(ext):
            return path[: -len(ext)]
    return path

graph = defaultdict(set)
for line in open(sys.argv[1]):
    f, inc = line.split()
    a, b = module(f), module(inc)
    graph[a]
    if a != b:
        graph[a].add(b)
        graph[b]

# Tarjan's strongly connected components (iterative).
index, low, on, stack, sccs, n = {}, {}, set(), [], [], [0]
for start in sorted(graph):
    if start in index:
        continue
    work = [(start, iter(sorted(graph[start])))]
    index[start] = low[start] = n[0]
    n[0] += 1
    stack.append(start)
    on.add(start)
    while work:
        v, it = work[-1]
        for w in it:
            if w not in index:
                index[w] = low[w] = n[0]
                n[0] += 1
                stack.append(w)
                on.add(w)
                work.append((w, iter(sorted(graph[w]))))
                break
            if w in on:
                low[v] = min(low[v], index[w])
        else:
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                scc = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    scc.append(w)
                    if w == v:
                        break
                if len(scc) > 1:
                    sccs.append(set(scc))

def circle(scc):
    """One circle inside scc: a shortest path back to its first module."""
    first = min(scc)
    prev, queue = {first: None}, [first]
    while queue:
        v = queue.pop(0)
        for w in sorted(graph[v]):
            if w not in scc:
                continue
            if w == first:
                path = [v]
                while prev[path[-1]] is not None:
                    path.append(prev[path[-1]])
                return list(reversed(path)) + [first]
            if w not in prev:
                prev[w] = v
                queue.append(w)
    return sorted(scc)

for scc in sccs:
    print("circle: " + " -> ".join(circle(scc)))
    if len(scc) > 2:
        print("  (all in one knot: " + " ".join(sorted(scc)) + ")")
sys.exit(1 if sccs else 0)
EOF

if [ "$status" -eq 0 ]; then
    echo "check_layers: $* ok (no circle, no layer broken)"
fi
exit "$status"
