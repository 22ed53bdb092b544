#!/usr/bin/env bash
# The test of scripts/check_layers.sh: it runs it over small trees of its
# own (in a temporary directory, through CHECK_LAYERS_ROOT) and checks the
# exit code and the lines it prints for each rule: a clean tree passes; a
# circle below the top layer, a layer broken, a top-layer circle of calls
# of more than 4 files, a .c file over 1,000 lines each fail and are named;
# a circle of 4 files in the top layer, and one by includes alone, pass.
# A second or so; run by scripts/test.sh before the real tree's check.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
T=$(mktemp -d "${TMPDIR:-/tmp}/check-layers-test.XXXXXX")
trap 'rm -rf "$T"' EXIT
fails=0
n=0

# A fresh tree with the directories the default invocation reads.
tree() {
    rm -rf "$T/tree"
    mkdir -p "$T/tree/proxy/core" "$T/tree/proxy/limiter" "$T/tree/conf"
}
# put PATH LINE...: a file of those lines.
put() {
    local f=$T/tree/$1
    shift
    printf '%s\n' "$@" >"$f"
}
# mod NAME INCLUDED... : a module proxy/NAME.c/.h whose .h declares
# NAME_f(), whose .c includes each INCLUDED (a module path) and calls its
# _f (so it is a call, not only an include).
mod() {
    local name=$1 body="" inc=""
    shift
    for m in "$@"; do
        inc+="#include \"$m.h\""$'\n'
        body+="    ${m##*/}_f();"$'\n'
    done
    put "$name.h" "void ${name##*/}_f(void);"
    printf '%s#include "%s.h"\nvoid %s_f(void)\n{\n%s}\n' "$inc" "$name" \
        "${name##*/}" "$body" >"$T/tree/$name.c"
}
# expect WHAT RC PATTERN...: runs the checker with the default arguments;
# its exit code must be RC and its output must match every PATTERN (grep
# -E), a PATTERN starting with ! must not match.
expect() {
    local what=$1 want=$2 out rc p bad=""
    shift 2
    n=$((n + 1))
    out=$(CHECK_LAYERS_TOP_MAX=4 CHECK_LAYERS_ROOT=$T/tree bash "$HERE/check_layers.sh" 2>&1)
    rc=$?
    [ "$rc" -eq "$want" ] || bad="exit $rc, want $want"
    for p in "$@"; do
        if [ "${p:0:1}" = "!" ]; then
            ! grep -qE -- "${p:1}" <<<"$out" || bad+="${bad:+; }prints /${p:1}/"
        else
            grep -qE -- "$p" <<<"$out" || bad+="${bad:+; }no line /$p/"
        fi
    done
    if [ -n "$bad" ]; then
        echo "not ok - check_layers: $what: $bad"
        printf '  | %s\n' "$out"
        fails=$((fails + 1))
    else
        echo "ok - check_layers: $what"
    fi
}

tree
mod proxy/core/a proxy/core/b
mod proxy/core/b
mod proxy/limiter/l proxy/core/a
mod proxy/server proxy/client proxy/limiter/l
mod proxy/client proxy/server
seq 1 1000 >"$T/tree/conf/c.c"
expect "a clean tree passes (a 2-file top circle is a note)" 0 \
    '^check_layers: .* ok' 'note: top-layer circle of calls, 2 files' '!^(size|circle|layer)'

tree
mod proxy/core/a proxy/core/b
mod proxy/core/b proxy/core/a
expect "a circle in proxy/core fails" 1 '^circle: proxy/core/a -> proxy/core/b -> proxy/core/a$'

tree
mod proxy/core/a proxy/x
mod proxy/x
expect "proxy/core including the top layer fails" 1 \
    '^layer: proxy/core/a.c includes "proxy/x.h"'

tree
mod proxy/a proxy/b
mod proxy/b proxy/c
mod proxy/c proxy/d
mod proxy/d proxy/a
expect "a top-layer circle of calls of 4 files passes" 0 \
    'note: top-layer circle of calls, 4 files \(at most 4\): proxy/a proxy/b proxy/c proxy/d'

tree
mod proxy/a proxy/b
mod proxy/b proxy/c
mod proxy/c proxy/d
mod proxy/d proxy/e
mod proxy/e proxy/a
expect "a top-layer circle of calls of 5 files fails" 1 \
    '^circle of calls: proxy/a -> proxy/b -> proxy/c -> proxy/d -> proxy/e -> proxy/a$' \
    'top layer: 5 files in one knot, at most 4: proxy/a proxy/b proxy/c proxy/d proxy/e'

# Five files that include each other in a ring but call only server: by
# includes one circle, by calls none (the one global's pattern).
tree
for m in a b c d; do
    put "proxy/$m.h" "void ${m}_f(void);"
done
put proxy/server.h "void server_f(void);"
for m in a b c d; do
    put "proxy/$m.c" "#include \"proxy/server.h\"" "void ${m}_f(void) { server_f(); }"
done
put proxy/server.c "#include \"proxy/a.h\"" "#include \"proxy/b.h\"" \
    "#include \"proxy/c.h\"" "#include \"proxy/d.h\"" "void server_f(void) { }"
expect "a top-layer circle by includes alone passes" 0 '!^(circle|note)'

tree
mod proxy/core/a
seq 1 1001 >"$T/tree/conf/big.c"
seq 1 1200 >"$T/tree/proxy/limiter/huge.c"
seq 1 1000 >"$T/tree/proxy/ok.c"
expect "every .c file over 1,000 lines in conf/ or proxy/ fails, each named" 1 \
    '^size: conf/big.c has 1001 lines' '^size: proxy/limiter/huge.c has 1200 lines' \
    '!proxy/ok.c'

echo "check_layers_test: $((n - fails)) passed, $fails failed"
[ "$fails" -eq 0 ]
