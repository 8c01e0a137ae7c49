#!/usr/bin/env python3
"""Gradient and op jobs of conv2d and avg_pool2d (docs/JOBS.md "Gradient
jobs", docs/MODEL.md "The CNN classifier"): the conv2d and avg_pool2d jobs of
the shipped suites/gradient.json (plain, strided + padded + dilated, groups 2,
depthwise, avg_pool2d with and without count_include_pad, with ceil_mode and
with divisor_override) pass every check on
emu (formula, device, second order, double backward) for every seed, also
with pairwise and random summation orders and fused multiply-adds; the long
weight-gradient job fails its device check when emu accumulates in bf16; and a
device with the classic conv2d backward bugs (plugin_fault_convgrad.c: the
input gradient with the un-flipped kernel, the weight gradient without the
padding term) fails the device check on exactly the gradient each bug
touches: a 3x3 kernel without padding fails on x only, a 1x1 kernel (its own
rotation) with padding 1 on the weight only, a 1x1 kernel without padding
passes; the formula check (the reference against central differences)
passes throughout. Op jobs of grouped and depthwise conv2d and of avg_pool2d
pass on emu and fail with bf16 accumulation; bad groups are refused naming
the shapes.

usage: test_conv_grad.py NUMVAL_WORKER FAULT_CONVGRAD_SO SOURCE_ROOT   (TAP)"""
import json
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nvtap import ok, finish  # noqa: E402
from nvsuite import run_suite, cases  # noqa: E402

WORKER, FAULT, ROOT = sys.argv[1:4]
SEEDS = int(os.environ.get("NUMVAL_CONV_GRAD_SEEDS", "3"))


def run(tmp, jobs, backend):
    return run_suite(WORKER, tmp, "conv-grad", jobs, backend, timeout=280)


def suite_jobs():
    with open(os.path.join(ROOT, "suites", "gradient.json")) as f:
        return [j for j in json.load(f)["jobs"] if j["op"] in ("conv2d", "avg_pool2d")]


def check_suite(tmp):
    jobs = suite_jobs()
    ops = {(j["op"], json.dumps(j.get("attrs", {}), sort_keys=True)) for j in jobs}
    ok(len(jobs) == 10 and any('"groups": 3' in a for _, a in ops) and
       any("count_include_pad" in a for _, a in ops) and any("ceil_mode" in a for _, a in ops) and
       any("divisor_override" in a for _, a in ops),
       "suites/gradient.json holds conv2d (plain, strided, grouped, depthwise, long) and "
       "avg_pool2d jobs (count_include_pad, ceil_mode, divisor_override)", ops)
    bad, count = [], 0
    for seed in range(1, SEEDS + 1):
        rc, doc, err = run(tmp, [dict(j, seed=seed) for j in jobs], "emu")
        for job, c in cases(doc):
            count += 1
            want = {"formula", "device"} | ({"second_order", "double_backward"}
                                            if job.get("order") == 2 else set())
            if c["verdict"] != "passed" or not want <= set(c.get("checks", {})):
                bad.append("seed %d %s %s %s: %s %s" % (seed, job["op"], job.get("attrs"),
                                                        c["dtype"], c["verdict"],
                                                        c.get("failed_checks")))
        if rc != 0:
            bad.append("seed %d: exit %d %s" % (seed, rc, err[-300:]))
    ok(not bad and count >= 20 * SEEDS, "the suite's conv2d and avg_pool2d gradient jobs: %d "
       "cases over %d seeds pass every check on emu" % (count, SEEDS), "\n".join(bad))
    # other correct modes: every summation order is within the defaults
    bad = []
    for mode in ("emu:reduce=pairwise", "emu:reduce=random", "emu:fma=on"):
        rc, doc, err = run(tmp, jobs, mode)
        cs = list(cases(doc))
        if rc != 0 or len(cs) < 20 or any(c["verdict"] != "passed" for _, c in cs):
            bad.append("%s: exit %d, %s" % (mode, rc, [(j["op"], c["dtype"], c.get("failed_checks"))
                                                      for j, c in cs if c["verdict"] != "passed"]))
    ok(not bad, "the same jobs pass with pairwise and random summation orders and fused "
       "multiply-adds", "\n".join(bad))
    long_job = [j for j in jobs if j.get("mode") == "fast"]
    rc, doc, err = run(tmp, long_job, "emu:accum=bf16")
    cs = list(cases(doc))
    dev = [c.get("checks", {}).get("device", {}) for _, c in cs]
    ok(rc == 1 and len(cs) == 1 and cs[0][1]["failed_checks"] == ["device"] and
       not dev[0]["weight"]["passed"],
       "the long weight gradient (3872 terms) fails the device check with bf16 accumulation",
       json.dumps(dev)[:800])


def fault_case(tmp, attrs, shapes, seed):
    job = {"kind": "gradient", "op": "conv2d", "attrs": attrs, "dtypes": ["fp32", "bf16"],
           "shapes": shapes, "seed": seed}
    rc, doc, err = run(tmp, [job], "plugin:" + FAULT)
    out = []
    for _, c in cases(doc):
        dev = c.get("checks", {}).get("device", {})
        form = c.get("checks", {}).get("formula", {})
        out.append((dev.get("x", {}).get("passed"), dev.get("weight", {}).get("passed"),
                    all(f.get("passed") for f in form.values()) and len(form) == 2,
                    c.get("failure_class")))
    return rc, out, err


def check_fault(tmp):
    """Each bug fails the gradient it touches; shapes that hide both pass."""
    bad = []
    # (attrs, shapes, x passes, weight passes)
    variants = [
        ({}, [[[1, 2, 6, 6], [3, 2, 3, 3]]], False, True),
        ({"groups": 2, "stride": 2}, [[[2, 4, 7, 7], [4, 2, 3, 2]]], False, True),
        ({"padding": 1}, [[[1, 2, 5, 5], [3, 2, 1, 1]]], True, False),
        ({"padding": 1, "groups": 3}, [[[1, 3, 5, 4], [3, 1, 1, 1]]], True, False),
        ({}, [[[1, 2, 5, 5], [3, 2, 1, 1]]], True, True),
    ]
    for seed in range(1, SEEDS + 1):
        for attrs, shapes, want_x, want_w in variants:
            rc, res, err = fault_case(tmp, attrs, shapes, seed)
            passes = want_x and want_w
            good = len(res) == 2 and rc == (0 if passes else 1) and all(
                x == want_x and w == want_w and form and
                (cls is None if passes else cls == "gradient_mismatch")
                for x, w, form, cls in res)
            if not good:
                bad.append("seed %d %s %s: exit %d %s %s" % (seed, attrs, shapes, rc, res,
                                                              err[-200:]))
    ok(not bad, "fault_convgrad: the un-flipped kernel fails the input gradient, the dropped "
       "padding the weight gradient, a 1x1 kernel without padding passes (%d seeds)" % SEEDS,
       "\n".join(bad))


OP_JOBS = [
    {"kind": "op", "op": "conv2d", "attrs": {"groups": 2, "padding": 1}, "dtypes": ["fp32", "bf16"],
     "shapes": [[[2, 4, 8, 8], [6, 2, 3, 3]]], "inputs": ["normal", "uniform"]},
    {"kind": "op", "op": "conv2d", "attrs": {"groups": 8, "padding": 1, "stride": 2},
     "dtypes": ["fp32", "bf16"], "shapes": [[[1, 8, 9, 9], [8, 1, 3, 3]]], "inputs": ["normal"]},
    {"kind": "op", "op": "conv2d", "attrs": {"groups": 2, "stride": 2, "dilation": 2},
     "dtypes": ["fp32"], "shapes": [[[1, 64, 9, 7], [4, 32, 3, 2]]], "inputs": ["normal"]},
    {"kind": "op", "op": "avg_pool2d", "dtypes": ["fp32", "bf16"], "shapes": [[2, 3, 8, 8]],
     "inputs": ["normal", "specials"], "layouts": ["contiguous", "strided"]},
    {"kind": "op", "op": "avg_pool2d", "attrs": {"kernel": 3, "stride": 2, "padding": 1,
                                                 "count_include_pad": False},
     "dtypes": ["fp32", "bf16", "fp16"], "shapes": [[1, 2, 7, 9]], "inputs": ["normal", "uniform"]},
    {"kind": "op", "op": "avg_pool2d", "attrs": {"kernel": 8}, "dtypes": ["fp32"],
     "shapes": [[4, 16, 8, 8]], "inputs": ["uniform"]},
    {"kind": "op", "op": "avg_pool2d", "attrs": {"kernel": 3, "stride": 2, "padding": 1,
                                                 "ceil_mode": True},
     "dtypes": ["fp32", "bf16"], "shapes": [[1, 2, 8, 10]], "inputs": ["normal", "uniform"]},
    {"kind": "op", "op": "avg_pool2d", "attrs": {"kernel": 3, "ceil_mode": True,
                                                 "count_include_pad": False,
                                                 "divisor_override": 5},
     "dtypes": ["fp32", "bf16"], "shapes": [[2, 3, 7, 8]], "inputs": ["normal"]},
]


def check_ops(tmp):
    bad = []
    for seed in (1, 2):
        jobs = [dict(j, seed=seed) for j in OP_JOBS]
        rc, doc, err = run(tmp, jobs, "emu")
        cs = list(cases(doc))
        if rc != 0 or not cs or any(c["verdict"] != "passed" for _, c in cs):
            bad.append("emu seed %d: exit %d %s" % (seed, rc, err[-300:]))
        rc, doc, err = run(tmp, jobs, "emu:accum=bf16")
        # the dot products of 18 .. 192 terms and the 64-term window mean of
        # uniform values lose bf16 bits
        long_ops = [c for j, c in cases(doc) if j["op"] == "conv2d" and c["dtype"] == "fp32"
                    and j["attrs"].get("groups") == 2] + \
                   [c for j, c in cases(doc) if j.get("attrs", {}).get("kernel") == 8]
        if rc != 1 or len(long_ops) != 4 or any(c["verdict"] != "failed" for c in long_ops):
            bad.append("bf16 accumulation seed %d: exit %d, %s" %
                       (seed, rc, [(c["dtype"], c["verdict"]) for c in long_ops]))
    ok(not bad, "grouped and depthwise conv2d and avg_pool2d op jobs pass on emu; the long "
       "ones fail with bf16 accumulation", "\n".join(bad))
    refused = []
    for attrs, shapes, words in [
            ({"groups": 3}, [[[1, 4, 5, 5], [6, 1, 3, 3]]], "groups (3) must divide"),
            ({"groups": 2}, [[[1, 4, 5, 5], [6, 4, 3, 3]]], "C / groups = 4 / 2 = 2"),
            ({"groups": 0}, [[[1, 4, 5, 5], [6, 4, 3, 3]]], "'groups' must be an integer")]:
        rc, doc, err = run(tmp, [{"kind": "op", "op": "conv2d", "attrs": attrs,
                                  "dtypes": ["fp32"], "shapes": shapes}], "emu")
        if rc != 2 or words not in err:
            refused.append("%s %s: exit %d %s" % (attrs, shapes, rc, err[-300:]))
    ok(not refused, "bad groups are refused with the shapes named", "\n".join(refused))


def main():
    tmp = tempfile.mkdtemp(prefix="nv-conv-grad-")
    try:
        check_suite(tmp)
        check_fault(tmp)
        check_ops(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
