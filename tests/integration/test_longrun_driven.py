#!/usr/bin/env python3
"""Device-driven training (docs/JOBS.md "Device-driven training") through the
real worker: the device runs each whole step (autocast forward, backward, grad
scaler, clipping, optimizer) and numval checks every step against the
reference step from the same state.

usage: test_longrun_driven.py WORKER SOURCE_ROOT emu|torch   (exit 77: torch absent)

Job: MLP 8 -> 16 -> 4, batch 16, 12 AdamW steps, bf16 autocast, dropout 0.1,
clip_grad_norm 1, checkpoint after 6 steps. loss_weight 64 with init scale
1.3e36 and growth every 2 steps drives the scaler into overflow within a few
steps, so growth, backoff and skipped steps all happen (the test asserts they
did). Shown, for emu and for the PyTorch harness (CPU, torch 1.13):
- the correct device passes, its autocast read-back matches the AMP policy,
  the checkpoint restored in a fresh context/process repeats the
  uninterrupted run bit for bit;
- each fault is caught by its own check: not unscaling before clipping ->
  "unscale", stepping the optimizer on a skipped step ->
  "skipped_step_updated", a checkpoint without the scaler state ->
  "checkpoint_scaler", without the RNG state -> "checkpoint_rng";
- SGD passes too (emu); device_training on the transformer is refused.
"""
import json
import os
import subprocess
import sys
import tempfile

JOB = {"kind": "longrun", "model": "mlp", "sizes": {"in": 8, "hidden": 16, "classes": 4},
       "data": {"eval_examples": 128}, "steps": 12, "batch": 16, "n_seeds": 3,
       "log_every": 4, "amp": {"dtype": "bf16"}, "loss_weight": 64,
       "grad_scaler": {"init_scale": 1.3e36, "growth_interval": 2},
       "device_training": {"clip_grad_norm": 1.0, "dropout": 0.1, "checkpoint_at": 6}}

n_fail = 0


def check(cond, what):
    global n_fail
    print(("ok - " if cond else "not ok - ") + what, flush=True)
    n_fail += 0 if cond else 1


def run(worker, spec, backend, tmp):
    path = os.path.join(tmp, "job.json")
    with open(path, "w") as f:
        json.dump(spec, f)
    p = subprocess.run([worker, "run", path, "--backend", backend, "--threads", "2"],
                       capture_output=True, text=True, timeout=600)
    res = json.loads(p.stdout) if p.stdout.strip() else None
    return p.returncode, res, p.stderr


def main():
    worker, root, which = sys.argv[1], sys.argv[2], sys.argv[3]
    if which == "torch":
        ok = subprocess.run(["/usr/bin/python3", "-c", "import torch, numpy"],
                            capture_output=True).returncode == 0
        if not ok:
            print("1..0 # SKIP /usr/bin/python3 cannot import torch and numpy")
            return 77
        harness = os.path.join(root, "worker", "harness", "torch_harness.py")
        base = "exec:/usr/bin/python3 %s --device cpu" % harness
        faults = {"skip_unscale": (base + " --train-fault skip_unscale", "unscale"),
                  "update_skipped": (base + " --train-fault update_skipped",
                                     "skipped_step_updated"),
                  "drop_scaler": (base + " --train-fault drop_scaler", "checkpoint_scaler"),
                  "drop_rng": (base + " --train-fault drop_rng", "checkpoint_rng")}
    else:
        base = "emu"
        faults = {"skip_unscale": ("emu:train_fault=skip_unscale", "unscale"),
                  "update_skipped": ("emu:train_fault=update_skipped", "skipped_step_updated"),
                  "drop_scaler": ("emu:ckpt_drop=scaler", "checkpoint_scaler"),
                  "drop_rng": ("emu:ckpt_drop=rng", "checkpoint_rng")}
    with tempfile.TemporaryDirectory(prefix="numval-driven-") as tmp:
        rc, r, err = run(worker, JOB, base, tmp)
        acc = r["acceptance"] if r else {}
        ds = acc.get("device_steps") or {}
        check(rc == 0 and r["verdict"] == "passed",
              "%s: device-driven AdamW bf16 passes: %s" % (which, acc.get("reason", err)))
        check(ds.get("failure") is None and ds.get("checked_steps", 0) > 0,
              "%s: every step checked (%s finite steps), no failure" %
              (which, ds.get("checked_steps")))
        check(ds.get("scale_growths", 0) > 0 and ds.get("scale_backoffs", 0) > 0 and
              ds.get("skipped_steps", 0) > 0,
              "%s: the scaler grew %s times, backed off %s times, skipped %s steps, each as "
              "GradScaler's schedule says" % (which, ds.get("scale_growths"),
                                             ds.get("scale_backoffs"), ds.get("skipped_steps")))
        ops = ds.get("autocast") or []
        mm = [o for o in ops if o["op"] == "matmul"]
        check(len(mm) == 2 and all(o["inputs"] == ["bf16", "bf16"] and o["output"] == "bf16"
                                   for o in mm) and
              any(o["op"] == "cross_entropy" and o["output"] == "fp32" for o in ops),
              "%s: autocast read back: matmul ran in bf16, cross_entropy in fp32: %s"
              % (which, json.dumps(ops)))
        ck = ds.get("checkpoint") or {}
        check(ck.get("judged") is True and ck.get("bit_identical") is True,
              "%s: checkpoint after 6 steps, restored fresh, bit-identical continuation"
              % which)
        mw = acc.get("matched_weights") or {}
        check(mw.get("passed") is True and mw.get("checked_steps", 0) > 0,
              "%s: the device's gradients at logged steps within rule 5's allowance" % which)
        for name, (backend, cls) in faults.items():
            rc, r, err = run(worker, JOB, backend, tmp)
            acc = r["acceptance"] if r else {}
            check(rc == 1 and acc.get("failure_class") == cls,
                  "%s: fault %s caught as %s: %s" % (which, name, cls, acc.get("reason", err)))
        if which == "emu":
            sgd = dict(JOB, optimizer={"name": "sgd", "lr": 0.05, "weight_decay": 0.01},
                       loss_weight=1, grad_scaler={"init_scale": 65536})
            rc, r, err = run(worker, sgd, "emu", tmp)
            acc = r["acceptance"] if r else {}
            check(rc == 0 and acc["device_steps"]["checked_steps"] == 36,
                  "emu: SGD with momentum and weight decay passes, 36 steps checked: %s"
                  % acc.get("reason", err))
            bad = dict(JOB, model="transformer")
            rc, r, err = run(worker, bad, "emu", tmp)
            check(rc == 2 and "device_training" in err and "mlp" in err,
                  "device_training on the transformer is refused naming the field: %s"
                  % err.strip()[:200])
    return 1 if n_fail else 0


if __name__ == "__main__":
    sys.exit(main())
