#!/usr/bin/env python3
"""Gradient jobs through the real numval-worker.

Usage: test_gradient.py NUMVAL_WORKER BADGRAD_PLUGIN_SO
- every differentiable op passes all checks (formula, device, second order) on
  the correct emu in fp32, bf16 and fp16;
- the badgrad plugin (sigmoid backward from x, layer_norm without the mean
  term) fails the device check, and the result names op, check and elements;
- bf16 gradients accumulated in bf16 over a long reduction (layer_norm's
  weight/bias over 4096 rows) fail the device check, fp32 accumulation passes;
- an inference-only backend is refused with a clear error (exit 2);
- a deterministic job refuses an op the backend declares non-deterministic;
- an op that differs between two runs without being declared fails "determinism".
"""
import json
import subprocess
import sys
import tempfile
import os

WORKER, PLUGIN = sys.argv[1], sys.argv[2]
failures = 0

ELEMENTWISE = ["neg", "abs", "add", "sub", "mul", "div", "fma", "sqrt", "rsqrt", "reciprocal",
               "exp", "exp2", "expm1", "log", "log2", "log1p", "sin", "cos", "tanh", "sigmoid",
               "erf", "gelu", "silu", "relu", "pow", "maximum", "minimum"]
ROWS = ["sum", "mean", "max", "var", "norm2", "logsumexp", "softmax", "log_softmax",
        "layer_norm", "rms_norm", "cross_entropy"]


def check(cond, msg):
    global failures
    print(("ok - " if cond else "not ok - ") + msg, flush=True)
    if not cond:
        failures += 1


def run(spec, backend):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "job.json")
        with open(path, "w") as f:
            json.dump(spec, f)
        p = subprocess.run([WORKER, "run", path, "--backend", backend], capture_output=True,
                           text=True, timeout=240)
    try:
        return p.returncode, json.loads(p.stdout) if p.stdout.strip() else None, p.stderr
    except json.JSONDecodeError:
        return p.returncode, None, p.stderr


def main():
    shapes = {op: [[64]] for op in ELEMENTWISE}
    shapes.update({op: [[4, 16]] for op in ROWS})
    shapes.update({"matmul": [[4, 8, 5]], "bmm": [[2, 3, 4, 5]]})
    for op, sh in shapes.items():
        rc, r, err = run({"kind": "gradient", "op": op, "dtypes": ["fp32", "bf16", "fp16"],
                          "shapes": sh, "seed": 11, "order": 2}, "emu")
        bad = [] if r is None else [c for c in r["cases"] if c["verdict"] != "passed"]
        check(rc == 0 and r is not None and r["verdict"] == "passed" and not bad,
              f"{op}: formula, device and second order pass in fp32/bf16/fp16 (rc {rc}) "
              f"{err.strip()[:200]} {json.dumps(bad)[:400]}")

    for op in ["sigmoid", "layer_norm"]:
        rc, r, _ = run({"kind": "gradient", "op": op, "dtypes": ["fp32"], "shapes": [[4, 32]],
                        "seed": 1}, "plugin:" + PLUGIN)
        c = r["cases"][0] if r else {}
        first = c.get("checks", {}).get("device", {}).get("x", {}).get("first_mismatches", [])
        check(rc == 1 and c.get("verdict") == "failed" and c.get("failed_check") == "device"
              and c.get("op") == op and first and "index" in first[0] and "got" in first[0]
              and "expected" in first[0],
              f"badgrad {op}: device check fails and names the elements: {json.dumps(first[:1])}")
        check(c.get("checks", {}).get("formula", {}).get("x", {}).get("passed") is True,
              f"badgrad {op}: the formula check (reference) still passes")

    # Long backward reduction: layer_norm weight/bias gradients sum over 4096 rows.
    spec = {"kind": "gradient", "op": "layer_norm", "dtypes": ["bf16"], "shapes": [[4096, 8]],
            "seed": 2, "mode": "fast"}
    rc, r, _ = run(spec, "emu:accum=bf16")
    dev = r["cases"][0]["checks"]["device"] if r else {}
    check(rc == 1 and dev.get("weight", {}).get("passed") is False
          and dev.get("bias", {}).get("passed") is False,
          "bf16 accumulation over 4096 rows fails the device check (weight, bias)")
    rc, r, _ = run(spec, "emu:accum=fp32")
    check(rc == 0 and r["verdict"] == "passed", "the same job with fp32 accumulation passes")

    rc, r, err = run({"kind": "gradient", "op": "tanh", "dtypes": ["fp32"], "shapes": [[8]]},
                     "emu:inference_only=on")
    check(rc == 2 and "inference-only" in err, f"inference-only backend refused: {err.strip()}")
    rc, r, err = run({"kind": "op", "op": "tanh", "dtypes": ["fp32"], "shapes": [[8]]},
                     "emu:inference_only=on")
    check(rc == 0, "op jobs still run on the inference-only backend")

    det = {"kind": "gradient", "op": "softmax", "dtypes": ["fp32"], "shapes": [[4, 8]],
           "deterministic": True}
    rc, r, err = run(det, "emu:reduce=random")
    check(rc == 2 and "non-deterministic" in err, f"deterministic job refuses reduce=random: "
          f"{err.strip()}")
    rc, r, err = run(det, "emu")
    check(rc == 0 and r["cases"][0]["checks"]["determinism"]["bitwise_equal"] is True,
          "deterministic job on a sequential emu: two runs bit-identical")

    # A backend that sums in random order without declaring it: the repeated
    # case differs bit for bit and fails "determinism", keeping both values.
    rc, r, err = run({"kind": "gradient", "op": "softmax", "dtypes": ["fp32"],
                      "shapes": [[4, 4096]], "mode": "fast", "repeat": 2, "seed": 5},
                     "plugin:" + PLUGIN + "?undeclared_random")
    c = r["cases"][0] if r else {}
    det = c.get("checks", {}).get("determinism", {})
    diff = det.get("first_difference", {})
    check(rc == 1 and c.get("failed_check") == "determinism" and det.get("bitwise_equal") is False
          and "run_1" in diff and "run_2" in diff and diff["run_1"] != diff["run_2"],
          f"undeclared non-determinism fails the determinism check: {json.dumps(diff)}")

    print(f"1..0 # {failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
