#!/usr/bin/python3
"""A transformer forward on emu, layer by layer, next to the same forward in
torch on the CPU (docs/MODEL.md "The PyTorch harness").

The model is suites/model.json's decoder-lm scaled up (4 decoder blocks,
d = 256, 4 heads of 64, SwiGLU width 1024, vocabulary 512, 512 tokens), one
model job in bf16 (fp32 accumulation), greedy decode of 1 token (so 2 forwards
per case: the logits and the decode step). Rows, each one numval-worker run:

- emu eager: every node through emu's op entry, every output captured (the
  layer-by-layer execution the model kind judges);
- emu graph: the whole model in one call of emu's graph entry with capture;
- torch eager / torch script: the harness's graph request (the model as a
  torch module tree, captures through forward hooks), eager and
  TorchScript-scripted.

"device s/forward" is the case's seconds.device over its device_forwards
(wall time inside the backend calls; for torch that includes the pipe
transfers, building the modules and scripting). "torch forward s" is the
module's own forward alone (the harness's NUMVAL_HARNESS_FORWARD_TIMES file:
torch's time for the same forward, no transfers). Torch runs with --threads 1
(the harness default: the worker runs cases in parallel); emu with one case
thread.

usage: bench/model_torch_bench.py [BUILD_DIR] [TOKENS] [--forward-only]
(prints a markdown table; TOKENS default 512: every case also computes the fp64
and the bf16 reference, minutes at 512 tokens).

--forward-only: the forward alone, no model job and no references, through
bench/model_forward_bench (the model kind's eager loop and graph call, the
same seeded weights), 3 forwards per row, the fastest reported; the torch rows
go through the same harness graph request, and their "torch forward s" is
torch's own forward (NUMVAL_HARNESS_FORWARD_TIMES)."""
import copy
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HARNESS = "exec:/usr/bin/python3 %s --device cpu" % os.path.join(ROOT, "worker/harness/torch_harness.py")
FORWARD_ONLY = "--forward-only" in sys.argv
ARGS = [a for a in sys.argv[1:] if a != "--forward-only"]
BUILD = ARGS[0] if ARGS else os.path.join(ROOT, "build")
WORKER = os.path.join(BUILD, "worker", "numval-worker")
T = int(ARGS[1]) if len(ARGS) > 1 else 512
D, H, V, F, L = 256, 4, 512, 1024, 4


def job():
    with open(os.path.join(ROOT, "suites", "model.json")) as f:
        j = copy.deepcopy(next(x for x in json.load(f)["jobs"] if x["name"] == "decoder-lm"))
    m = j["model"]
    shapes = {"ids": [T], "wte": [V, D], "rope_cos": [T, D], "rope_sin": [T, D],
              "rot_half": [D, D], "causal": [H, T, T], "attn_scale": [H, T, T], "g_final": [D],
              "w_unembed": [D, V], "g_attn": [D], "wq": [D, D], "wk": [D, D], "wv": [D, D],
              "wo": [D, D], "g_mlp": [D], "w_gate": [D, F], "w_up": [D, F], "w_down": [F, D]}
    for p in m["inputs"] + m["params"] + m["blocks"]["decoder"]["params"]:
        p["shape"] = shapes[p["name"]]
        init = p.get("init", {})
        if "head_dim" in init:
            init["head_dim"] = D // H
        if "tokens" in init:
            init["tokens"] = V
    m["params"][[p["name"] for p in m["params"]].index("attn_scale")]["init"] = {"value": (D // H) ** -0.5}
    for nd in m["blocks"]["decoder"]["nodes"]:
        if nd["op"] == "split_heads":
            nd["attrs"]["heads"] = H
    m["layers"][1]["repeat"] = L
    j.update({"dtypes": ["bf16"], "samples": 1, "seed": 1, "task": {"type": "lm", "prompt": 4, "decode": 1}})
    j["name"] = "decoder-lm-bench"
    return j


def run(tmp, spec, backend, env=None):
    path, out = os.path.join(tmp, "job.json"), os.path.join(tmp, "out.json")
    with open(path, "w") as f:
        json.dump(spec, f)
    t0 = time.monotonic()
    p = subprocess.run([WORKER, "run", path, "--backend", backend, "--threads", "1", "--output", out],
                       capture_output=True, text=True, env=dict(os.environ, **(env or {})))
    wall = time.monotonic() - t0
    with open(out) as f:
        doc = json.load(f)
    c = doc["cases"][0]
    if c.get("verdict") == "error":
        sys.exit("%s: %s" % (backend, c.get("error")))
    s = c["seconds"]
    return c["verdict"], s["device"] / s["device_forwards"], wall


def forward_only(base):
    """One model_forward_bench process per row: 3 forwards, the fastest."""
    bench = os.path.join(BUILD, "bench", "model_forward_bench")
    rows = []
    with tempfile.TemporaryDirectory(prefix="nv-model-fwd-") as tmp:
        path = os.path.join(tmp, "job.json")
        with open(path, "w") as f:
            json.dump(base, f)
        for name, backend, how in (("emu eager (op by op, every node kept)", "emu", "eager"),
                                   ("emu graph (one call, capture)", "emu", "graph"),
                                   ("torch eager modules (harness)", HARNESS, "graph"),
                                   ("torch script (harness)", HARNESS, "graph:script")):
            times = os.path.join(tmp, "fwd.txt")
            if os.path.exists(times):
                os.unlink(times)
            p = subprocess.run([bench, path, backend, how, "3"], capture_output=True, text=True,
                               env=dict(os.environ, NUMVAL_HARNESS_FORWARD_TIMES=times))
            if p.returncode != 0:
                sys.exit("%s: %s" % (name, p.stderr.strip()))
            dev = min(json.loads(p.stdout)["seconds"])
            fwd = None
            if os.path.exists(times):
                with open(times) as f:
                    fwd = min(float(line.split()[2]) for line in f if line.strip())
            rows.append((name, dev, fwd))
            print("# %s: %.3f s/forward (best of 3)%s" % (
                name, dev, ", torch's own %.3f s" % fwd if fwd is not None else ""), flush=True)
    emu = rows[0][1]
    print("| execution | s/forward (best of 3) | torch forward s | emu eager / this |")
    print("|---|---|---|---|")
    for name, dev, fwd in rows:
        print("| %s | %.3f | %s | %.1f |" % (name, dev, "%.3f" % fwd if fwd is not None else "-",
                                            emu / (fwd if fwd else dev)))
    print("# load average at the end: %s" % " ".join(open("/proc/loadavg").read().split()[:3]))


def main():
    base = job()
    if FORWARD_ONLY:
        print("# forward only (no references); %d decoder blocks, d=%d, %d heads, %d tokens, "
              "vocabulary %d, SwiGLU %d; bf16; load average %s" % (
                  L, D, H, T, V, F, " ".join(open("/proc/loadavg").read().split()[:3])), flush=True)
        return forward_only(base)
    rows = []
    print("# %d decoder blocks, d=%d, %d heads, %d tokens, vocabulary %d, SwiGLU %d; bf16; "
          "load average %s" % (L, D, H, T, V, F, open("/proc/loadavg").read().split()[0]), flush=True)
    with tempfile.TemporaryDirectory(prefix="nv-model-bench-") as tmp:
        for name, backend, extra in (("emu eager (op by op)", "emu", {"execution": "eager"}),
                                     ("emu graph", "emu", {"execution": "graph"}),
                                     ("torch eager modules", HARNESS, {"execution": "graph"}),
                                     ("torch script", HARNESS, {"execution": "graph", "compile": "script"})):
            spec = dict(base, **extra)
            times = os.path.join(tmp, "fwd.txt")
            if os.path.exists(times):
                os.unlink(times)
            verdict, dev, wall = run(tmp, spec, backend, {"NUMVAL_HARNESS_FORWARD_TIMES": times})
            fwd = None
            if os.path.exists(times):
                with open(times) as f:
                    fwd = min(float(line.split()[2]) for line in f if line.strip())
            rows.append((name, verdict, dev, fwd, wall))
            print("# %s: %s, %.3f s/forward, job %.1f s" % (name, verdict, dev, wall), flush=True)
    emu = rows[0][2]
    print("| execution | verdict | device s/forward | torch forward s | emu eager / this | job wall s |")
    print("|---|---|---|---|---|---|")
    for name, verdict, dev, fwd, wall in rows:
        print("| %s | %s | %.3f | %s | %.1f | %.1f |" % (name, verdict, dev,
                                                      "%.3f" % fwd if fwd is not None else "-",
                                                      emu / (fwd if fwd else dev), wall))


if __name__ == "__main__":
    main()
