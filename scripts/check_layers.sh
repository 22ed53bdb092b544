#!/usr/bin/env bash
# Checks the layers of proxy/, the imports between their modules, and the
# size of every .c file.
#
#   scripts/check_layers.sh [dir...]
#       (default: proxy/core proxy/limiter proxy for the imports, and every
#       .c file under proxy/ and conf/ for the size)
#
# A module is a file pair x.c/x.h (its path without the extension); module
# A imports B when A.c or A.h has `#include "B.h"`. Only "proxy/..."
# includes count. For the files of the directories given, it fails (exit
# 1, printing why) when:
#   - the imports form a circle (printed as a -> b -> ... -> a) below the
#     top layer;
#   - the top layer's modules (proxy/x, which wire the rest) form a circle
#     of calls of more than 4 files. A calls B when A.c includes B.h and
#     calls a function B.h declares; by includes alone every top-layer
#     module is in one circle by design (each includes server.h for the
#     one global, and server.c includes what it wires). A circle of at
#     most 4 files is printed as a note;
#   - a file breaks its layer: proxy/core includes only proxy/core/
#     headers; proxy/limiter includes only proxy/core/ and proxy/limiter/
#     headers (never the top layer, proxy/*.h);
#   - a .c file is over 1,000 lines (split it into a new file pair): with
#     no arguments every .c file under proxy/ and conf/, else those of the
#     directories given.
# Runs from anywhere; paths are relative to the repository root, or to
# CHECK_LAYERS_ROOT when set (scripts/check_layers_test.sh points it at
# small trees of its own). Needs bash, grep, sed, wc and python3.
set -euo pipefail

root=${CHECK_LAYERS_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
cd "$root"

# Files in a circle of calls of the top layer: at most the wiring's 4
# (client, router, command, server); every other top-layer module is
# called by it and calls nothing back up (client_ops.h, result codes).
TOP_CIRCLE_MAX=${CHECK_LAYERS_TOP_MAX:-4}
C_LINES_MAX=1000 # lines in a .c file

if [ $# -eq 0 ]; then
    set -- proxy/core proxy/limiter proxy
    size_files=$(find proxy conf -name '*.c' | sort)
else
    size_files=$(for dir in "$@"; do ls "${dir%/}"/*.c 2>/dev/null || true; done)
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

# No .c file over C_LINES_MAX lines.
for f in $size_files; do
    n=$(wc -l <"$f")
    if [ "$n" -gt "$C_LINES_MAX" ]; then
        echo "size: $f has $n lines (at most $C_LINES_MAX: split it into a new file pair)"
        status=1
    fi
done

# Circles among the modules: for every strongly connected component with
# more than one module (by includes below the top layer, by calls in it),
# one circle through it and the whole component.
TOP_CIRCLE_MAX=$TOP_CIRCLE_MAX python3 - "$edges" <<'EOF' || status=1
import os
import re
import sys
from collections import defaultdict

TOP = re.compile(r"proxy/[^/]+")  # the top layer: proxy/x, the wiring


def module(path):
    for ext in (".c", ".h"):
        if path.endswith(ext):
            return path[: -len(ext)]
    return path


includes = defaultdict(set)
for line in open(sys.argv[1]):
    f, inc = line.split()
    a, b = module(f), module(inc)
    includes[a]
    if a != b:
        includes[a].add(b)
        includes[b]


def strip_comments(text):
    return re.sub(r"/\*.*?\*/", "", text, flags=re.S)


def declared(mod):
    """The functions mod.h declares (a name followed by '(' in a
    declaration that starts a line)."""
    try:
        text = strip_comments(open(mod + ".h").read())
    except OSError:
        return set()
    return set(re.findall(r"^[A-Za-z_][^;{}#]*?\b([a-z_][a-z0-9_]*)\s*\(",
                          text, flags=re.M))


# The top layer is judged by calls, not includes: every top-layer module
# includes server.h for the one global, and server.c includes what it
# wires, so by includes they are all one circle by design. A calls B when
# A.c includes B.h and calls a function B.h declares.
calls = defaultdict(set)
for a in includes:
    if not TOP.fullmatch(a) or not os.path.exists(a + ".c"):
        continue
    calls[a]
    src = strip_comments(open(a + ".c").read())
    for b in includes[a]:
        if not TOP.fullmatch(b):
            continue
        if any(re.search(r"\b" + name + r"\s*\(", src) for name in declared(b)):
            calls[a].add(b)
            calls[b]


def components(graph):
    """Tarjan's strongly connected components (iterative), those with more
    than one module."""
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
    return sccs


def circle(graph, scc):
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


failed = False
# Below the top layer, no circle at all (by includes).
for scc in components(includes):
    if all(TOP.fullmatch(m) for m in scc):
        continue
    failed = True
    print("circle: " + " -> ".join(circle(includes, scc)))
    if len(scc) > 2:
        print("  (all in one knot: " + " ".join(sorted(scc)) + ")")
# The top layer: a circle of calls of at most TOP_CIRCLE_MAX files.
top_max = int(os.environ["TOP_CIRCLE_MAX"])
for scc in components(calls):
    if len(scc) <= top_max:
        print("note: top-layer circle of calls, %d files (at most %d): %s"
              % (len(scc), top_max, " ".join(sorted(scc))))
        continue
    failed = True
    print("circle of calls: " + " -> ".join(circle(calls, scc)))
    print("  (top layer: %d files in one knot, at most %d: %s)"
          % (len(scc), top_max, " ".join(sorted(scc))))
sys.exit(1 if failed else 0)
EOF

if [ "$status" -eq 0 ]; then
    echo "check_layers: $* ok (no circle beyond the top layer's $TOP_CIRCLE_MAX files, no layer broken, no .c file over $C_LINES_MAX lines)"
fi
exit "$status"
