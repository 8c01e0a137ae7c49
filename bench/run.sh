#!/bin/bash
# Runs every benchmark present in bench/, one after another; each is optional
# and skipped with a message when missing. Benchmarks are never run by tests.
#   bench/*.sh               run-numerics.sh (numerics vs numpy/torch), http_bench.sh
#                            (numvald vs nginx with wrk, durable POSTs), and any other
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

# Every bench/*.sh but this one, numerics first; each keeps its own default
# build dir except http_bench.sh, which gets $BUILD.
scripts=$(cd "$ROOT/bench" && ls run-numerics.sh http_bench.sh *.sh 2>/dev/null | awk '!seen[$0]++')
for s in run-numerics.sh http_bench.sh; do
    [ -f "$ROOT/bench/$s" ] || echo "==== $s: not present, skipped"
done
for s in $scripts; do
    [ "$s" = run.sh ] && continue
    [ -f "$ROOT/bench/$s" ] || continue
    if [ "$s" = http_bench.sh ]; then
        run "$s" env BUILD="$BUILD" bash "$ROOT/bench/$s"
    else
        run "$s" bash "$ROOT/bench/$s"
    fi
done

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
