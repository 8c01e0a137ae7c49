#!/usr/bin/env python3
"""The long run's CNN (the model kind's small CNN classifier: conv1, conv2,
head; docs/JOBS.md "Long-run jobs") and emu's numerical knobs inside its
device-driven steps, through the real worker.

usage: test_longrun_cnn.py WORKER emu|torch SOURCE_ROOT   (exit 77: torch absent)

emu:
- the CNN trained by the device's own steps (bf16 autocast, AdamW, clipping,
  a grad scaler driven into overflow and back, checkpoint and restore in a
  fresh context) passes; its autocast read-back has conv2d in bf16;
- with every op output held in fp8 e5m2 (emu:storage=fp8_e5m2) the same CNN
  fails rule 5 (gradient_error), naming a layer of the model and step 0,
  device-driven and op by op;
- the MLP's device-driven step honours storage= and accum= too:
  storage=fp8_e5m2 and accum=fp8_e5m2 fail gradient_error at step 0 in a
  named layer (before, its gradients equalled the correct mode's);
- the result follows the result schema (model "cnn");
- a CNN with dropout, or an image side that is not a multiple of 4, is
  refused naming the field.
torch: the CNN's device-driven steps through the PyTorch harness (CPU bf16
autocast, AdamW, its grad scaler) pass, checkpoint bit-identical.
"""
import json
import os
import subprocess
import sys
import tempfile

import nvschema

CNN = {"kind": "longrun", "model": "cnn", "activation": "relu",
       "sizes": {"in": 8, "hidden": 4, "classes": 4}, "data": {"eval_examples": 128},
       "steps": 12, "batch": 16, "n_seeds": 3, "log_every": 4, "amp": {"dtype": "bf16"},
       "loss_weight": 64, "grad_scaler": {"init_scale": 1.3e36, "growth_interval": 2},
       "device_training": {"clip_grad_norm": 1.0, "checkpoint_at": 6}}
# fp8 e5m2 holds at most 57344: a scaled loss would overflow every step, so the
# storage jobs train unscaled (the verdict is then rule 5's, not "nonfinite")
CNN_UNSCALED = dict(CNN, loss_weight=1, grad_scaler={"enabled": False})
MLP = {"kind": "longrun", "model": "mlp", "sizes": {"in": 8, "hidden": 16, "classes": 4},
       "data": {"eval_examples": 128}, "steps": 12, "batch": 16, "n_seeds": 3,
       "log_every": 4, "amp": {"dtype": "bf16"}, "grad_scaler": {"enabled": False},
       "device_training": {"clip_grad_norm": 1.0, "dropout": 0.1}}
CNN_LAYERS = ("conv1", "conv2", "head")

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
                       capture_output=True, text=True, timeout=900)
    res = json.loads(p.stdout) if p.stdout.strip() else None
    return p.returncode, res, p.stderr


def passes(worker, backend, tmp, which):
    rc, r, err = run(worker, CNN, backend, tmp)
    acc = r["acceptance"] if r else {}
    ds = acc.get("device_steps") or {}
    check(rc == 0 and r["verdict"] == "passed" and r["model"] == "cnn",
          "%s: the CNN's device-driven steps pass: %s" % (which, acc.get("reason", err)))
    bad = nvschema.errors(nvschema.validator("longrun_result_fields"), r) if r else ["no result"]
    check(not bad, "%s: the result follows schema/result.schema.json: %s" % (which, bad))
    check(ds.get("failure") is None and ds.get("checked_steps", 0) > 0 and
          ds.get("scale_growths", 0) > 0 and ds.get("skipped_steps", 0) > 0,
          "%s: %s steps checked, the scaler grew %s times and skipped %s steps" %
          (which, ds.get("checked_steps"), ds.get("scale_growths"), ds.get("skipped_steps")))
    ops = ds.get("autocast") or []
    conv = [o for o in ops if o["op"] == "conv2d"]
    check(len(conv) == 2 and all(o["inputs"] == ["bf16", "bf16"] and o["output"] == "bf16"
                                 for o in conv),
          "%s: autocast read back: both conv2d in bf16: %s" % (which, json.dumps(ops)[:300]))
    ck = ds.get("checkpoint") or {}
    check(ck.get("bit_identical") is True, "%s: checkpoint after 6 steps, restored fresh, "
          "bit-identical continuation" % which)
    layers = [g["layer"] for g in (acc.get("matched_weights") or {}).get("gradient", [])]
    check(tuple(layers) == CNN_LAYERS and acc["matched_weights"]["passed"] is True,
          "%s: rule 5 judged the layers %s and passed" % (which, layers))


def caught(worker, spec, backend, tmp, layers, what):
    rc, r, err = run(worker, spec, backend, tmp)
    acc = r["acceptance"] if r else {}
    grads = (acc.get("matched_weights") or {}).get("gradient", [])
    bad = [g for g in grads if not g["passed"]]
    first = bad[0]["first_beyond"] if bad else None
    check(rc == 1 and acc.get("failure_class") == "gradient_error" and bad and
          bad[0]["layer"] in layers and first and first["step"] == 0 and
          ("layer '%s'" % bad[0]["layer"]) in acc.get("reason", ""),
          "%s: gradient_error naming layer, step and statistic: %s" %
          (what, acc.get("reason", err)[:300]))


def main():
    worker, which, root = sys.argv[1], sys.argv[2], sys.argv[3]
    with tempfile.TemporaryDirectory(prefix="numval-cnn-") as tmp:
        if which == "torch":
            ok = subprocess.run(["/usr/bin/python3", "-c", "import torch, numpy"],
                                capture_output=True).returncode == 0
            if not ok:
                print("1..0 # SKIP /usr/bin/python3 cannot import torch and numpy")
                return 77
            harness = os.path.join(root, "worker", "harness", "torch_harness.py")
            passes(worker, "exec:/usr/bin/python3 %s --device cpu" % harness, tmp, "torch")
            return 1 if n_fail else 0
        passes(worker, "emu", tmp, "emu")
        caught(worker, CNN_UNSCALED, "emu:storage=fp8_e5m2", tmp, CNN_LAYERS,
               "emu storage=fp8_e5m2, CNN device-driven")
        op_by_op = {k: v for k, v in CNN_UNSCALED.items() if k != "device_training"}
        caught(worker, op_by_op, "emu:storage=fp8_e5m2", tmp, CNN_LAYERS,
               "emu storage=fp8_e5m2, CNN op by op")
        rc, r, err = run(worker, MLP, "emu", tmp)
        check(rc == 0, "emu: the MLP's device-driven steps pass: %s"
              % (r["acceptance"]["reason"] if r else err))
        for knob in ("storage=fp8_e5m2", "accum=fp8_e5m2"):
            caught(worker, MLP, "emu:" + knob, tmp, ("fc1", "fc2"),
                   "emu %s inside the MLP's device-driven step" % knob)
        for bad, ptr in ((dict(CNN, device_training={"dropout": 0.1}),
                          "/device_training/dropout"),
                         (dict(CNN, sizes={"in": 6}), "/sizes/in")):
            rc, r, err = run(worker, bad, "emu", tmp)
            check(rc == 2 and ptr in err, "refused naming %s: %s" % (ptr, err.strip()[:200]))
    return 1 if n_fail else 0


if __name__ == "__main__":
    sys.exit(main())
