#!/usr/bin/env python3
"""Gradient jobs of the data-movement ops (docs/JOBS.md "Gradient jobs"):
transpose, split_heads, merge_heads, embedding, flatten and max_pool2d pass every check on emu
(formula, device, second order, double backward) in fp32, bf16 and fp16; a
device whose embedding backward stores each position's gradient row into
its id's row instead of adding it (plugin_fault_embedgrad.c, the classic
missing accumulation) fails the device check wherever ids repeat (32 ids
into 8 rows: the pigeonhole principle guarantees it) and passes where they
cannot (one id), while the formula check (the reference scatter-add
against central differences) passes. The exact sum of repeated rows is
checked by hand in tests/unit/ops/test-backward.c.

usage: test_layout_grad.py NUMVAL_WORKER FAULT_EMBEDGRAD_SO   (TAP)"""
import os
import shutil
import sys
import tempfile

from nvtap import ok, finish
from nvsuite import run_suite, cases

WORKER, FAULT = sys.argv[1:3]
SEEDS = int(os.environ.get("NUMVAL_LAYOUT_GRAD_SEEDS", "5"))


def run(tmp, jobs, backend):
    return run_suite(WORKER, tmp, "layout-grad", jobs, backend, timeout=300)


def jobs(seed):
    dts = ["fp32", "bf16", "fp16"]
    return [
        {"kind": "gradient", "op": "transpose", "dtypes": dts, "shapes": [[3, 5], [2, 4, 7]],
         "inputs": ["normal", "uniform"], "seed": seed, "order": 2},
        {"kind": "gradient", "op": "split_heads", "attrs": {"heads": 4}, "dtypes": dts,
         "shapes": [[6, 32]], "seed": seed, "order": 2},
        {"kind": "gradient", "op": "merge_heads", "dtypes": dts, "shapes": [[4, 6, 8]],
         "seed": seed, "order": 2},
        {"kind": "gradient", "op": "embedding", "dtypes": dts + ["fp64"],
         "shapes": [[[8, 4], [32]], [[50, 8], [3, 4]]], "inputs": ["normal", "uniform"],
         "seed": seed, "order": 2},
        {"kind": "gradient", "op": "embedding", "dtypes": ["fp32"], "shapes": [[[8, 4], [32]]],
         "seed": seed, "mode": "fast"},
        {"kind": "gradient", "op": "flatten", "dtypes": dts, "shapes": [[2, 3, 4, 5]],
         "seed": seed, "order": 2},
        {"kind": "gradient", "op": "max_pool2d", "dtypes": dts, "shapes": [[2, 3, 6, 6]],
         "inputs": ["normal", "uniform"], "seed": seed, "order": 2},
        {"kind": "gradient", "op": "max_pool2d", "attrs": {"kernel": 3, "stride": 2, "padding": 1},
         "dtypes": dts, "shapes": [[1, 2, 7, 9]], "seed": seed, "order": 2},
    ]


def check_emu(tmp):
    bad, count = [], 0
    for seed in range(1, SEEDS + 1):
        rc, doc, err = run(tmp, jobs(seed), "emu")
        for job, c in cases(doc):
            count += 1
            checks = c.get("checks", {})
            want = {"formula", "device"} | ({"second_order", "double_backward"}
                                            if job.get("order") == 2 else set())
            if c["verdict"] != "passed" or not want <= set(checks):
                bad.append("seed %d %s %s: %s %s" % (seed, job["op"], c["dtype"], c["verdict"],
                                                     sorted(checks)))
        if rc != 0:
            bad.append("seed %d: exit %d %s" % (seed, rc, err[-300:]))
    ok(not bad and count > 0, "layout-op gradient jobs: %d cases over %d seeds pass every check "
       "on emu" % (count, SEEDS), "\n".join(bad))


def check_fault(tmp):
    """Repeated ids: the device check fails, naming the weight; one id: passes."""
    bad = []
    for seed in range(1, SEEDS + 1):
        job = {"kind": "gradient", "op": "embedding", "dtypes": ["fp32", "bf16"],
               "shapes": [[[8, 4], [32]]], "seed": seed}
        rc, doc, err = run(tmp, [job], "plugin:" + FAULT)
        cs = list(cases(doc))
        for _, c in cs:
            dev = c.get("checks", {}).get("device", {}).get("weight", {})
            form = c.get("checks", {}).get("formula", {}).get("weight", {})
            if c["verdict"] != "failed" or c.get("failed_checks") != ["device"] or \
                    c.get("failure_class") != "gradient_mismatch" or dev.get("passed") or \
                    not form.get("passed"):
                bad.append("seed %d %s: %s %s %s" % (seed, c["dtype"], c["verdict"],
                                                     c.get("failed_checks"), c.get("failure_class")))
        if rc != 1 or len(cs) != 2:
            bad.append("seed %d repeated ids: exit %d, %d cases" % (seed, rc, len(cs)))
        single = dict(job, shapes=[[[8, 4], [1]]])
        rc, doc, err = run(tmp, [single], "plugin:" + FAULT)
        if rc != 0 or any(c["verdict"] != "passed" for _, c in cases(doc)):
            bad.append("seed %d one id: exit %d %s" % (seed, rc, err[-300:]))
    ok(not bad, "fault_embedgrad (stores instead of adding): the device check fails on every "
       "seed where ids repeat, passes with a single id", "\n".join(bad))


def main():
    tmp = tempfile.mkdtemp(prefix="nv-layout-grad-")
    try:
        check_emu(tmp)
        check_fault(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
