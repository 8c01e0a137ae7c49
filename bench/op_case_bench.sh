#!/bin/sh
# One large op case end to end (generate, device, reference, compare) per
# element and its peak resident memory, numval-worker on emu beside a NumPy peer
# doing the comparable work (inputs drawn, exp in fp32, an fp64 exp as the
# reference, ulp errors and their maximum and mean). Usage:
#   bench/op_case_bench.sh [BUILD_DIR] [N]     (default build-bench-svc, 10^7)
# Prints one line per measurement; figures go to bench/RESULTS.md.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build-bench-svc}
N=${2:-10000000}
W=$BUILD/worker/numval-worker
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
printf '{"kind": "op", "op": "exp", "dtypes": ["fp32"], "shapes": [[%s]], "inputs": ["normal"], "seed": 1}\n' "$N" >"$T/exp.json"
printf '{"kind": "op", "op": "sum", "dtypes": ["fp32"], "shapes": [[%s]], "inputs": ["normal"], "seed": 1}\n' "$N" >"$T/sum.json"
echo "machine: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg); mode: emu exact (round to nearest even), the op's default tolerance (ulp)"
run() { # label job backend threads
    /usr/bin/time -f "%e %U %M" -o "$T/time" "$W" run "$2" --backend "$3" --threads "$4" >"$T/out.json"
    rc=$?
    read -r wall user rss <"$T/time"
    awk -v l="$1" -v w="$wall" -v u="$user" -v r="$rss" -v n="$N" -v rc="$rc" 'BEGIN {
        printf "numval %-28s %8.1f ns/elt wall %8.1f ns/elt cpu  peak RSS %6.1f MB  (exit %d)\n",
               l, w * 1e9 / n, u * 1e9 / n, r / 1024, rc }'
}
run "exp fp32 emu exact, 1 thread" "$T/exp.json" emu 1
run "exp fp32 emu exact, 2 threads" "$T/exp.json" emu 2
run "sum fp32 emu, 1 thread" "$T/sum.json" emu 1
if /usr/bin/python3 -c 'import numpy' 2>/dev/null; then
    /usr/bin/python3 - "$N" <<'PY'
import resource, sys, time
import numpy as np
n = int(sys.argv[1])
t0 = time.perf_counter()
x = np.random.default_rng(1).standard_normal(n, dtype=np.float32)
got = np.exp(x)
ref = np.exp(x.astype(np.float64))
ulp = np.spacing(ref.astype(np.float32)).astype(np.float64)
err = np.abs(got.astype(np.float64) - ref) / ulp
mx, mean = err.max(), err.mean()
t = time.perf_counter() - t0
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print("numpy  %-28s %8.1f ns/elt wall                     peak RSS %6.1f MB  (max %.3g ulp, fp64 reference)"
      % ("exp fp32 + compare", t * 1e9 / n, rss, mx))
t0 = time.perf_counter()
s = x.sum(dtype=np.float32)
r = np.sum(x.astype(np.float64))
t = time.perf_counter() - t0
print("numpy  %-28s %8.1f ns/elt wall" % ("sum fp32 + fp64 reference", t * 1e9 / n))
PY
else
    echo "numpy  (python3-numpy missing: peer skipped)"
fi
