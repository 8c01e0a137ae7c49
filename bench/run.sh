#!/bin/bash
# Runs every benchmark in bench/ against its peer, one after another, from one
# release build; each is optional and skipped with a message when missing or
# when its target does not build. Benchmarks are never run by tests (timings
# on shared machines are noise); their figures go to bench/RESULTS.md.
#   run-numerics.sh        compare kernel vs numpy/torch, refmath vs MPFR
#   http_bench.sh          numvald vs nginx with wrk, durable POSTs
#   store_bench            1,000,000 stored cases: list query times and plans
#   gradcheck_peers.py     gradient checks vs torch.autograd.gradcheck
#   fused_bench            fused jobs: three executions plus capture vs the reference
#   minimize_bench.sh      minimizer vs a plain ddmin on injected faults
#   train_peer.py          long-run training steps/s vs torch on the CPU
#   exec_bench.sh          exec protocol vs the in-process emu
#   lab_bench.py           claims, result/artifact uploads, store size vs a 100-device lab
#   op_case_bench.sh       one 10^7-element op case per element and its RSS vs NumPy
#                          (exp and sum on 1 thread, exp on 2: the threads row)
#   reduce_case_bench.sh   sum at 10^6, 10^7, 10^8: time and RSS vs NumPy
#   exhaustive_bench.sh    all 2^32 fp32 inputs of exp, log, tanh, erf vs a hand split
#                          (opt-in, hours here: NV_BENCH_EXHAUSTIVE=1; else one line each)
# Rows of issue 19's target table and where they print: exp and sum per element,
# RSS, --threads 2 (op_case_bench.sh, reduce_case_bench.sh); 2^32 inputs
# (exhaustive_bench.sh); reference vs MPFR, compare vs memcpy/torch/numpy
# (run-numerics.sh); gradcheck fast and full (gradcheck_peers.py); training
# steps/s (train_peer.py).
# Usage: bench/run.sh [BUILD_DIR [NAME...]]   (default: build-bench-svc, a release
# build; NAMEs, as the list above spells them, run only those, in the order above,
# e.g. bench/run.sh build-bench-svc run-numerics.sh train_peer.py)
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build-bench-svc}
[ $# -gt 0 ] && shift
SELECTED=("$@")
status=0
for name in "${SELECTED[@]}"; do
    grep -q "^run $name \|^    run $name " "$0" ||
        { echo "bench/run.sh: no benchmark named '$name' (see the list at the top)" >&2; exit 2; }
done

run() { # name command...
    if [ ${#SELECTED[@]} -gt 0 ] && ! printf '%s\n' "${SELECTED[@]}" | grep -qxF "$1"; then
        return 0
    fi
    echo "==== $1"
    echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC'), machine: $(lscpu | sed -n 's/^Model name: *//p') ($(nproc) CPUs), load average $(cut -d' ' -f1-3 /proc/loadavg)"
    shift
    "$@" || { echo "==== failed (exit $?): $*"; status=1; }
}

if [ ! -f "$BUILD/build.ninja" ]; then
    meson setup "$BUILD" "$ROOT" --buildtype=release >/dev/null || exit 2
fi
ninja -C "$BUILD" >/dev/null || echo "==== note: part of $BUILD does not build; its benches are skipped"
built() { [ -f "$ROOT/bench/$1.c" ] && ninja -C "$BUILD" "bench/$1" >/dev/null 2>&1; }

run run-numerics.sh env BUILD="$BUILD" bash "$ROOT/bench/run-numerics.sh"
run http_bench.sh env BUILD="$BUILD" bash "$ROOT/bench/http_bench.sh"
if built store_bench; then
    run store_bench "$BUILD/bench/store_bench"
else
    echo "==== store_bench: does not build in $BUILD, skipped"
fi
if built gradcheck_bench; then
    run gradcheck_peers.py /usr/bin/python3 "$ROOT/bench/gradcheck_peers.py" \
        "$BUILD/bench/gradcheck_bench"
else
    echo "==== gradcheck_peers.py: gradcheck_bench does not build, skipped"
fi
if built fused_bench; then
    run fused_bench "$BUILD/bench/fused_bench" -L 512,4096
else
    echo "==== fused_bench: does not build, skipped"
fi
if built minimize_bench; then
    run minimize_bench.sh sh "$ROOT/bench/minimize_bench.sh" "$BUILD"
else
    echo "==== minimize_bench.sh: minimize_bench does not build, skipped"
fi
if built train_bench; then
    # The sizes the long-run tests use, and a larger MLP (bench/RESULTS.md).
    run train_peer.py /usr/bin/python3 "$ROOT/bench/train_peer.py" "$BUILD/bench/train_bench"
    run train_peer.py /usr/bin/python3 "$ROOT/bench/train_peer.py" "$BUILD/bench/train_bench" \
        64 256 8 256 50
else
    echo "==== train_peer.py: train_bench does not build, skipped"
fi
run exec_bench.sh sh "$ROOT/bench/exec_bench.sh" "$BUILD"
if ninja -C "$BUILD" daemon/numvald worker/numval-worker >/dev/null 2>&1; then
    run lab_bench.py /usr/bin/python3 "$ROOT/bench/lab_bench.py" "$BUILD/daemon/numvald" \
        "$BUILD/worker/numval-worker"
else
    echo "==== lab_bench.py: numvald or numval-worker does not build, skipped"
fi
run op_case_bench.sh sh "$ROOT/bench/op_case_bench.sh" "$BUILD"
run reduce_case_bench.sh sh "$ROOT/bench/reduce_case_bench.sh" "$BUILD"
run exhaustive_bench.sh sh "$ROOT/bench/exhaustive_bench.sh" "$BUILD"
exit $status
