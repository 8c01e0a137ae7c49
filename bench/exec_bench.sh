#!/bin/sh
# Cases per second through the exec protocol vs the in-process emu backend, for
# 10^5-element cases; see bench/exec_bench.py for the method.
# usage: bench/exec_bench.sh [BUILD_DIR]     (prints a markdown table)
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
exec /usr/bin/python3 "$ROOT/bench/exec_bench.py" "${1:-$ROOT/build-torch}"
