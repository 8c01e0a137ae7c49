#!/usr/bin/env python3
"""The worker's side of the result schema: numval-worker run on the shipped
suites (smoke, gradient, fused, nightly, model) and on jobs that fail or error in
every way the runners report (a fast exp under a 0.5-ulp tolerance, a refused
non-deterministic op, misbehaving plugin outputs, an unsupported op, wrong
and non-deterministic gradients, a fused region that rounds to bf16, a
long run whose fp16 gradients underflow), each result validated against
schema/result.schema.json. The validator is shown able to fail: mutated copies
of real cases of every kind and verdict are each rejected, and the schema's
version equals NV_RESULT_SCHEMA_VERSION in include/numval/result.h.

usage: test_result_schema.py NUMVAL_WORKER SOURCE_ROOT MISBEHAVE_SO BADGRAD_SO
Prints TAP. Temp files live in a temp dir that is always removed."""
import copy
import json
import os
import shutil
import subprocess
import sys
import tempfile

import nvschema

from nvtap import ok, finish, checks

WORKER, ROOT, MISBEHAVE, BADGRAD = sys.argv[1:5]


def run(tmp, job, backend, want_rc, *extra, timeout=600):
    """numval-worker run; the parsed result (None when it printed none)."""
    if isinstance(job, dict):
        path = os.path.join(tmp, "job-%d.json" % checks())
        with open(path, "w") as f:
            json.dump(job, f)
    else:
        path = os.path.join(ROOT, job)
    p = subprocess.run([WORKER, "run", path, "--backend", backend] + list(extra),
                       capture_output=True, text=True, timeout=timeout)
    try:
        res = json.loads(p.stdout) if p.stdout.strip() else None
    except ValueError:
        res = None
    ok(p.returncode == want_rc and res is not None,
       "%s on %s: exit %d with a result" % (job if isinstance(job, str) else
                                            job.get("name", job.get("op", job["kind"])),
                                            backend, want_rc),
       "exit %d: %s" % (p.returncode, p.stderr[-1500:]))
    return res


EXP_FAIL = {"kind": "op", "op": "exp", "dtypes": ["fp32"], "shapes": [[257]],
            "inputs": ["normal"], "seed": 7,
            "tolerance": {"metric": "ulp", "max_ulp": 0.5, "reason_code": "approximation_error",
                          "reason": "x"}}
SUM = {"kind": "op", "op": "sum", "dtypes": ["fp32"], "shapes": [[8, 4096]],
       "inputs": ["normal"], "seed": 3}
ADD = {"kind": "op", "op": "add", "dtypes": ["fp32"], "shapes": [[64, 33]],
       "layouts": ["contiguous", "strided"], "inputs": ["normal"], "seed": 5}
# A small attention head: its QK^T matmul is the first value a region that holds
# intermediates in bf16 rounds (docs/JOBS.md "emu's fused mode").
ATTENTION = {"kind": "fused", "name": "small_attention",
             "graph": {"inputs": [{"name": "q", "shape": [64, 32]},
                                  {"name": "kT", "shape": [32, 64]},
                                  {"name": "v", "shape": [64, 32]}],
                       "nodes": [{"name": "s", "op": "matmul", "inputs": ["q", "kT"]},
                                 {"name": "p", "op": "softmax", "inputs": ["s"],
                                  "attrs": {"axis": -1}},
                                 {"name": "o", "op": "matmul", "inputs": ["p", "v"]}],
                       "outputs": ["o"]},
             "dtypes": ["bf16"], "inputs": ["normal", "uniform"], "seed": 5}
UNDERFLOW = {"kind": "longrun", "model": "mlp", "sizes": {"in": 16, "hidden": 32, "classes": 4},
             "steps": 40, "batch": 32, "n_seeds": 3, "seed": 1, "log_every": 10,
             "optimizer": {"name": "adamw", "lr": 0.01, "eps": 1e-16},
             "schedule": {"name": "cosine", "warmup": 10}, "amp": {"dtype": "fp16"},
             "loss_weight": 2.0 ** -20}


def results(tmp):
    """(name, result) of every run; runs that print no result fail here."""
    art = os.path.join(tmp, "artifacts")
    os.mkdir(art)
    plug = "plugin:" + MISBEHAVE
    out = []
    for suite in ("smoke", "gradient", "fused", "nightly"):
        out.append((suite, run(tmp, "suites/%s.json" % suite, "emu", 0, timeout=900)))
    out.append(("failing exp", run(tmp, EXP_FAIL, "emu:transcendental=fast", 1,
                                   "--artifacts", art)))
    out.append(("refused op (error)", run(tmp, dict(SUM, deterministic=True),
                                          "emu:reduce=random", 2)))
    out.append(("repeat", run(tmp, dict(SUM, repeat=2), "emu:reduce=random", 0)))
    out.append(("expect_error, store tolerance", run(tmp, dict(
        ADD, expect_error={"case": "shape_mismatch"},
        tolerance_by_dtype={"fp32": {"metric": "allclose", "atol": 0, "rtol": 1e-6,
                                     "reason_code": "dtype_precision", "version": 3,
                                     "reason": "schema test: a stored tolerance"}}), "emu", 0)))
    for bad in ("shape", "strides", "dtype", "count", "bit"):
        out.append(("misbehave " + bad, run(tmp, dict(ADD, name="bad=" + bad),
                                            plug + "?bad=" + bad, 1)))
    out.append(("misbehave accept", run(tmp, dict(ADD, expect_error={"case": "shape_mismatch"},
                                                  name="bad=accept"), plug + "?bad=accept", 1)))
    out.append(("unsupported op", run(tmp, dict(EXP_FAIL, name="exp on misbehave"), plug, 2)))
    out.append(("wrong gradient", run(tmp, {"kind": "gradient", "op": "sigmoid",
                                            "dtypes": ["fp32"], "shapes": [[4, 32]], "seed": 1},
                                      "plugin:" + BADGRAD, 1, "--artifacts", art)))
    out.append(("non-deterministic gradient", run(
        tmp, {"kind": "gradient", "op": "softmax", "dtypes": ["fp32"], "shapes": [[4, 4096]],
              "mode": "fast", "repeat": 2, "seed": 5}, "plugin:" + BADGRAD + "?undeclared_random",
        1)))
    out.append(("fused bf16 region", run(tmp, ATTENTION, "emu:fused_intermediate=bf16", 1,
                                         "--artifacts", art)))
    out.append(("longrun underflow", run(tmp, UNDERFLOW, "emu", 1, "--threads", "2")))
    out.append(("model", run(tmp, "suites/model.json", "emu", 0)))
    out.append(("model fp8 storage", run(tmp, "suites/model.json", "emu:storage=fp8_e5m2", 1)))
    return [(name, r) for name, r in out if r is not None]


def job_results(doc):
    return doc["results"] if "results" in doc else [doc]


def test(tmp):
    sv, hv = nvschema.versions()
    ok(sv == 1 and sv == hv, "schema version %s ($id) == NV_RESULT_SCHEMA_VERSION %s" % (sv, hv))
    whole = nvschema.validator()
    by_kind = {k: nvschema.validator(k + "_case") for k in ("op", "gradient", "fused", "model")}
    seen = {}  # (kind, verdict, failure_class) -> a case
    res = {}  # (kind, verdict) -> a job result
    for name, doc in results(tmp):
        errs = nvschema.errors(whole, doc)
        ok(not errs, "%s: the result is valid" % name, errs)
        for r in job_results(doc):
            kind = r.get("kind", "error")
            res.setdefault((kind, r["verdict"]), r)
            for c in r.get("cases", []):
                seen.setdefault((kind, c["verdict"], c.get("failure_class")), c)
    kinds = {k for k, _ in res}
    ok({"op", "gradient", "fused", "longrun", "model"} <= kinds, "results of every kind run (%s)" %
       sorted(kinds))
    want = [("op", "passed"), ("op", "failed"), ("op", "error"), ("gradient", "passed"),
            ("gradient", "failed"), ("fused", "passed"), ("fused", "failed"),
            ("longrun", "passed"), ("longrun", "failed"), ("model", "passed"),
            ("model", "failed")]
    have = set(res) | {(k, v) for k, v, _ in seen}
    ok(all(w in have for w in want), "every kind's verdicts were validated (missing: %s)" %
       [w for w in want if w not in have])
    classes = {"%s/%s" % (k, c) for k, _, c in seen if c}
    want = {"op/ulp_exceeded", "op/bad_output", "op/bad_output_dtype", "op/bad_output_shape",
            "op/bad_output_strides", "op/unexpected_success", "op/nondeterministic_op",
            "op/backend_error", "gradient/gradient_mismatch", "gradient/nondeterminism",
            "fused/bound_exceeded", "model/out_of_band"}
    ok(want <= classes, "cases of %d failure classes were validated (missing: %s)" %
       (len(classes), sorted(want - classes)))
    ok(any(c.get("artifact") for (k, _, _), c in seen.items() if k in by_kind),
       "cases with an artifact id were validated")

    # The validator can fail: every mutation of a real case of each kind and
    # verdict (and of each failure class) is rejected by that kind's schema.
    rejected = total = 0
    missed = []
    for (kind, verdict, cls), case in sorted(seen.items(), key=str):
        if kind not in by_kind:
            continue
        ok(not nvschema.errors(by_kind[kind], case),
           "%s case (%s, %s) is valid as %s_case" % (kind, verdict, cls, kind))
        for what, bad in nvschema.mutations(case):
            total += 1
            if nvschema.errors(by_kind[kind], bad):
                rejected += 1
            else:
                missed.append("%s/%s/%s: %s" % (kind, verdict, cls, what))
    ok(total > 50 and rejected == total, "%d of %d mutated cases rejected" % (rejected, total),
       missed)
    # ... and the whole result: a case of another kind, a summary without a count,
    # a long run without its acceptance, a suite run without its results.
    op = res[("op", "passed")]
    grad_case = seen[("gradient", "passed", None)]
    lr = res[("longrun", "failed")]
    broken = [("an op result holding a gradient case", dict(op, cases=[grad_case])),
              ("a summary without 'errors'",
               dict(op, summary={k: v for k, v in op["summary"].items() if k != "errors"})),
              ("a long run without acceptance",
               {k: v for k, v in lr.items() if k != "acceptance"}),
              ("a long run with cases", dict(lr, cases=[])),
              ("a suite run without results", {"suite": "x", "verdict": "passed", "summary": {
                  "jobs": 0, "passed": 0, "failed": 0, "errors": 0, "cases": 0}}),
              ("kind 'training'", dict(lr, kind="training"))]
    for what, doc in broken:
        ok(nvschema.errors(whole, copy.deepcopy(doc)), "rejected: %s" % what)


def main():
    tmp = tempfile.mkdtemp(prefix="numval-schema-")
    try:
        test(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    sys.exit(finish())


if __name__ == "__main__":
    main()
