#!/usr/bin/env python3
"""Reproducers without a daemon: numval-worker run on a job of 2^20
fp32 elements catches the dropsum plugin's injected fault (element 5000 of an
axis longer than 4096 is skipped); the failure artifact replays bit for bit with
`numval-worker repro`; `numval-worker minimize` gates it (5/5 runs fail) and
reduces it to one non-neutral element; the minimized artifact replays on the
faulty device and passes on the fixed one and on emu; a crashing backend costs
probes, not the worker; a broken artifact is refused with a message naming
what is missing.

Why the reproducer keeps 5001 elements: the fault only exists for axis length
> 4096, so no reproducer with at most 64 elements in total can show it. The
minimizer keeps positions and replaces elements by the op's neutral value (0
for sum); a reproducer's size is its number of non-neutral elements, asserted
<= 64 here (it is 1: the element at position 5000).

usage: test_minimize.py NUMVAL_WORKER PLUGIN_DROPSUM_SO"""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

from nvartifact import decode as decode_artifact

WORKER, PLUGIN = sys.argv[1], sys.argv[2]
FAILS = 0


def decode(path):
    return decode_artifact(path=path)


def ok(cond, what):
    global FAILS
    print(("ok - " if cond else "not ok - ") + what, flush=True)
    if not cond:
        FAILS += 1


def run(args, timeout=120):
    p = subprocess.run([WORKER] + args, capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def main():
    tmp = tempfile.mkdtemp(prefix="nv-minimize-")
    try:
        faulty = "plugin:%s?fault=drop" % PLUGIN
        fixed = "plugin:%s?fault=none" % PLUGIN
        # 128 rows of 8192: 2^20 elements. Tolerance: Higham's pairwise bound
        # (log2 n) — the plugin accumulates in fp64 and rounds once, so its
        # correct sums are within 0.5 ulp of fp32 plus ~n 2^-53 sum|x|, far
        # inside; a dropped element of size ~1 exceeds it by orders of magnitude.
        job = {"kind": "op", "op": "sum", "dtypes": ["fp32"], "shapes": [[128, 8192]],
               "inputs": ["normal"], "seed": 11, "attrs": {"axis": -1},
               "tolerance": {"metric": "bound", "c": 1, "growth": "log2n",
                             "reason_code": "reduction_length",
                             "reason": "pairwise-or-better fp32 summation, Higham 4.2"}}
        jpath = os.path.join(tmp, "job.json")
        with open(jpath, "w") as f:
            json.dump(job, f)
        adir = os.path.join(tmp, "art")
        os.mkdir(adir)
        rc, out, err = run(["run", jpath, "--backend", faulty, "--artifacts", adir])
        res = json.loads(out)
        ok(rc == 1 and res["verdict"] == "failed", "the 2^20-element job fails on the faulty device")
        case = res["cases"][0]
        ok(case.get("failure_class") == "bound_exceeded", "failure class bound_exceeded")
        art = os.path.join(adir, case["artifact"] + ".nvart")
        ok(os.path.exists(art), "run --artifacts wrote the case's artifact")
        rc2, _, _ = run(["run", jpath, "--backend", fixed])
        ok(rc2 == 0, "the same job passes on the fixed device")

        # repro: bit for bit with the stored device output, from the artifact alone.
        only = os.path.join(tmp, "only")
        os.mkdir(only)
        shutil.copy(art, os.path.join(only, "case.nvart"))
        rc, out, err = run(["repro", os.path.join(only, "case.nvart"), "--backend", faulty])
        rj = json.loads(out)
        ok(rc == 1 and rj["still_fails"] and rj["failed"] == 5 and rj["bit_identical"] == 5,
           "repro: fails 5/5 runs, output bit-identical 5/5: %s" % err.strip())
        rc, out, _ = run(["repro", os.path.join(only, "case.nvart"), "--backend", fixed])
        ok(rc == 0 and json.loads(out)["failed"] == 0, "repro on the fixed device: passes")

        # minimize
        mpath = os.path.join(tmp, "min.nvart")
        rc, out, err = run(["minimize", art, "--backend", faulty, "-o", mpath], timeout=150)
        mj = json.loads(out)
        print("# " + err.strip().replace("\n", "\n# "))
        ok(rc == 1 and mj["verified"] and not mj["flaky"], "minimize: verified reproducer")
        ok(mj["repro_rate"] == {"runs": 5, "failed": 5, "bit_identical": 5}, "gate 5/5")
        ok(mj["non_neutral_after"] <= 64, "non-neutral elements %d <= 64" % mj["non_neutral_after"])
        man, tensors = decode(mpath)
        x = tensors["input:0"]
        vals = struct.unpack("<%df" % (len(x[2]) // 4), x[2])
        nz = [(i, v) for i, v in enumerate(vals) if v != 0]
        # Hand-derived: only position 5000 of a row can matter, and the row must
        # be longer than 4096 and reach position 5000, so the shortest window is
        # 5001 elements with one non-zero element at index 5000.
        ok(x[1] == [1, 5001], "minimized shape [1, 5001] (got %s)" % x[1])
        ok(len(nz) == 1 and nz[0][0] == 5000, "one non-zero element, at 5000: %s" % nz[:3])
        ok(nz and nz[0][1] == 1.0, "its value simplified to 1")
        ok(man.get("minimized_from") == case["artifact"], "manifest minimized_from")
        ok(man["signature"]["failure_class"] == "bound_exceeded" and
           len(man["signature"]["id"]) == 64, "manifest signature")
        sig = man["signature"]["id"]
        rc, out, _ = run(["repro", mpath, "--backend", faulty])
        ok(rc == 1 and json.loads(out)["bit_identical"] == 5, "minimized replays bit for bit")
        rc, out, _ = run(["repro", mpath, "--backend", fixed])
        ok(rc == 0, "minimized passes on the fixed device")
        rc, out, _ = run(["repro", mpath, "--backend", "emu"])
        ok(rc == 0, "minimized passes on emu")

        # Same fault, another seed: the same signature (dedup key).
        job2 = dict(job, seed=12)
        with open(jpath, "w") as f:
            json.dump(job2, f)
        adir2 = os.path.join(tmp, "art2")
        os.mkdir(adir2)
        rc, out, _ = run(["run", jpath, "--backend", faulty, "--artifacts", adir2])
        a2 = os.path.join(adir2, json.loads(out)["cases"][0]["artifact"] + ".nvart")
        rc, out, _ = run(["minimize", a2, "--backend", faulty, "--quiet"], timeout=150)
        ok(json.loads(out)["signature"]["id"] == sig, "second job: same signature")

        # A crashing backend: probes die, the worker does not.
        crash = "plugin:%s?fault=crash" % PLUGIN
        rc, out, err = run(["repro", mpath, "--backend", crash, "--runs", "2"])
        rj = json.loads(out)
        ok(rc == 0 and rj["class"] == "crash" and "signal 6" in rj["message"],
           "crash isolated in the probe: %s" % rj.get("message"))

        # Broken artifacts are refused, naming what is missing.
        rc, _, err = run(["repro", os.path.join(tmp, "job.json"), "--backend", faulty])
        ok(rc == 2 and "not a valid artifact" in err, "a non-artifact is refused: %s" % err.strip())
        with open(mpath, "rb") as f:
            data = f.read()
        trunc = os.path.join(tmp, "trunc.nvart")
        with open(trunc, "wb") as f:
            f.write(data[:len(data) // 2])
        rc, _, err = run(["repro", trunc, "--backend", faulty])
        ok(rc == 2 and "trunc.nvart" in err, "a truncated artifact is refused: %s" % err.strip())
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("# %d failed" % FAILS)
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
