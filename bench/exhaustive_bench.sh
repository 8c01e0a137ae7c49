#!/bin/sh
# All 2^32 fp32 inputs of exp, log, tanh and erf against the correctly rounded
# value (the `exhaustive` class, emu exact, 2 threads): wall time and peak
# RSS per function, beside the peer the issue names: the same elements as
# `normal` op cases of 2^27 elements each (32 cases, the largest a tensor
# held; what a hand split costs), extrapolated from one such case timed in
# the same run. Each function takes minutes to hours on a loaded 2-vCPU
# machine, so the run is opt-in: NV_BENCH_EXHAUSTIVE=1 (or =exp to run one).
#   bench/exhaustive_bench.sh [BUILD_DIR]   (default build-bench-svc)
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build-bench-svc}
W=$BUILD/worker/numval-worker
sel=${NV_BENCH_EXHAUSTIVE:-}
echo "machine: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg); mode: emu exact, 2 threads"
if [ -z "$sel" ]; then
    for f in exp log tanh erf; do
        echo "numval exhaustive fp32 $f: not run (set NV_BENCH_EXHAUSTIVE=1 or =$f)"
    done
    exit 0
fi
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
for f in exp log tanh erf; do
    [ "$sel" = 1 ] || [ "$sel" = "$f" ] || continue
    printf '{"kind": "op", "op": "%s", "dtypes": ["fp32"], "shapes": [[65536, 65536]], "inputs": ["exhaustive"], "tolerance": {"metric": "ulp", "max_ulp": 0.5, "reason_code": "approximation_error", "reason": "correct rounding"}}\n' "$f" >"$T/ex.json"
    /usr/bin/time -f "%e %U %M" -o "$T/time" "$W" run "$T/ex.json" --backend emu --threads 2 >"$T/out.json"
    rc=$?
    read -r wall user rss <"$T/time"
    v=$(/usr/bin/python3 -c 'import json,sys; c=json.load(open(sys.argv[1]))["cases"][0]; print("compared", c.get("compared"), "max_ulp", c.get("max_ulp"), "mismatches", c.get("mismatches"))' "$T/out.json" 2>/dev/null)
    awk -v f="$f" -v w="$wall" -v u="$user" -v r="$rss" -v rc="$rc" -v v="$v" 'BEGIN {
        printf "numval exhaustive fp32 %-5s %8.1f s wall %8.1f s cpu  peak RSS %6.1f MB  (exit %d; %s)\n", f, w, u, r / 1024, rc, v }'
    printf '{"kind": "op", "op": "%s", "dtypes": ["fp32"], "shapes": [[134217728]], "inputs": ["normal"], "seed": 1}\n' "$f" >"$T/one.json"
    /usr/bin/time -f "%e %U %M" -o "$T/time" "$W" run "$T/one.json" --backend emu --threads 2 >/dev/null
    read -r wall user rss <"$T/time"
    awk -v f="$f" -v w="$wall" -v r="$rss" 'BEGIN {
        printf "peer   hand split fp32 %-5s %8.1f s wall (32 x one 2^27 normal case of %.1f s), peak RSS %6.1f MB\n", f, 32 * w, w, r / 1024 }'
done
