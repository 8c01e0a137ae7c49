#!/bin/sh
# The PyTorch harness on a real GPU: run the smoke suite and the
# gradient suite through exec:torch_harness.py --device cuda, plus the
# protocol-level checks of tests/integration/test_torch_harness.py pointed at
# cuda, and keep every result under OUT. Nothing here has been run on a GPU yet:
# results are recorded only by a session that has one (docs/TORCH_FINDINGS.md).
#
# usage: bench/device_cuda.sh [BUILD_DIR] [OUT_DIR]
#   needs: /usr/bin/python3 (or $TORCH_PY) importing a CUDA build of torch, a
#   built numval-worker (meson setup BUILD && ninja -C BUILD).
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build-torch}
OUT=${2:-${OUT:-$ROOT/device-cuda-results}}
PY=${TORCH_PY:-/usr/bin/python3}
DEVICE=${DEVICE:-cuda}
W=$BUILD/worker/numval-worker
mkdir -p "$OUT"
export NUMVAL_EXEC_TIMEOUT=${NUMVAL_EXEC_TIMEOUT:-300}

"$PY" - > "$OUT/device.json" <<PYEOF
import json, torch
ok = torch.cuda.is_available()
print(json.dumps({"torch": torch.__version__, "cuda": torch.version.cuda, "available": ok,
                  "name": torch.cuda.get_device_name(0) if ok else None,
                  "capability": torch.cuda.get_device_capability(0) if ok else None}))
PYEOF
cat "$OUT/device.json"
if ! grep -q '"available": true' "$OUT/device.json"; then
    echo "device_cuda.sh: torch sees no CUDA device; nothing run" >&2
    exit 2
fi
nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1 || true

H="exec:$PY $ROOT/worker/harness/torch_harness.py --device $DEVICE"
run() { # name suite extra-harness-flags
    start=$(date +%s)
    rc=0
    "$W" run "$2" --backend "$H $3" --threads 1 > "$OUT/$1.json" 2> "$OUT/$1.err" || rc=$?
    echo "$1: exit $rc in $(( $(date +%s) - start )) s" | tee -a "$OUT/summary.txt"
}
run smoke "$ROOT/suites/smoke.json" ""
run smoke-deterministic "$ROOT/suites/smoke.json" "--deterministic"
run gradient "$ROOT/suites/gradient.json" ""
run gradient-aot "$ROOT/suites/gradient.json" "--autograd aot"

# Per op x dtype: max ULP and verdict, as docs/TORCH_FINDINGS.md tabulates them.
"$PY" - "$OUT" > "$OUT/findings.md" <<'PYEOF'
import json, sys, os
out = sys.argv[1]
for name in ("smoke", "smoke-deterministic", "gradient", "gradient-aot"):
    try:
        d = json.load(open(os.path.join(out, name + ".json")))
    except (OSError, ValueError) as e:
        print("## %s: no result (%s)" % (name, e))
        continue
    print("## %s: %s %s\n" % (name, d.get("verdict"), json.dumps(d.get("summary"))))
    print("| op | attrs | dtype | cases | failed | errors | max ULP / device headroom | fell back |")
    print("|---|---|---|---|---|---|---|---|")
    for r in d.get("results", []):
        rows = {}
        for c in r.get("cases", []):
            e = rows.setdefault(c.get("dtype"), [0, 0, 0, 0.0, False])
            e[0] += 1
            e[1] += c["verdict"] == "failed"
            e[2] += c["verdict"] == "error"
            m = c.get("max_ulp")
            if m is None:
                dev = (c.get("checks") or {}).get("device") or {}
                m = max([v.get("headroom", 0) for v in dev.values() if isinstance(v, dict)
                         and isinstance(v.get("headroom"), (int, float))] or [0])
            if isinstance(m, (int, float)):
                e[3] = max(e[3], m)
            e[4] = e[4] or bool(c.get("fell_back"))
        for dt, e in rows.items():
            print("| %s | %s | %s | %d | %d | %d | %.3g | %s |" % (
                r.get("op"), json.dumps(r.get("attrs", {})), dt, e[0], e[1], e[2], e[3], e[4]))
    print()
PYEOF

# Protocol-level checks (autograd modes, double backward, rng, determinism) on cuda.
"$PY" "$ROOT/tests/integration/test_torch_harness.py" "$ROOT" --device "$DEVICE" \
    > "$OUT/harness-tap.txt" 2>&1 || true
tail -5 "$OUT/harness-tap.txt"
echo "results in $OUT (summary.txt, findings.md, *.json)"
