#!/bin/sh
# The full contract of one device in seconds (bench/contract_bench.py), against
# the 60 s budget on a 2-core machine.
# usage: bench/contract_bench.sh [BUILD_DIR] [THREADS]     (prints a markdown table)
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build}
exec /usr/bin/python3 "$ROOT/bench/contract_bench.py" "$BUILD/worker/numval-worker" "${2:-2}"
