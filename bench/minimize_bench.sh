#!/bin/sh
# Minimization cost (issue 6; results in bench/RESULTS.md "Minimization"): one
# command. Writes the fused and gradient failure artifacts with
# `numval-worker run --artifacts` (the injected faults of
# tests/integration/test_minimize_fused.py and test_minimize_grad.py), then runs
# bench/minimize_bench on the op faults and on those artifacts: numval's
# minimizer vs a plain ddmin, same budget and deadline, one Markdown row each.
#
# usage: bench/minimize_bench.sh BUILD_DIR [BUDGET] [DEADLINE_S]
#   BUILD_DIR must hold worker/numval-worker, bench/minimize_bench,
#   tests/integration/libnvtest_dropsum.so and
#   tests/unit/backends/libnvtest_plugin_badgrad.so.
set -eu
if [ $# -lt 1 ]; then
    echo "usage: $0 BUILD_DIR [BUDGET] [DEADLINE_S]" >&2
    exit 2
fi
B=$(cd "$1" && pwd)
BUDGET=${2:-1000}
DEADLINE=${3:-120}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
W=$B/worker/numval-worker
BENCH=$B/bench/minimize_bench
DROP=$B/tests/integration/libnvtest_dropsum.so
BADGRAD=$B/tests/unit/backends/libnvtest_plugin_badgrad.so
for f in "$W" "$BENCH" "$DROP" "$BADGRAD"; do
    if [ ! -e "$f" ]; then
        echo "minimize_bench.sh: '$f' is missing (build it first)" >&2
        exit 2
    fi
done
TMP=$(mktemp -d "${TMPDIR:-/tmp}/nv-minbench-XXXXXX")
trap 'rm -rf "$TMP"' EXIT INT TERM

# The job specs: attention and the fp8 epilogue from suites/fused.json
# (attention with L = 2048 replaced by 128, as test_minimize_fused.py does: the
# fault does not depend on L), the badgrad gradient jobs of
# test_minimize_grad.py.
python3 - "$ROOT/suites/fused.json" "$TMP" <<'EOF'
import json, sys
jobs = {j["name"]: j for j in json.load(open(sys.argv[1]))["jobs"]}
att = jobs["attention"]
for i in att["graph"]["inputs"]:
    i["shape"] = [128 if e == 2048 else e for e in i["shape"]]
specs = {
    "attention": att,
    "epilogue": jobs["fp8_block_matmul_bf16_epilogue"],
    "sigmoid": {"kind": "gradient", "op": "sigmoid", "dtypes": ["fp32"], "shapes": [[4, 32]],
                "seed": 1},
    "layer_norm": {"kind": "gradient", "op": "layer_norm", "dtypes": ["fp32"],
                   "shapes": [[4, 32]], "seed": 1},
}
for name, spec in specs.items():
    with open("%s/%s.json" % (sys.argv[2], name), "w") as f:
        json.dump(spec, f)
EOF

# artifact NAME BACKEND: run the job, which must fail with exactly one
# artifact; prints the artifact's path.
artifact() {
    mkdir "$TMP/$1"
    rc=0
    "$W" run "$TMP/$1.json" --backend "$2" --artifacts "$TMP/$1" >"$TMP/$1.result" || rc=$?
    set -- "$TMP/$1"/*.nvart "$1" "$rc"
    if [ $# -ne 3 ] || [ "$3" != 1 ] || [ ! -e "$1" ]; then
        echo "minimize_bench.sh: job '$2' did not fail with one artifact (rc $3)" >&2
        exit 2
    fi
    echo "$1"
}

FUSED_BF16=emu:fused_intermediate=bf16
FUSED_FAST=emu:fused_transcendental=fast
BAD=plugin:$BADGRAD
ATT=$(artifact attention "$FUSED_BF16")
EPI=$(artifact epilogue "$FUSED_FAST")
SIG=$(artifact sigmoid "$BAD")
LN=$(artifact layer_norm "$BAD")

"$BENCH" "$DROP" "$BUDGET" "$DEADLINE" \
    --fused "fused: attention L=128, emu fused_intermediate=bf16" "$ATT" "$FUSED_BF16" \
    --fused "fused: fp8 matmul + bias + gelu, emu fused_transcendental=fast" "$EPI" "$FUSED_FAST" \
    --grad "gradient: badgrad sigmoid backward (x for y)" "$SIG" "$BAD" \
    --grad "gradient: badgrad layer_norm backward (no - mean(g))" "$LN" "$BAD"
