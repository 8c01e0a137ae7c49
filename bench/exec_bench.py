#!/usr/bin/python3
"""Cases per second through the exec protocol vs the in-process emu backend, for
10^5-element fp32 cases. Run by bench/exec_bench.sh.

Each (backend, op) runs the same job with SMALL and LARGE samples, REPEAT times;
per-case figures are (LARGE run - SMALL run) / (LARGE - SMALL), so process and
harness start-up (importing torch) is not counted. Reported per case:
  wall     fastest wall clock of the REPEAT runs (this 2-core VM is shared: wall
           time includes waiting for a core at every pipe hand-off)
  cpu      CPU seconds of the worker (getrusage of the child) plus the harness's
           own after its hello (it appends user/sys at exit to
           $NUMVAL_HARNESS_RUSAGE; its imports are excluded, their cost varies by
           seconds between runs): the work done, independent of how busy the
           machine is.
Backends: emu; exec echo (bench/exec_echo_harness.py: the protocol alone);
exec torch (worker/harness/torch_harness.py --device cpu)."""
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build-torch")
WORKER = os.path.join(BUILD, "worker", "numval-worker")
PY = "/usr/bin/python3"
SMALL, LARGE = int(os.environ.get("SMALL", 2)), int(os.environ.get("LARGE", 22))
REPEAT = int(os.environ.get("REPEAT", 3))
ECHO = "exec:%s %s" % (PY, os.path.join(ROOT, "bench/exec_echo_harness.py"))
TORCH = "exec:%s %s --device cpu" % (PY, os.path.join(ROOT, "worker/harness/torch_harness.py"))


def one(tmp, op, samples, backend):
    path = os.path.join(tmp, "job.json")
    with open(path, "w") as f:
        json.dump({"kind": "op", "op": op, "dtypes": ["fp32"], "shapes": [[100000]],
                   "inputs": ["normal"], "samples": samples, "seed": 3}, f)
    ru = os.path.join(tmp, "rusage.txt")
    if os.path.exists(ru):
        os.unlink(ru)
    env = dict(os.environ, NUMVAL_HARNESS_RUSAGE=ru, NUMVAL_EXEC_TIMEOUT="300")
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    p = subprocess.run([WORKER, "run", path, "--backend", backend, "--threads", "1"],
                       capture_output=True, text=True, env=env, timeout=1800)
    wall = time.monotonic() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    res = json.loads(p.stdout)
    if res["summary"]["errors"]:
        sys.exit("%s errored: %s" % (backend, p.stderr[-500:]))
    cpu = (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime)
    if backend.startswith("exec:"):
        deadline = time.monotonic() + 60  # the harness writes its line when it exits
        while not os.path.exists(ru) and time.monotonic() < deadline:
            time.sleep(0.1)
        with open(ru) as f:
            cpu += sum(float(x) for x in f.read().split())
    return wall, cpu


def per_case(tmp, op, backend):
    small = [one(tmp, op, SMALL, backend) for _ in range(REPEAT)]
    large = [one(tmp, op, LARGE, backend) for _ in range(REPEAT)]
    n = LARGE - SMALL
    wall = (min(w for w, _ in large) - min(w for w, _ in small)) / n
    cpu = (min(c for _, c in large) - min(c for _, c in small)) / n
    return wall, cpu


def main():
    rows = [("emu (in process)", "neg", "emu"),
            ("exec: echo harness (protocol only)", "neg", ECHO),
            ("exec: torch --device cpu", "neg", TORCH),
            ("emu (in process)", "exp", "emu"),
            ("exec: torch --device cpu", "exp", TORCH)]
    base = {}
    print("| backend | op (fp32, 10^5 elements) | wall per case | cases/s (wall) "
          "| CPU per case (worker + harness) | CPU vs emu |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="numval-execbench-") as tmp:
        for label, op, backend in rows:
            wall, cpu = per_case(tmp, op, backend)
            base.setdefault(op, cpu)
            print("| %s | %s | %.1f ms | %.1f | %.1f ms | %+.0f%% |" % (
                label, op, wall * 1e3, 1 / wall, cpu * 1e3, (cpu / base[op] - 1) * 100),
                flush=True)
    print("\n(SMALL=%d LARGE=%d REPEAT=%d; load average at the end: %s)" % (
        SMALL, LARGE, REPEAT, open("/proc/loadavg").read().split()[0]))


if __name__ == "__main__":
    main()
