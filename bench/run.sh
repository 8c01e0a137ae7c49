#!/bin/bash
# Runs every benchmark present in bench/, one after another; each is optional
# and skipped with a message when missing. Benchmarks are never run by tests.
#   bench/run-numerics.sh    numerics kernels vs numpy/torch (bench/RESULTS.md)
#   bench/http_bench.sh      numvald vs nginx with wrk, durable POSTs
#   store_bench              1,000,000 stored cases: list query times and plans
#   bench/gradcheck_peers.py gradient checks vs torch
# Usage: bench/run.sh [BUILD_DIR]   (default: build-bench-svc, a release build)
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build-bench-svc}
status=0

run() { # name command...
    echo "==== $1"
    shift
    "$@" || { echo "==== failed (exit $?): $*"; status=1; }
}

# run-numerics.sh keeps its own build dir (build-bench); the service benches use $BUILD.
if [ -x "$ROOT/bench/run-numerics.sh" ]; then
    run run-numerics.sh "$ROOT/bench/run-numerics.sh"
else
    echo "==== run-numerics.sh: not present, skipped"
fi
if [ -x "$ROOT/bench/http_bench.sh" ]; then
    run http_bench.sh env BUILD="$BUILD" "$ROOT/bench/http_bench.sh"
else
    echo "==== http_bench.sh: not present, skipped"
fi

if [ ! -f "$BUILD/build.ninja" ]; then
    meson setup "$BUILD" "$ROOT" --buildtype=release >/dev/null || exit 2
fi
# Built targets that a bench needs; a missing one skips that bench only.
built() { [ -f "$ROOT/bench/$1.c" ] && ninja -C "$BUILD" "bench/$1" >/dev/null 2>&1; }
if built store_bench; then
    run store_bench "$BUILD/bench/store_bench"
else
    echo "==== store_bench: not present or does not build in $BUILD, skipped"
fi
if [ -f "$ROOT/bench/gradcheck_peers.py" ] && built gradcheck_bench; then
    run gradcheck_peers.py /usr/bin/python3 "$ROOT/bench/gradcheck_peers.py" \
        "$BUILD/bench/gradcheck_bench"
else
    echo "==== gradcheck_peers.py: not present or gradcheck_bench does not build, skipped"
fi
exit $status
