#!/usr/bin/env python3
"""Second order on a correct device: the reference's second-order check (its
finite-difference error model, docs/JOBS.md "The checks of a case") and the
device's double backward, over seeds.

usage: test_second_order.py NUMVAL_WORKER [--seeds N] [--all-ops]   (TAP)

Every case of the sizes the error model must scale to (tanh [16384],
layer_norm [64, 64], rms_norm [256, 64], matmul 64x64x64) passes on emu in
fp64, fp32 and bf16, full and fast mode, for each seed 1..N (CI: 3; the 20-seed
run of docs/JOBS.md is --seeds 20). --all-ops adds every differentiable op of
the catalog at a small shape in fp64, fp32, bf16 and fp16. The last line counts cases and failures.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

from nvtap import ok, finish

ap = argparse.ArgumentParser()
ap.add_argument("worker")
ap.add_argument("--seeds", type=int, default=3)
ap.add_argument("--all-ops", action="store_true")
args = ap.parse_args()

LARGE = [("tanh", [16384]), ("layer_norm", [64, 64]), ("rms_norm", [256, 64]),
         ("matmul", [64, 64, 64])]
ELEMENTWISE = ["neg", "abs", "add", "sub", "mul", "div", "fma", "sqrt", "rsqrt", "reciprocal",
               "exp", "exp2", "expm1", "log", "log2", "log1p", "sin", "cos", "tanh", "sigmoid",
               "erf", "gelu", "silu", "relu", "pow", "maximum", "minimum"]
ROWS = ["sum", "mean", "max", "var", "norm2", "logsumexp", "softmax", "log_softmax",
        "layer_norm", "rms_norm", "cross_entropy"]


def jobs_for(seed):
    jobs = []
    for op, shape in LARGE:
        for mode in ("full", "fast"):
            jobs.append({"kind": "gradient", "op": op, "dtypes": ["fp64", "fp32", "bf16"],
                         "shapes": [shape], "inputs": ["normal", "uniform"], "seed": seed,
                         "order": 2, "mode": mode})
    if args.all_ops:
        shapes = {op: [[64]] for op in ELEMENTWISE}
        shapes.update({op: [[4, 16]] for op in ROWS})
        shapes.update({"matmul": [[4, 8, 5]], "bmm": [[2, 3, 4, 5]]})
        for op, sh in shapes.items():
            jobs.append({"kind": "gradient", "op": op, "dtypes": ["fp64", "fp32", "bf16", "fp16"],
                         "shapes": sh, "inputs": ["normal", "uniform"], "seed": seed,
                         "order": 2})
        jobs.append({"kind": "gradient", "op": "gelu", "attrs": {"approximate": "tanh"},
                     "dtypes": ["fp32"], "shapes": [[64]], "seed": seed, "order": 2})
        jobs.append({"kind": "gradient", "op": "cross_entropy", "attrs": {"reduction": "mean"},
                     "dtypes": ["fp32"], "shapes": [[4, 16]], "seed": seed, "order": 2})
    return jobs


def main():
    cases = worst = dbl_worst = 0
    worst_at = dbl_at = ""
    with tempfile.TemporaryDirectory(prefix="numval-so-") as tmp:
        for seed in range(1, args.seeds + 1):
            jobs = jobs_for(seed)
            path = os.path.join(tmp, "suite.json")
            with open(path, "w") as f:
                json.dump({"name": "second-order-%d" % seed, "jobs": jobs}, f)
            p = subprocess.run([args.worker, "run", path, "--backend", "emu"],
                               capture_output=True, text=True, timeout=1200)
            try:
                res = json.loads(p.stdout)
            except ValueError:
                res = {}
            results = res.get("results", [])
            ok(len(results) == len(jobs), "seed %d: %d jobs ran" % (seed, len(jobs)),
               p.stderr[-2000:])
            bad = []
            for j, r in zip(jobs, results):
                for c in r.get("cases", []):
                    cases += 1
                    so = c["checks"].get("second_order", {})
                    for name, rep in so.items():
                        if isinstance(rep, dict) and rep.get("worst_ratio", 0) > worst:
                            worst = rep["worst_ratio"]
                            worst_at = "%s %s %s %s seed %d" % (j["op"], c["dtype"], c["shape"],
                                                                 name, seed)
                    for name, rep in c["checks"].get("double_backward", {}).items():
                        if isinstance(rep, dict) and rep.get("headroom", 0) > dbl_worst:
                            dbl_worst = rep["headroom"]
                            dbl_at = "%s %s %s %s seed %d" % (j["op"], c["dtype"], c["shape"],
                                                               name, seed)
                    if c["verdict"] != "passed":
                        bad.append({"op": j["op"], "dtype": c["dtype"], "shape": c["shape"],
                                    "mode": c["mode"], "failed": c.get("failed_checks"),
                                    "second_order": so, "double": c["checks"].get(
                                        "double_backward")})
            ok(not bad, "seed %d: every case passes formula, device, double backward and "
               "second order" % seed, json.dumps(bad)[:3000])
    print("# %d cases over %d seeds, worst second-order ratio %.6f (%s), worst "
          "double-backward headroom %.6f (%s)" % (cases, args.seeds, worst, worst_at, dbl_worst,
                                                  dbl_at))
    return finish()


if __name__ == "__main__":
    sys.exit(main())
