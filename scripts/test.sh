#!/usr/bin/env bash
# Set up and run every test: installs what is missing (Debian packages, the browser
# tests' npm packages), builds with -Werror, runs all meson test suites, then
# rebuilds with AddressSanitizer + UndefinedBehaviorSanitizer and runs the unit and
# integration suites again, then runs each fuzz target for 60 s (scripts/fuzz.sh --ci).
# Ends with "N passed, N failed" over every test run. Wall time on a clean
# checkout of a 2-vCPU VM with the packages in place: 27.5 min (2026-12-03:
# optimized pass 13 min, sanitizer pass 11, fuzz 3.5), the suites two tests at a
# time (tests/integration/meson.build says which run alone).
#
#   scripts/test.sh --repeat N [--busy K] SUITE...
#       proves a suite is not flaky: builds build-test, runs the meson suites N times
#       in a row and names every failure (run number, test, log file); with --busy K,
#       K CPU-heavy numval-worker jobs run on the side the whole time. Same last line.
set -uo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" = --repeat ]; then
    exec scripts/test-repeat.sh "${@:2}"
fi

scripts/deps.sh test || { echo "0 passed, 1 failed"; exit 1; }
if [ -f tests/browser/package.json ]; then
    (cd tests/browser && if [ -f package-lock.json ]; then npm ci --no-audit --no-fund; else npm install --no-audit --no-fund; fi) \
        || echo "numval: npm install failed; browser tests will report it" >&2
fi

jobs=$(nproc)
status=0
logs=()

run_suite() { # build-dir, meson setup args..., -- meson test args...
    local dir=$1; shift
    local setup=() testargs=()
    while [ $# -gt 0 ] && [ "$1" != "--" ]; do setup+=("$1"); shift; done
    [ $# -gt 0 ] && shift
    testargs=("$@")
    if [ -d "$dir" ]; then
        meson setup --reconfigure "$dir" "${setup[@]}" >/dev/null || { status=1; logs+=("$dir/SETUP-FAILED"); return; }
    else
        meson setup "$dir" "${setup[@]}" >/dev/null || { status=1; logs+=("$dir/SETUP-FAILED"); return; }
    fi
    # A build failure counts as one failed test (no testlog.json is written).
    ninja -C "$dir" || { status=1; logs+=("$dir/BUILD-FAILED"); echo "numval: build failed in $dir" >&2; return; }
    meson test -C "$dir" --print-errorlogs --num-processes "$jobs" "${testargs[@]}" || status=1
    logs+=("$dir/meson-logs/testlog.json")
}

run_suite build-test -Dwerror=true --buildtype=debugoptimized --

# Sanitizer pass: leak checks stay on; UB aborts the test. Suite 'slow' (numerically
# heavy runs: fused attention at L=2048, PyTorch start-up) ran in the optimized pass.
# -O1, as AddressSanitizer's documentation advises "to get a reasonable performance"
# (clang.llvm.org/docs/AddressSanitizer.html): its tests took 1136 s in all here,
# 1525 s at -O0 (2-vCPU VM, 2026-12-03).
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export NV_TEST_SANITIZER=1
run_suite build-asan -Dwerror=true -Ddebug=true -Doptimization=1 -Db_sanitize=address,undefined -Db_lundef=false \
    -- --suite unit --suite integration --no-suite slow --timeout-multiplier 3

# Fuzz pass (docs/RELIABILITY.md): the libFuzzer targets of tests/fuzz in a clang build
# (build-fuzz), each 60 s from its committed seeds (meson suite 'fuzz', counted below).
scripts/fuzz.sh --ci || status=1
logs+=(build-fuzz/meson-logs/testlog.json)

python3 - "${logs[@]}" <<'PY'
import json, sys
passed = failed = skipped = 0
for path in sys.argv[1:]:
    try:
        lines = open(path).read().splitlines()
    except OSError:
        failed += 1
        continue
    for line in lines:
        r = json.loads(line).get("result")
        if r in ("OK", "EXPECTEDFAIL"):
            passed += 1
        elif r == "SKIP":
            skipped += 1
        else:
            failed += 1
print(f"{passed} passed, {failed} failed, {skipped} skipped")
sys.exit(1 if failed else 0)
PY
summary=$?
[ $status -eq 0 ] && [ $summary -eq 0 ]
