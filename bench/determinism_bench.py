#!/usr/bin/python3
"""The cost of deterministic mode in training: steps/s of the PyTorch
harness's device-driven steps (numval-worker run, "device_training") with the
job's "deterministic" false and true, beside a plain torch loop of the same
model with torch.use_deterministic_algorithms(False) and (True), all in one
run (docs/JOBS.md "The deterministic flag, per job").

usage: bench/determinism_bench.py WORKER [STEPS]   (run from the source root)

Models: the long run's MLP 16 -> 32 (gelu) -> 4 and its CNN (1x8x8 images,
4 and 8 channels, 4 classes), batch 64, AdamW, bf16 CPU autocast, a loss
scale of 65536 with unscale and inf check, clip_grad_norm 1. numval's figure
is device steps over the device runs' wall seconds (result seconds.device:
protocol round trips and the host's per-step checks included; the
deterministic job's repeat run of rule 4 is not in it). The plain loop: best
of 3 runs per mode, the modes alternated. One intra-op thread everywhere.
"""
import json
import os
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn.functional as F

B, C = 64, 4


def params(model):
    g = torch.Generator().manual_seed(1)
    if model == "mlp":
        shapes = [(16, 32), (32,), (32, C), (C,)]
    else:
        shapes = [(4, 1, 3, 3), (8, 4, 3, 3), (8 * 2 * 2, C), (C,)]
    return [torch.nn.Parameter(torch.randn(s, generator=g) * 0.3) for s in shapes]


def forward(model, ps, x):
    if model == "mlp":
        h = F.gelu(torch.matmul(x, ps[0]) + ps[1])
        return torch.matmul(h, ps[2]) + ps[3]
    h = x
    for w in ps[:2]:
        h = F.max_pool2d(F.relu(F.conv2d(h, w, padding=1)), 2)
    return torch.matmul(torch.flatten(h, 1), ps[2]) + ps[3]


def plain_torch(model, steps, deterministic):
    torch.use_deterministic_algorithms(deterministic)
    torch.manual_seed(1)
    ps = params(model)
    opt = torch.optim.AdamW(ps, lr=0.01, weight_decay=0)
    scale = torch.tensor(65536.0)
    shape = (B, 16) if model == "mlp" else (B, 1, 8, 8)
    xs = [torch.randn(shape) for _ in range(16)]
    ys = [torch.randint(0, C, (B,)) for _ in range(16)]
    t0 = time.perf_counter()
    for t in range(steps):
        x, y = xs[t % 16], ys[t % 16]
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = F.cross_entropy(forward(model, ps, x), y)
        (loss.float() * scale).backward()
        inv = scale.double().reciprocal().float()
        found = False
        for p in ps:
            p.grad.mul_(inv)
            found |= not bool(torch.isfinite(p.grad).all())
        torch.nn.utils.clip_grad_norm_(ps, 1.0)
        if not found:
            opt.step()
    rate = steps / (time.perf_counter() - t0)
    torch.use_deterministic_algorithms(False)
    return rate


def numval(worker, model, steps, deterministic):
    sizes = {"in": 16, "hidden": 32, "classes": C} if model == "mlp" else \
        {"in": 8, "hidden": 4, "classes": C}
    job = {"kind": "longrun", "model": model, "sizes": sizes, "data": {"eval_examples": 128},
           "steps": steps, "batch": B, "n_seeds": 3, "log_every": steps,
           "amp": {"dtype": "bf16"}, "deterministic": deterministic,
           "device_training": {"clip_grad_norm": 1.0}}
    if model == "cnn":
        job["activation"] = "relu"
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
    ran = r["acceptance"].get("device_steps", {}).get("deterministic", {})
    return 3 * steps / r["seconds"]["device"], r["verdict"], ran.get("ran_deterministic")


def main():
    worker = sys.argv[1]
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 100
    torch.set_num_threads(1)
    print("deterministic mode, %d steps, batch %d, AdamW, bf16 autocast; torch %s; load %.1f"
          % (steps, B, torch.__version__, os.getloadavg()[0]))
    print("%-5s %-34s %14s %14s %9s" % ("model", "side", "nondet steps/s", "det steps/s",
                                         "det/nondet"))
    for model in ("mlp", "cnn"):
        best = {False: 0.0, True: 0.0}
        for _ in range(3):
            for det in (False, True):
                best[det] = max(best[det], plain_torch(model, steps, det))
        print("%-5s %-34s %14.1f %14.1f %9.3f" % (model, "plain torch loop (best of 3)",
                                                  best[False], best[True],
                                                  best[True] / best[False]))
        n0, v0, r0 = numval(worker, model, steps, False)
        n1, v1, r1 = numval(worker, model, steps, True)
        print("%-5s %-34s %14.1f %14.1f %9.3f   (verdicts %s / %s; ran deterministic %s / %s)"
              % (model, "numval device-driven via harness", n0, n1, n1 / n0, v0, v1, r0, r1))
    print("load at the end %.1f" % os.getloadavg()[0])


if __name__ == "__main__":
    sys.exit(main())
