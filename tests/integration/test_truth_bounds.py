#!/usr/bin/env python3
"""Validator truth for reductions and matmul (docs/TOLERANCES.md): numval-worker
run on real jobs.

- A correct emu passes every `large` case of the reductions and matmul in fp64,
  fp32 and bf16: the references are exact over fp64's whole exponent range (no
  NaN allowance, no NaN or Inf reference for a finite exact value), and where
  emu's declared accumulator overflows the case reports "intermediate_overflow"
  instead of failing.
- The intermediate-overflow rule follows the declared accumulator: a device
  accumulating in fp32 that declares fp32 is reported, one that declares fp64
  (whose range would have held the partial sums) fails.
- A device accumulating sums and matmul in bf16 (plugin_fault_bf16acc.c) fails
  the probabilistic default on N(0, 1) data on every seed, also at 65,536
  elements where the deterministic worst case (reported beside it) passes it;
  the same device accumulating in fp32 passes.
- A sample of bench/truth_sweep.py: emu's correct modes on the shipped smoke
  suite, every input class, fp64 added, no false failure.
Every result is validated against schema/result.schema.json.

usage: test_truth_bounds.py NUMVAL_WORKER SOURCE_ROOT BF16ACC_SO [--sweep]
With --sweep only the truth_sweep.py sample runs (meson test 'truth-sweep', suite
'slow': 3 minutes of numerics under the sanitizers that add nothing the smoke runs
of the other tests do not), without it everything else.
NUMVAL_TRUTH_SEEDS (default 3) sets the seeds of the fault checks. Prints TAP;
temp files live in a temp dir that is always removed."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import nvschema

from nvtap import ok, finish, checks

WORKER, ROOT, BF16ACC = sys.argv[1:4]
SEEDS = int(os.environ.get("NUMVAL_TRUTH_SEEDS", "3"))
VALIDATOR = nvschema.validator()


def run(tmp, job, backend):
    path = os.path.join(tmp, "job-%d.json" % checks())
    with open(path, "w") as f:
        json.dump(job, f)
    p = subprocess.run([WORKER, "run", path, "--backend", backend], capture_output=True,
                       text=True, timeout=600)
    res = json.loads(p.stdout) if p.stdout.strip() else None
    errs = [e.message for e in VALIDATOR.iter_errors(res)] if res is not None else ["no result"]
    return p.returncode, res, errs, p.stderr


def cases(res):
    if res is None:
        return []
    return res.get("cases") or [c for j in res.get("results", []) for c in j.get("cases", [])]


def desc(c):
    return "%s %s %s %s %s" % (c.get("op"), c.get("dtype"), c.get("shape"), c.get("input"),
                               c.get("verdict"))


def nan_allowance(c):
    return any(m.get("allowed") in ("nan", "inf") and m.get("kind") == "bound_exceeded"
               for m in c.get("first_mismatches", []))


def test_large(tmp):
    ops = [("sum", [[64, 257], [4096]]), ("mean", [[32, 300]]), ("var", [[16, 512]]),
           ("norm2", [[32, 512]]), ("matmul", [[64, 96, 48]]), ("bmm", [[4, 32, 64, 16]]),
           ("layer_norm", [[16, 768]]), ("rms_norm", [[16, 768]]), ("softmax", [[16, 1000]]),
           ("logsumexp", [[16, 1000]])]
    jobs = [{"kind": "op", "op": op, "dtypes": ["fp64", "fp32", "bf16"], "shapes": shapes,
             "inputs": ["large"], "seed": 11} for op, shapes in ops]
    rc, res, errs, err = run(tmp, {"name": "large", "jobs": jobs}, "emu:")
    cs = cases(res)
    bad = [desc(c) + " " + str(c.get("failure_class")) for c in cs if c["verdict"] != "passed"]
    ok(rc == 0 and cs and not bad and not errs,
       "emu passes every large case of the reductions and matmul in fp64/fp32/bf16 (%d cases)"
       % len(cs), bad + errs + [err])
    reported = {(c["op"], c["dtype"]) for c in cs if c.get("intermediate_overflow")}
    want = {(op, dt) for op in ("sum", "mean", "matmul", "layer_norm") for dt in ("fp32", "bf16")}
    ok(want <= reported,
       "sum, mean, matmul, layer_norm fp32/bf16: the fp32 accumulator's overflow reported",
       sorted(want - reported))
    acc = [c["intermediate_overflow"]["accumulator"] for c in cs if c.get("intermediate_overflow")
           and c["dtype"] == "fp32" and c["op"] == "sum"]
    ok(acc and all(a == {"dtype": "fp32", "range": "fp32", "declared": True} for a in acc),
       "judged against the accumulator emu's contract declares", acc)
    ok(not [c for c in cs if nan_allowance(c)], "no NaN or Inf allowance anywhere")
    # fp64 mean whose intermediate sum overflows fp64: the exact mean is finite.
    firsts = [c["intermediate_overflow"]["first"] for c in cs
              if c["op"] == "mean" and c["dtype"] == "fp64" and c.get("intermediate_overflow")]
    ok(firsts and all(isinstance(f["exact"], float) and f["peak"] == "inf" for f in firsts),
       "fp64 mean whose sum overflows fp64: the exact mean is finite (%s), the demand Inf"
       % [f["exact"] for f in firsts][:2], firsts)


def test_declared(tmp):
    job = {"kind": "op", "op": "sum", "dtypes": ["fp32"], "shapes": [[64, 257]],
           "inputs": ["large"], "seed": 3}
    rc, res, errs, err = run(tmp, job, "plugin:%s?acc=fp32" % BF16ACC)
    c = cases(res)[0] if cases(res) else {}
    ok(rc == 0 and c.get("verdict") == "passed" and c.get("intermediate_overflow", {}).get(
        "accumulator", {}).get("dtype") == "fp32" and not errs,
       "fp32 accumulation declared fp32: overflow reported, passed", [desc(c)] + errs + [err])
    rc, res, errs, err = run(tmp, job, "plugin:%s?acc=fp32,declare=fp64" % BF16ACC)
    c = cases(res)[0] if cases(res) else {}
    ok(rc == 1 and c.get("verdict") == "failed" and c.get("failure_class") in (
        "inf_mismatch", "nan_mismatch", "bound_exceeded") and not c.get("intermediate_overflow")
       and not errs,
       "fp32 accumulation declared fp64: the same overflow fails (%s)" % c.get("failure_class"),
       [desc(c)] + errs + [err])


def test_bf16_accumulation(tmp):
    jobs = []
    for s in range(1, SEEDS + 1):
        jobs.append({"kind": "op", "op": "sum", "dtypes": ["fp32", "bf16"],
                     "shapes": [[64, 257], [4096], [65536]], "inputs": ["normal"], "seed": s})
        jobs.append({"kind": "op", "op": "matmul", "dtypes": ["fp32", "bf16"],
                     "shapes": [[64, 96, 48]], "layouts": ["contiguous", "transposed"],
                     "inputs": ["normal"], "seed": 100 + s})
    suite = {"name": "bf16acc", "jobs": jobs}
    rc, res, errs, err = run(tmp, suite, "plugin:%s?acc=bf16" % BF16ACC)
    cs = cases(res)
    missed = [desc(c) for c in cs if c["verdict"] != "failed" or
              c.get("failure_class") != "bound_exceeded"]
    ok(rc == 1 and len(cs) == SEEDS * 10 and not missed and not errs,
       "bf16 accumulation fails the default on every case of %d seeds (%d cases)" % (SEEDS,
                                                                                     len(cs)),
       missed + errs + [err])
    big = [c for c in cs if c["shape"] == [65536]]
    ok(big and all(c["headroom_worst_case"] < 1 < c["headroom"] for c in big),
       "at 65,536 elements the worst case passes it (headroom %s), the default fails it (%s)"
       % (["%.3g" % c["headroom_worst_case"] for c in big],
          ["%.3g" % c["headroom"] for c in big]))
    lam = [c["probabilistic"]["lambda"] for c in cs]
    ok(all(7 < v < 10 for v in lam) and all(c["probabilistic"]["p_fail"] == 1e-9 for c in cs),
       "lambda %.2f..%.2f for a per-case probability of 1e-9" % (min(lam), max(lam)))
    rc, res, errs, err = run(tmp, suite, "plugin:%s?acc=fp32" % BF16ACC)
    cs = cases(res)
    bad = [desc(c) for c in cs if c["verdict"] != "passed"]
    ok(rc == 0 and len(cs) == SEEDS * 10 and not bad and not errs,
       "the same device accumulating in fp32 passes every case", bad + errs + [err])


def test_sweep_sample(tmp):
    out = os.path.join(tmp, "sweep.json")
    p = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "truth_sweep.py"), WORKER,
                        "--seeds", "1", "--suites", "smoke", "--modes", "emu:", "--json", out],
                       capture_output=True, text=True, timeout=1200)
    tail = p.stdout.splitlines()[-12:] + p.stderr.splitlines()[-5:]
    summary = json.load(open(out)) if os.path.exists(out) else {}
    tot = summary.get("total", {})
    ok(p.returncode == 0 and tot.get("cases", 0) > 1000 and tot.get("failed") == 0 and
       tot.get("errors") == 0,
       "sweep sample: emu on smoke, every input class, fp64 added: %s cases, 0 failed" %
       tot.get("cases"), tail)
    p = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "truth_sweep.py"), WORKER,
                        "--seeds", "1", "--suites", "smoke", "--classes",
                        "normal,uniform,cancellation,large,offset", "--modes",
                        "emu:reduce=random;emu:reduce=tree:32;emu:reduce=splitk:8", "--json",
                        out],
                       capture_output=True, text=True, timeout=1200)
    tail = p.stdout.splitlines()[-12:] + p.stderr.splitlines()[-5:]
    summary = json.load(open(out)) if os.path.exists(out) else {}
    tot = summary.get("total", {})
    ok(p.returncode == 0 and tot.get("cases", 0) > 500 and tot.get("failed") == 0,
       "sweep sample: random, tree and split-k orders: %s cases, 0 failed" % tot.get("cases"),
       tail)


def main():
    tmp = tempfile.mkdtemp(prefix="nv-truth-")
    try:
        if "--sweep" in sys.argv[4:]:
            test_sweep_sample(tmp)
        else:
            test_large(tmp)
            test_declared(tmp)
            test_bf16_accumulation(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
