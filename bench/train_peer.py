#!/usr/bin/python3
"""Long-run training speed: the same MLP (in -> hidden, gelu -> classes,
cross entropy, AdamW), sizes and batch trained by torch on the CPU, side by side
with numval's bench/train_bench in the same run. Per step both sides draw a fresh
batch x ~ N(0, 1) and sample labels from a fixed tanh teacher network, then run
forward, backward and the optimizer step. Process CPU time, best of 3.
Run with /usr/bin/python3 (Debian's python3-torch):
    /usr/bin/python3 bench/train_peer.py BUILD/bench/train_bench [IN HIDDEN CLASSES BATCH STEPS]
"""
import json
import os
import platform
import subprocess
import sys
import time

import torch


def torch_steps(inp, hid, cls, batch, steps):
    torch.manual_seed(1)
    torch.set_num_threads(1)
    t1 = torch.randn(32, inp) * 2 / inp ** 0.5
    t2 = torch.randn(cls, 32) * 3 / 32 ** 0.5
    model = torch.nn.Sequential(torch.nn.Linear(inp, hid), torch.nn.GELU(),
                                torch.nn.Linear(hid, cls))
    opt = torch.optim.AdamW(model.parameters(), lr=0.01, weight_decay=0.0)
    best = 1e30
    for _ in range(3):
        t0 = time.process_time()
        for _ in range(steps):
            x = torch.randn(batch, inp)
            with torch.no_grad():
                p = torch.softmax(torch.tanh(x @ t1.T) @ t2.T, dim=1)
                y = torch.multinomial(p, 1).squeeze(1)
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        best = min(best, time.process_time() - t0)
    return best


def main():
    bench = sys.argv[1]
    args = [int(a) for a in sys.argv[2:7]] if len(sys.argv) >= 7 else [16, 32, 4, 64, 200]
    out = subprocess.run([bench] + [str(a) for a in args], capture_output=True, text=True,
                         check=True).stdout
    rows = [json.loads(l) for l in out.splitlines()]
    t = torch_steps(*args)
    rows.append({"impl": "torch %s" % torch.__version__, "mode": "fp32 cpu 1 thread",
                 "cpu_s": t, "steps_per_s": args[4] / t})
    ts = args[4] / t
    print("machine: %s, %s, %s; %s UTC, load average %.1f %.1f %.1f"
          % (platform.node(), platform.processor() or platform.machine(),
             platform.python_version(), time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
             *os.getloadavg()))
    print("MLP %d -> %d (gelu) -> %d, batch %d, %d AdamW steps, best of 3, process CPU time"
          % tuple(args))
    print("| implementation | mode | steps/s | vs torch |")
    print("|---|---|---:|---:|")
    for r in rows:
        print("| %s | %s | %.0f | %.2fx |" % (r["impl"], r["mode"], r["steps_per_s"],
                                            r["steps_per_s"] / ts))


if __name__ == "__main__":
    main()
