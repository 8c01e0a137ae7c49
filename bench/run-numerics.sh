#!/bin/sh
# Numerics benchmarks side by side: builds a
# release tree in build-bench/ and runs
#   1. compare_bench: nv_compare_f32 vs numpy.allclose vs torch.testing.assert_close
#      on the same 5e7 fp32 pairs, plus memcpy of the same bytes;
#   2. refmath_bench: correctly rounded exp/tanh/erf (fp64 fast path) vs pure MPFR
#      on 1e7 fp32 inputs each.
# Usage: bench/run-numerics.sh [compare|refmath]   (default: both)
set -eu
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build-bench}
[ -d "$BUILD" ] || meson setup "$BUILD" --buildtype=release >/dev/null
ninja -C "$BUILD" bench/compare_bench bench/refmath_bench >/dev/null
echo "machine: $(lscpu | sed -n 's/^Model name: *//p') ($(nproc) cpus), $(uname -srm)"
echo "build: $(cc --version | head -1), meson buildtype=release"
case "${1:-all}" in
compare|all) echo "== comparison kernel"; "$BUILD/bench/compare_bench" -p bench/compare_peers.py ;;
esac
case "${1:-all}" in
refmath|all) echo "== correctly rounded reference"; "$BUILD/bench/refmath_bench" ;;
esac
