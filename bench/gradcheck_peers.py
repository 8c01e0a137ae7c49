#!/usr/bin/python3
"""numval's gradient formula check vs torch.autograd.gradcheck, side by side.

Usage: /usr/bin/python3 bench/gradcheck_peers.py BUILD/bench/gradcheck_bench [--quick]
(Debian's python3-torch is importable only from /usr/bin/python3.)

Both sides check the analytic backward of tanh, softmax (last axis) and
layer_norm (last axis, weight and bias) against central differences in fp64
(eps 1e-6, atol 1e-5, rtol 1e-3) on [n] (tanh) or [sqrt n, sqrt n] inputs:
- full: torch builds the whole numerical and analytical Jacobian of every input
  and compares every element; numval compares every structurally non-zero
  element and verifies the declared zero blocks with 4 random probes per input.
- fast: one projection v^T J u per input on both sides (torch fast_mode=True).
torch runs with check_undefined_grad=False (and the batched/forward-AD checks
off, their defaults), so it does only the Jacobian comparison numval does.
Timings: process CPU time (the machine may be shared; wall time would charge
each side for other processes) of batches of k checks, k doubled until a batch
takes at least 2 ms on numval's side (bench/gradcheck_bench.c) and 20 ms on
torch's, then batches until the time budget is spent; the per-check time is the
best batch's time over its k (one check for torch full at 4096, ~10-20 s each).
torch runs with 1 intra-op thread, numval in one thread. The header prints the
date, the load average (/proc/loadavg) before and after, the machine and the
numerical mode.
"""
import datetime
import json
import os
import platform
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

EPS, ATOL, RTOL = 1e-6, 1e-5, 1e-3


def torch_fn(op, n):
    r = int(round(n ** 0.5))
    g = torch.Generator().manual_seed(42)
    if op == "tanh":
        x = torch.randn(n, dtype=torch.float64, generator=g, requires_grad=True)
        return torch.tanh, (x,)
    x = torch.randn(r, r, dtype=torch.float64, generator=g, requires_grad=True)
    if op == "softmax":
        return (lambda t: torch.softmax(t, -1)), (x,)
    w = torch.randn(r, dtype=torch.float64, generator=g, requires_grad=True)
    b = torch.randn(r, dtype=torch.float64, generator=g, requires_grad=True)
    return (lambda t, ww, bb: F.layer_norm(t, (r,), ww, bb, 1e-5)), (x, w, b)


MIN_BATCH_S = 0.02


def time_torch(op, n, fast, budget):
    """Per-check CPU seconds (best batch / its k) and the verdict."""
    fn, args = torch_fn(op, n)
    best, total, k = float("inf"), 0.0, 1
    while best == float("inf") or total < budget:
        t0 = time.process_time()
        for _ in range(k):
            ok = torch.autograd.gradcheck(fn, args, eps=EPS, atol=ATOL, rtol=RTOL,
                                          check_undefined_grad=False, fast_mode=fast)
        dt = time.process_time() - t0
        total += dt
        if dt < MIN_BATCH_S and budget > 0:
            k *= 2
            continue
        best = min(best, dt / k)
    return best, ok


def loadavg():
    try:
        return open("/proc/loadavg").read().strip()
    except OSError:
        return "unknown"


def ratio(t, ours):
    return f"{t / ours:>9.0f}x" if ours > 0 and t > 0 else f"{'n/a':>10}"


def main():
    bench = sys.argv[1]
    quick = "--quick" in sys.argv
    torch.set_num_threads(1)
    cpu = ""
    try:
        cpu = [l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
               if l.startswith("model name")][0]
    except (OSError, IndexError):
        pass
    now = datetime.datetime.now(datetime.timezone.utc)
    print(f"date: {now:%Y-%m-%d %H:%M:%S} UTC")
    print(f"load average (start): {loadavg()}")
    print(f"machine: {cpu} ({os.cpu_count()} cpus), {platform.platform()}")
    print(f"torch {torch.__version__} (1 thread), numval: fp64 checks in one thread")
    print(f"numerical mode: fp64 analytic backward vs central differences of the fp64 "
          f"forward, eps {EPS:g}, atol {ATOL:g}, rtol {RTOL:g} "
          f"(|analytic - numeric| <= atol + rtol |numeric|)")
    print("time: process CPU time per check, best batch (numval >= 0.2 s per row; "
          "torch 0.5 s, one check at 4096 full)")
    p = subprocess.run([bench, "0.2"], capture_output=True, text=True, check=True)
    ours = {(d["op"], d["n"], d["mode"]): d for d in map(json.loads, p.stdout.splitlines())}
    print(f"numval bench: {bench}")
    print(f"{'op':<11}{'n':>6} {'mode':<5}{'numval us':>12}{'torch us':>14}{'speedup':>10}"
          f"{'numval checked':>16}{'fwd/vjp':>10}{'both pass':>10}")
    for (op, n, mode), d in ours.items():
        if quick and n == 4096 and mode == "full":
            continue
        t, ok = time_torch(op, n, mode == "fast", 0.5 if mode == "fast" or n < 4096 else 0)
        calls = f"{d['forward_calls']}/{d['vjp_calls']}"
        print(f"{op:<11}{n:>6} {mode:<5}{d['seconds'] * 1e6:>12.2f}{t * 1e6:>14.1f}"
              f"{ratio(t, d['seconds'])}{d['checked']:>16}{calls:>10}"
              f"{str(d['passed'] and ok):>10}", flush=True)
    print(f"load average (end): {loadavg()}")


if __name__ == "__main__":
    main()
