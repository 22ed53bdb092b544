#!/usr/bin/env bash
# Installs dependencies, builds with -Werror and ASan+UBSan into build-test/,
# runs every unit and integration test, and stops every server the tests
# started. Exits non-zero on any failure, warning, sanitizer report or leak.
#
#   scripts/test.sh            everything
#   scripts/test.sh unit       unit tests only
#   scripts/test.sh integration [criterion args...]
#   scripts/test.sh clients    client-compatibility suite (tests/clients)
#
# "all" also runs every fuzz target briefly (scripts/fuzz.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
WHAT=${1:-all}
shift || true

# Everything any part below runs (scripts/deps.sh's test set): a check whose
# tool is missing fails, it never passes by not running.
bash scripts/deps.sh test

BUILD=${BUILD_DIR:-build-test}
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Debug -DPX_WERROR=ON \
    -DPX_SANITIZE=address,undefined >/dev/null
cmake --build "$BUILD" -j"$(nproc)"

RUNDIR=$(mktemp -d "${TMPDIR:-/tmp}/cellgate-test.XXXXXX")
export TMPDIR=$RUNDIR
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:detect_stack_use_after_return=1:strict_string_checks=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

cleanup() {
    # Servers the tests started live under $RUNDIR; none may outlive the run,
    # also when a test crashed.
    pkill -KILL -f "$RUNDIR" 2>/dev/null || true
    rm -rf "$RUNDIR"
}
trap cleanup EXIT

status=0
failed=()
run_suite() {
    local name=$1; shift
    local log="$RUNDIR/$name.log" t0=$SECONDS
    echo "== $name tests"
    if ! "$@" 2>&1 | tee "$log"; then
        status=1
        failed+=("$name")
    fi
    echo "== $name tests: $((SECONDS - t0)) s"
    if grep -qE 'ERROR: (LeakSanitizer|AddressSanitizer)|runtime error:' "$log"; then
        echo "!! $name: sanitizer report in the log" >&2
        status=1
        failed+=("$name (sanitizer report)")
    fi
}

if [ "$WHAT" = all ] || [ "$WHAT" = unit ]; then
    run_suite unit "$BUILD/tests/unit_tests" --jobs 2 "$@"
fi
# The integration tests run as a queue of suites, each its own criterion
# process running one test at a time, two processes at once: the two cores
# stay busy to the end whichever suites grow (a fixed split into two halves
# left one core idle for minutes), and criterion's own runner leaks under
# --jobs 2, which LeakSanitizer would report. The suites with the most
# tests go first, so no long one starts last. Arguments (a --filter) run
# one process, one test at a time, as given.
integration_queue() {
    local bin="$BUILD/tests/integration_tests"

    "$bin" --list | sed -n 's/^\(it_[a-z0-9_]*\): \([0-9]*\) tests*$/\2 \1/p' |
        sort -rn | cut -d' ' -f2 |
        xargs -P 2 -I{} sh -c \
            '"$1" --jobs 1 --filter "$2/*" >"$3/it-$2.log" 2>&1 ||
             echo "$2" >>"$3/it-failed"' sh "$bin" {} "$RUNDIR"
    cat "$RUNDIR"/it-*.log
    if [ -s "$RUNDIR/it-failed" ]; then
        echo "!! integration suites failed: $(tr '\n' ' ' <"$RUNDIR/it-failed")"
        return 1
    fi
}
if [ "$WHAT" = all ] || [ "$WHAT" = integration ]; then
    if [ $# -eq 0 ]; then
        run_suite integration integration_queue
    else
        run_suite integration "$BUILD/tests/integration_tests" --jobs 1 "$@"
    fi
fi
if [ "$WHAT" = all ] || [ "$WHAT" = clients ]; then
    run_suite clients bash tests/clients/run.sh "$BUILD/cellgate"
fi
if [ "$WHAT" = all ]; then
    # Every libFuzzer target of tests/fuzz, about 8 s each, from its seeds:
    # any crash, leak, sanitizer report or broken property fails the run.
    run_suite fuzz bash scripts/fuzz.sh all "${FUZZ_SECONDS:-8}"
fi
if [ "$WHAT" = all ]; then
    # The layers of proxy/ only call downward, the top layer's circle stays
    # small, no .c file grows past 1,000 lines (docs/ARCHITECTURE.md); the
    # checker's own test first, so a broken checker cannot pass the tree.
    echo "== layers"
    if ! bash scripts/check_layers_test.sh || ! bash scripts/check_layers.sh; then
        status=1
        failed+=(layers)
    fi
    bash scripts/check_doc_refs.sh || { status=1; failed+=(doc-refs); }
fi
if [ "$WHAT" = all ]; then
    echo "== clang-format"
    if ! command -v clang-format >/dev/null; then
        # deps.sh installs it: reaching here without it is a broken machine,
        # and a check that cannot run fails.
        echo "!! clang-format missing: the formatting check cannot run (bash scripts/deps.sh test installs it)" >&2
        status=1
        failed+=("clang-format (missing)")
    elif ! files=$(git ls-files '*.c' '*.h') || [ -z "$files" ]; then
        # Not a git checkout (or git missing): no file list, so no check.
        echo "!! clang-format: git ls-files lists no C file: the formatting check cannot run" >&2
        status=1
        failed+=("clang-format (no files)")
    else
        bad=$(while read -r f; do
            clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || echo "$f"; done <<<"$files")
        if [ -n "$bad" ]; then
            echo "!! not clang-formatted: $bad" >&2
            status=1
            failed+=(clang-format)
        fi
    fi
fi
if [ "$status" -ne 0 ]; then
    # CI may keep only the end of the output: name what failed here, with
    # each failing test's first lines, so the tail alone says what broke.
    for log in "$RUNDIR"/*.log; do
        [ -f "$log" ] || continue
        grep -E '^\[(----|FAIL)\]|^not ok - |ERROR: (LeakSanitizer|AddressSanitizer)|runtime error:' \
            "$log" | head -60 | sed "s|^|!! $(basename "$log" .log): |" >&2 || true
    done
    echo "scripts/test.sh: FAILED: ${failed[*]:-see above}" >&2
else
    echo "scripts/test.sh: all suites passed"
fi
exit "$status"
