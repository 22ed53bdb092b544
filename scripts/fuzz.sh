#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz into build-fuzz/ (clang, ASan and
# UBSan) and runs one of them, or each in turn, for a time.
#
#   scripts/fuzz.sh                   every target, 10 s each
#   scripts/fuzz.sh TARGET [SECONDS]  one target (e.g. reply_diff), 60 s
#   scripts/fuzz.sh all [SECONDS]     every target, SECONDS each
#
# A target runs from its seeds (tests/fuzz/corpus/<target>) into a corpus of
# its own under the run's directory, in $TMPDIR; nothing is written to the
# repository. On a crash, a leak or a broken property, the run stops, the
# input that did it is printed (base64) and kept in the run's directory,
# and the script exits 1. FUZZ_ARGS adds libFuzzer options (e.g. -jobs=2).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
TARGET=${1:-all}
if [ "$TARGET" = all ]; then
    SECONDS_EACH=${2:-10}
else
    SECONDS_EACH=${2:-60}
fi
BUILD=${FUZZ_BUILD_DIR:-build-fuzz}
CC_FUZZ=${CC_FUZZ:-clang}

if ! command -v "$CC_FUZZ" >/dev/null; then
    echo "fuzz.sh: no $CC_FUZZ (run scripts/deps.sh)" >&2
    exit 1
fi
# Optimised (libFuzzer wants executions per second), with debug info for
# the reports; the sanitizers come from tests/fuzz/CMakeLists.txt.
CC=$CC_FUZZ cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Debug \
    -DCMAKE_C_FLAGS_DEBUG="-O1 -g" -DPX_FUZZ=ON -DPX_TESTS=OFF \
    -DPX_WERROR=ON >/dev/null
if [ "$TARGET" = all ]; then
    cmake --build "$BUILD" --target fuzz -j"$(nproc)" >/dev/null
    TARGETS=$(cd tests/fuzz && ls fuzz_*.c | sed 's/^fuzz_//; s/\.c$//')
else
    if [ ! -f "tests/fuzz/fuzz_$TARGET.c" ]; then
        echo "fuzz.sh: no target $TARGET (tests/fuzz/fuzz_$TARGET.c)" >&2
        exit 1
    fi
    cmake --build "$BUILD" --target "fuzz_$TARGET" -j"$(nproc)" >/dev/null
    TARGETS=$TARGET
fi

RUNDIR=$(mktemp -d "${TMPDIR:-/tmp}/cellgate-fuzz.XXXXXX")
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

# The dictionary of a target, if it has one.
dict_of() {
    case $1 in
        http_req) echo tests/fuzz/http.dict ;;
        limits) echo tests/fuzz/limits.dict ;;
        *) echo tests/fuzz/resp.dict ;;
    esac
}

status=0
for t in $TARGETS; do
    corpus=$RUNDIR/$t.corpus
    log=$RUNDIR/$t.log
    mkdir -p "$corpus"
    seeds=()
    [ -d "tests/fuzz/corpus/$t" ] && seeds=("tests/fuzz/corpus/$t")
    printf '== fuzz %-14s %3ss ' "$t" "$SECONDS_EACH"
    # shellcheck disable=SC2086
    if "$BUILD/tests/fuzz/fuzz_$t" -max_total_time="$SECONDS_EACH" \
        -timeout=10 -rss_limit_mb=2048 -max_len=4096 \
        -dict="$(dict_of "$t")" -artifact_prefix="$RUNDIR/$t-" \
        -print_final_stats=1 ${FUZZ_ARGS:-} "$corpus" "${seeds[@]}" \
        >"$log" 2>&1; then
        execs=$(grep -m1 -o 'stat::number_of_executed_units: *[0-9]*' "$log" |
            grep -o '[0-9]*$' || echo '?')
        echo "ok ($execs runs, $(ls "$corpus" | wc -l) inputs in corpus)"
    else
        status=1
        echo "FAILED"
        grep -E -A30 '^==[0-9]+==|runtime error|^fuzz_' "$log" | head -60 >&2 ||
            tail -40 "$log" >&2
        for a in "$RUNDIR/$t-"*; do
            [ -f "$a" ] || continue
            echo "!! input $a (base64):" >&2
            base64 -w0 "$a" >&2
            echo >&2
        done
    fi
done
if [ "$status" -ne 0 ]; then
    echo "fuzz.sh: FAILED; logs and inputs in $RUNDIR" >&2
else
    rm -rf "$RUNDIR"
fi
exit "$status"
