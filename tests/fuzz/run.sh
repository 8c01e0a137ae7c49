#!/usr/bin/env bash
# Run one libFuzzer target for a bounded time from its committed seed corpus, with
# the target's options (the one place they live: meson test and scripts/fuzz.sh
# both come here). Ends with one summary line; exits non-zero on any finding
# (crash, sanitizer report, leak, timeout, memory limit) after printing the
# reproducer (its path, and base64 so a CI log alone is enough).
#
#   tests/fuzz/run.sh [--fresh] BINARY TARGET SECONDS WORKDIR [LIBFUZZER-ARGS...]
#
# WORKDIR holds the inputs this run adds (corpus/, written first by libFuzzer; kept
# between runs unless --fresh, which CI passes so each run starts from the seeds
# alone) and what it finds (crashes/, emptied first). The committed corpus,
# tests/fuzz/corpus/TARGET, is read, never written. NV_FUZZ_SECONDS, when set,
# replaces SECONDS.
set -uo pipefail
fresh=false
[ "${1:-}" = --fresh ] && { fresh=true; shift; }
mkdir -p "$4"
bin=$(readlink -f "$1") target=$2 seconds=${NV_FUZZ_SECONDS:-$3} work=$(readlink -f "$4")
shift 4
here=$(cd "$(dirname "$0")" && pwd)
seeds=$here/corpus/$target
[ -x "$bin" ] || { echo "fuzz-$target: $bin is not built" >&2; exit 2; }
[ -d "$seeds" ] || { echo "fuzz-$target: no seed corpus $seeds" >&2; exit 2; }
$fresh && rm -rf "$work/corpus"
rm -rf "$work/crashes"
mkdir -p "$work/corpus" "$work/crashes"

# Per target: the largest input, the per-input time limit (s) and the largest
# single allocation (MB). Job-spec validation gets 64 MB: it must be O(1) in the
# tensor sizes, so a larger allocation is a finding, not noise.
case $target in
    spec) opts=(-max_len=4096 -timeout=5 -malloc_limit_mb=64) ;;
    http) opts=(-max_len=24576 -timeout=5 -dict="$here/http.dict") ;;
    artifact) opts=(-max_len=65536 -timeout=5) ;;
    exec) opts=(-max_len=65536 -timeout=10) ;;
    safetensors) opts=(-max_len=65536 -timeout=5 -malloc_limit_mb=64) ;;
    *) echo "fuzz: unknown target '$target' (spec, http, artifact, exec, safetensors)" >&2
       exit 2 ;;
esac

# UBSan's checks are compiled recoverable so that ubsan.supp can name known
# findings; halt_on_error makes every other report a crash of the run.
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1:suppressions=$here/ubsan.supp
log=$work/fuzz.log
start=$(date +%s.%N)
"$bin" "${opts[@]}" -max_total_time="$seconds" -print_final_stats=1 \
    -artifact_prefix="$work/crashes/" "$@" "$work/corpus" "$seeds" >"$log" 2>&1
rc=$?
took=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')

execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1)
added=$(find "$work/corpus" -type f | wc -l)
if [ $rc -eq 0 ]; then
    echo "fuzz-$target: ${execs:-?} executions in ${took} s (${rate:-?}/s), ${cov:-cov: ?}," \
        "$added new inputs, no finding"
    exit 0
fi
tail -n 60 "$log"
for f in "$work"/crashes/*; do
    [ -f "$f" ] || continue
    echo "fuzz-$target: reproducer $f ($(stat -c %s "$f") bytes), base64:"
    head -c 65536 "$f" | base64
    echo "fuzz-$target: rerun it with: $bin $f"
done
echo "fuzz-$target: FINDING after ${execs:-?} executions, ${took} s (exit $rc); log $log"
exit 1
