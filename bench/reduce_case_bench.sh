#!/bin/sh
# One large reduction case end to end (sum fp32 `normal` on emu exact: the
# input generated into the device's view, the device's sum of the whole
# tensor, the exact reference streamed from the view, the comparison) at
# several sizes: time per element and peak resident memory, beside a NumPy
# peer doing the comparable work in one process (the fp32 input drawn, an
# fp32 sum and an fp64 sum as the reference). The device's own memory is
# printed beside numval's: the view it reads (4 bytes per fp32 element, held
# for its one call) and what emu decodes it into (8 bytes per element, only
# up to 2^16 elements: a larger reduction reads the view in place,
# emu_reduce_view) are the device's, computed from n, not measured. Usage:
#   bench/reduce_case_bench.sh [BUILD_DIR] [N ...]   (default build-bench-svc, 10^6 10^7 10^8)
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build-bench-svc}
[ $# -gt 0 ] && shift
[ $# -gt 0 ] || set -- 1000000 10000000 100000000
W=$BUILD/worker/numval-worker
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
echo "machine: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg); mode: emu exact"
for N in "$@"; do
    printf '{"kind": "op", "op": "sum", "dtypes": ["fp32"], "shapes": [[%s]], "inputs": ["normal"], "seed": 1}\n' "$N" >"$T/sum.json"
    /usr/bin/time -f "%e %U %M" -o "$T/time" "$W" run "$T/sum.json" --backend emu --threads 1 >"$T/out.json"
    rc=$?
    read -r wall user rss <"$T/time"
    v=$(/usr/bin/python3 -c 'import json,sys; c=json.load(open(sys.argv[1]))["cases"][0]; print(c["verdict"], c.get("max_ulp"))' "$T/out.json" 2>/dev/null)
    awk -v w="$wall" -v u="$user" -v r="$rss" -v n="$N" -v rc="$rc" -v v="$v" 'BEGIN {
        printf "numval sum fp32 n=%-10d %8.1f ns/elt wall %6.1f ns/elt cpu  peak RSS %7.1f MB  (device view %6.1f MB, emu decoded %6.1f MB; exit %d, %s)\n",
               n, w * 1e9 / n, u * 1e9 / n, r / 1024, n * 4 / 1048576, (n > 65536 ? 0 : n * 8) / 1048576, rc, v }'
    if /usr/bin/python3 -c 'import numpy' 2>/dev/null; then
        /usr/bin/python3 - "$N" <<'PY'
import resource, sys, time
import numpy as np
n = int(sys.argv[1])
t0 = time.perf_counter()
x = np.random.default_rng(1).standard_normal(n, dtype=np.float32)
s = x.sum(dtype=np.float32)
r = np.sum(x.astype(np.float64))
t = time.perf_counter() - t0
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print("numpy  sum fp32 n=%-10d %8.1f ns/elt wall                   peak RSS %7.1f MB  (fp64 sum as the reference)"
      % (n, t * 1e9 / n, rss))
PY
    fi
done
