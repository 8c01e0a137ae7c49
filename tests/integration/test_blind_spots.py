#!/usr/bin/env python3
"""Blind spots closed: each one-fault device (tests/unit/backends/plugin_fault_*.c,
emu with one classic kernel bug) runs the shipped smoke suite's jobs of the ops
its bug touches, with every job's seed set to s for several seeds s, and must
fail with the failure class, input class and dtype that catch the bug; emu's
correct mode (--backend emu) must pass the same jobs on every seed (no false
failure). The faults and what catches them:

  maxnan    maximum(x, NaN) = x          specials (every ordered pair):  nan_mismatch
  negzero   +0 for -0 in every result    specials: signed_zero_mismatch (neg, mul, sub)
  naivevar  E[x^2] - E[x]^2 in fp32      offset rows (var, layer_norm):  bound_exceeded,
                                         with x^2 far from overflow
  sigmoid   PyTorch 1.13 fp32 sigmoid/silu = 0 / -0 below -88.72 (bf16 sigmoid too)
                                         sweep of fp32 (sigmoid, silu), exhaustive bf16
                                         (sigmoid):                      ulp_exceeded
  tanh      tanh = +-1 for |x| > 4       domain_edges (fp32, fp16) and the fp32 sweep:
                                         ulp_exceeded

maxnan, naivevar and sigmoid are also shown to be invisible to the classes the
smoke suite had before (normal, uniform, near_zero, large, midpoints,
cancellation): the new class is what catches them. negzero was invisible to the
comparison itself (0 ulps off); its failures here are 0 ulps off and counted in
zero_sign_mismatches. Seeds: 5 by default (a few seconds each);
NUMVAL_BLIND_SPOT_SEEDS=20 meson test -C build blind-spots runs 20.

usage: test_blind_spots.py NUMVAL_WORKER SOURCE_ROOT NAME=PLUGIN.so ..."""
import copy
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

WORKER, ROOT = sys.argv[1], sys.argv[2]
PLUGINS = dict(a.split("=", 1) for a in sys.argv[3:])
SEEDS = list(range(1, int(os.environ.get("NUMVAL_BLIND_SPOT_SEEDS", "5")) + 1))
OLD_CLASSES = {"normal", "uniform", "near_zero", "large", "midpoints", "cancellation"}
# Faults no class the smoke suite had before can show (the +0-for--0 device was
# blind to the comparison, not to the classes: near_zero products that underflow
# to -0 show it now too; a tanh saturating at 4 is met by normal values by chance,
# about once in 16000).
ONLY_NEW = {"maxnan", "naivevar", "sigmoid"}
FAILS = 0

# fault -> (ops whose smoke jobs run, [(op, failure_class, input class, dtype)] that
# must each be among the failed cases)
FAULTS = {
    "maxnan": (["maximum"], [("maximum", "nan_mismatch", "specials", d)
                             for d in ("fp32", "bf16", "fp16")] +
               [("maximum", "nan_mismatch", "exhaustive", d) for d in ("bf16", "fp16")]),
    "negzero": (["neg", "mul", "sub"], [(op, "signed_zero_mismatch", "specials", d)
                                        for op in ("neg", "mul", "sub")
                                        for d in ("fp32", "bf16", "fp16")]),
    "naivevar": (["var", "layer_norm"], [("var", "bound_exceeded", "offset", "fp32"),
                                         ("layer_norm", "bound_exceeded", "offset", "fp32")]),
    "sigmoid": (["sigmoid", "silu"], [("sigmoid", "ulp_exceeded", "sweep", "fp32"),
                                      ("sigmoid", "ulp_exceeded", "exhaustive", "bf16"),
                                      ("silu", "ulp_exceeded", "sweep", "fp32")]),
    "tanh": (["tanh"], [("tanh", "ulp_exceeded", "domain_edges", "fp32"),
                        ("tanh", "ulp_exceeded", "domain_edges", "fp16"),
                        ("tanh", "ulp_exceeded", "sweep", "fp32"),
                        ("tanh", "ulp_exceeded", "exhaustive", "fp16")]),
}


def ok(cond, what):
    global FAILS
    print(("ok - " if cond else "not ok - ") + what, flush=True)
    if not cond:
        FAILS += 1


def smoke_jobs(ops):
    with open(os.path.join(ROOT, "suites", "smoke.json")) as f:
        suite = json.load(f)
    return [j for j in suite["jobs"] if j.get("op") in ops]


def run_suite(tmp, jobs, seed, backend):
    jobs = copy.deepcopy(jobs)
    for j in jobs:
        j["seed"] = seed
        j.pop("expect_error", None)  # invalid-input cases judge refusals, not values
    path = os.path.join(tmp, "suite.json")
    out = os.path.join(tmp, "out.json")
    with open(path, "w") as f:
        json.dump({"name": "blind-spots", "jobs": jobs}, f)
    p = subprocess.run([WORKER, "run", path, "--backend", backend, "--threads", "2",
                        "--output", out], capture_output=True, text=True, timeout=240)
    if p.returncode not in (0, 1):
        print("# numval-worker exit %d: %s" % (p.returncode, p.stderr[-2000:]), flush=True)
        return p.returncode, None
    with open(out) as f:
        return p.returncode, json.load(f)


def cases(result):
    for job in result["results"]:
        for c in job.get("cases", []):
            yield job["op"], c


def check_fault(tmp, name):
    ops, expect = FAULTS[name]
    jobs = smoke_jobs(ops)
    ok(len(jobs) >= len(ops), "%s: smoke.json has jobs of %s" % (name, ", ".join(ops)))
    backend = "plugin:" + PLUGINS[name]
    for seed in SEEDS:
        rc, res = run_suite(tmp, jobs, seed, backend)
        if res is None:
            ok(False, "%s seed %d: the run produced a result" % (name, seed))
            continue
        failed = {(op, c.get("failure_class"), c["input"], c["dtype"])
                  for op, c in cases(res) if c["verdict"] == "failed"}
        errors = [c for _, c in cases(res) if c["verdict"] == "error"]
        missing = [e for e in expect if e not in failed]
        ok(rc == 1 and not missing and not errors,
           "%s seed %d: caught as %s (missing %s, %d errors)" %
           (name, seed, sorted({f[1] for f in failed}), missing, len(errors)))
        if name in ONLY_NEW:
            old = sorted(f for f in failed if f[2] in OLD_CLASSES)
            ok(not old, "%s seed %d: the classes smoke had before see nothing (%s)" %
               (name, seed, old))
        if name == "naivevar":
            # Caught without overflow: no infinity or NaN anywhere in the failures.
            nonfinite = [c for _, c in cases(res) if c.get("inf_mismatches") or
                         c.get("nan_mismatches")]
            ok(not nonfinite, "naivevar seed %d: no inf/nan mismatch (x^2 does not overflow)"
               % seed)
        if name == "negzero":
            zc = [c for op, c in cases(res) if c.get("failure_class") == "signed_zero_mismatch"]
            # +0 where the exact value is -0 or a negative value that rounds to -0
            # (a product underflowing): within the tolerance, only the sign wrong.
            ok(zc and all(c["zero_sign_mismatches"] == c["mismatches"] > 0 and
                          all(m["kind"] == "signed_zero_mismatch" and m["got"] == 0 and
                              math.copysign(1, m["got"]) > 0 and
                              math.copysign(1, m["exact"]) < 0 and
                              m["ulp_error"] <= 0.5 for m in c["first_mismatches"])
                          for c in zc),
               "negzero seed %d: zero_sign_mismatches counted, +0 for -0 or -tiny, within "
               "0.5 ulp" % seed)


def check_emu(tmp):
    ops = sorted({op for o, _ in FAULTS.values() for op in o})
    jobs = smoke_jobs(ops)
    for seed in SEEDS:
        rc, res = run_suite(tmp, jobs, seed, "emu")
        bad = [] if res is None else [(op, c["dtype"], c["input"], c.get("failure_class"))
                                      for op, c in cases(res) if c["verdict"] != "passed"]
        ok(rc == 0 and res is not None and res["verdict"] == "passed",
           "emu seed %d: the same %d jobs pass (%s)" % (seed, len(jobs), bad[:4]))


def main():
    ok(set(PLUGINS) == set(FAULTS), "plugins given: %s" % sorted(PLUGINS))
    tmp = tempfile.mkdtemp(prefix="nv-blind-")
    try:
        for name in sorted(FAULTS):
            if name in PLUGINS:
                check_fault(tmp, name)
        check_emu(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("# %d seeds: %s; %d checks failed" % (len(SEEDS), SEEDS, FAILS))
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
