#!/usr/bin/python3
"""Device-driven training steps/s: numval (numval-worker run, the PyTorch
harness doing each whole step, numval checking each against its reference
step) beside plain torch training of the same model in one process.

usage: bench/driven_bench.py WORKER [STEPS]   (run from the source root)

Model: the long run's MLP 16 -> 32 (gelu) -> 4, batch 64, AdamW, bf16 CPU
autocast, a loss scale of 65536 with unscale and inf check, clip_grad_norm 1.
numval's figure is device steps over the device runs' wall seconds (the
result's seconds.device), which include the protocol round trips and the
host's per-step checks (an fp64 and a declared-precision backward per step);
torch's is the plain loop's wall time. Both on one intra-op thread.
"""
import json
import os
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn.functional as F


def plain_torch(steps, B=64, I=16, H=32, C=4):
    torch.set_num_threads(1)
    torch.manual_seed(1)
    ps = [torch.nn.Parameter(torch.randn(I, H) / I ** 0.5), torch.nn.Parameter(torch.zeros(H)),
          torch.nn.Parameter(torch.randn(H, C) / H ** 0.5), torch.nn.Parameter(torch.zeros(C))]
    opt = torch.optim.AdamW(ps, lr=0.01, weight_decay=0)
    scale = torch.tensor(65536.0)
    xs = [torch.randn(B, I) for _ in range(16)]
    ys = [torch.randint(0, C, (B,)) for _ in range(16)]
    t0 = time.perf_counter()
    for t in range(steps):
        x, y = xs[t % 16], ys[t % 16]
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            h = F.gelu(torch.matmul(x, ps[0]) + ps[1])
            loss = F.cross_entropy(torch.matmul(h, ps[2]) + ps[3], y)
        (loss.float() * scale).backward()
        inv = scale.double().reciprocal().float()
        found = False
        for p in ps:
            p.grad.mul_(inv)
            found |= not bool(torch.isfinite(p.grad).all())
        torch.nn.utils.clip_grad_norm_(ps, 1.0)
        if not found:
            opt.step()
    return steps / (time.perf_counter() - t0)


def numval(worker, steps):
    job = {"kind": "longrun", "model": "mlp", "sizes": {"in": 16, "hidden": 32, "classes": 4},
           "data": {"eval_examples": 128}, "steps": steps, "batch": 64, "n_seeds": 3,
           "log_every": steps, "amp": {"dtype": "bf16"}, "deterministic": False,
           "device_training": {"clip_grad_norm": 1.0}}
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    harness = os.path.join(root, "worker", "harness", "torch_harness.py")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "job.json")
        with open(path, "w") as f:
            json.dump(job, f)
        p = subprocess.run([worker, "run", path, "--backend",
                            "exec:/usr/bin/python3 %s --device cpu --threads 1" % harness],
                           capture_output=True, text=True, timeout=3600)
        r = json.loads(p.stdout)
    return 3 * steps / r["seconds"]["device"], r["verdict"]


def main():
    worker = sys.argv[1]
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    load = os.getloadavg()[0]
    t = plain_torch(steps)
    n, verdict = numval(worker, steps)
    print("driven training, MLP 16-32-4, batch 64, AdamW, bf16 autocast, %d steps; load %.1f"
          % (steps, load))
    print("%-44s %10.1f steps/s" % ("plain torch loop (one process)", t))
    print("%-44s %10.1f steps/s  (verdict %s)" % ("numval device-driven via the harness", n,
                                                  verdict))
    print("ratio torch/numval %.1f" % (t / n))


if __name__ == "__main__":
    sys.exit(main())
