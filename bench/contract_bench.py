#!/usr/bin/env python3
"""The full contract of a device: numval-worker run of {"kind": "contract"}
(every float dtype, every probe family; 16-bit dtypes' transcendentals
exhaustive, fp32 and fp64 by a 4096-point sweep per function: the fp32
exhaustive sweep is excluded, as the task allows) on several emu modes, each
3 times; prints a markdown table of wall and CPU time (best of 3) beside the
60 s budget. The peer column stays empty: no other tool that
measures a device's contract from its outputs (FPRev, Xie et al. 2024, is a
Python package outside Debian 12) is installed on this machine.

usage: contract_bench.py NUMVAL_WORKER [THREADS]"""
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

WORKER = sys.argv[1]
THREADS = sys.argv[2] if len(sys.argv) > 2 else "2"
MODES = ["emu", "emu:transcendental=libm", "emu:transcendental=fast,ftz=on,daz=on",
         "emu:accum=bf16,reduce=tree:8,rounding=rtz", "emu:rounding=stochastic,saturate=on",
         "emu:accum=fp64,reduce=splitk:16,fma=off"]


def one(path, backend):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    p = subprocess.run([WORKER, "run", path, "--backend", backend, "--threads", THREADS],
                       capture_output=True, text=True)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if p.returncode not in (0, 1):
        sys.exit("%s: exit %d: %s" % (backend, p.returncode, p.stderr[-500:]))
    r = json.loads(p.stdout)
    return wall, cpu, r


def main():
    fd, path = tempfile.mkstemp(suffix=".json")
    with os.fdopen(fd, "w") as f:
        json.dump({"kind": "contract"}, f)
    try:
        print("| device | probes | judged fields | mismatches | wall (best of 3) | CPU | "
              "budget | peer |")
        print("|---|---|---|---|---|---|---|---|")
        for m in MODES:
            runs = [one(path, m) for _ in range(3)]
            wall = min(r[0] for r in runs)
            cpu = min(r[1] for r in runs)
            r = runs[0][2]
            print("| `%s` | %d | %d | %d | %.2f s | %.2f s | 60 s | n/a |" % (
                m, r["probes"], r["summary"]["cases"], r["summary"]["failed"], wall, cpu),
                flush=True)
    finally:
        os.unlink(path)


if __name__ == "__main__":
    main()
