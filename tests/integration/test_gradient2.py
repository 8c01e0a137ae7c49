#!/usr/bin/env python3
"""Gradient jobs and the device contracts of backend ABI version 2, through the
real numval-worker.

usage: test_gradient2.py NUMVAL_WORKER GELU2_SO INFONLY_SO ABI_V1_SO BADGRAD_SO   (TAP)
- a device whose double backward of gelu is wrong (fault_gelu2) fails the
  "double_backward" check (second_order_mismatch) on every one of 20 seeds,
  while its formula, device and reference second-order checks pass, and its
  other ops pass;
- a version-1 plugin and a harness answering exec protocol 1 run order-2 jobs
  with the double backward "not offered" (nothing fails);
- a device declaring inference_only that computes gradients (fault_infonly),
  or refuses without a message (?silent), fails every case's "contract" check
  (contract_mismatch, field inference_only); one that refuses clearly (emu
  inference_only=on) is refused with the device's own message (exit 2);
- describe's "gradient_dtype": "fp32" on bf16 inputs: fp32 gradients pass,
  bf16-precision values in fp32 fail the fp32 tolerance, bf16 tensors are
  refused as bad_output naming the declaration.
Every result is validated against schema/result.schema.json (and mutated
copies of its cases must be rejected).
"""
import json
import os
import subprocess
import sys
import tempfile

import nvschema

from nvtap import ok, finish

WORKER, GELU2, INFONLY, ABI_V1, BADGRAD = sys.argv[1:6]
WHOLE, CASE = nvschema.validator(), nvschema.validator("gradient_case")
invalid = []  # (what, errors) of results the schema refused


def run(tmp, spec, backend):
    path = os.path.join(tmp, "job.json")
    with open(path, "w") as f:
        json.dump(spec, f)
    p = subprocess.run([WORKER, "run", path, "--backend", backend], capture_output=True,
                       text=True, timeout=300)
    try:
        res = json.loads(p.stdout) if p.stdout.strip() else None
    except ValueError:
        res = None
    if res is not None:
        errs = nvschema.errors(WHOLE, res)
        for c in res.get("cases", []):
            errs += ["mutation accepted: " + what for what, bad in nvschema.mutations(c)
                     if not nvschema.errors(CASE, bad)]
        if errs:
            invalid.append((spec.get("op"), backend, errs))
    return p.returncode, res, p.stderr


def grad(op, dtypes=("fp32",), shape=(64,), **kw):
    return dict({"kind": "gradient", "op": op, "dtypes": list(dtypes), "shapes": [list(shape)],
                 "inputs": ["normal"], "seed": 1}, **kw)


# A harness that answers exec protocol 1: tanh forward and backward in fp32
# (struct, no numpy), never a double_backward.
V1_HARNESS = r'''
import json, math, struct, sys
inp, out = sys.stdin.buffer, sys.stdout.buffer
def send(h, payload=b""):
    out.write((json.dumps(h) + "\n").encode() + payload); out.flush()
json.loads(inp.readline())
send({"type": "hello", "protocol": 1, "describe": {"device": "v1-tanh", "saved": {},
      "inference_only": False, "nondeterministic_ops": [], "gradient_dtype": "input"}})
def f32(raw):
    return list(struct.unpack("<%df" % (len(raw) // 4), raw))
def tensor(name, vals, shape):
    raw = struct.pack("<%df" % len(vals), *vals)
    return {"name": name, "dtype": "fp32", "shape": shape, "nbytes": len(raw)}, raw
while True:
    line = inp.readline()
    if not line:
        break
    msg = json.loads(line)
    if msg["type"] == "bye":
        break
    ts = [f32(inp.read(t["nbytes"])) for t in msg.get("tensors", [])]
    shape = msg["tensors"][0]["shape"] if msg.get("tensors") else []
    if msg["type"] == "forward" and msg["op"] == "tanh":
        d, raw = tensor("output:0", [math.tanh(x) for x in ts[0]], shape)
    elif msg["type"] == "backward" and msg["op"] == "tanh":
        d, raw = tensor("grad_input:0", [g * (1 - math.tanh(x) ** 2)
                                         for x, g in zip(ts[0], ts[-1])], shape)
    else:
        send({"type": "result", "id": msg["id"], "status": "error", "code": "unsupported",
              "message": "v1 harness: no %s of %s" % (msg["type"], msg.get("op"))})
        continue
    send({"type": "result", "id": msg["id"], "status": "ok", "fallback": False,
          "tensors": [d]}, raw)
'''


def gelu2_fault(tmp):
    caught = 0
    bad = []
    for seed in range(1, 21):
        rc, r, err = run(tmp, grad("gelu", shape=(256,), seed=seed, order=2, mode="fast"),
                         "plugin:" + GELU2)
        c = (r or {}).get("cases", [{}])[0]
        dbl = c.get("checks", {}).get("double_backward", {}).get("x", {})
        first = (dbl.get("first_mismatches") or [{}])[0]
        if (rc == 1 and c.get("failed_checks") == ["double_backward"]
                and c.get("failure_class") == "second_order_mismatch"
                and dbl.get("tolerance", {}).get("metric") == "second_order_bound"
                and "expected" in first and "allowed" in first):
            caught += 1
        else:
            bad.append({"seed": seed, "rc": rc, "case": c, "err": err[-300:]})
    ok(caught == 20, "fault_gelu2: a wrong gelu'' fails double_backward on %d of 20 seeds "
       "(formula, device and reference second order pass)" % caught, json.dumps(bad)[:2000])
    rc, r, err = run(tmp, grad("tanh", order=2), "plugin:" + GELU2)
    ok(rc == 0 and r["verdict"] == "passed", "fault_gelu2: tanh's double backward passes", err)


def not_offered(tmp):
    rc, r, err = run(tmp, grad("gelu", order=2), "plugin:" + ABI_V1)
    c = (r or {}).get("cases", [{}])[0]
    so = c.get("checks", {}).get("second_order", {})
    ok(rc == 0 and c.get("verdict") == "passed" and "double_backward" not in c.get("checks", {})
       and so.get("device_double_backward", "").startswith("not offered")
       and "version 1" in so.get("device_double_backward", ""),
       "a version-1 plugin: order 2 passes, double backward not offered: %s"
       % so.get("device_double_backward"), err + json.dumps(c)[:800])
    path = os.path.join(tmp, "v1_harness.py")
    with open(path, "w") as f:
        f.write(V1_HARNESS)
    rc, r, err = run(tmp, grad("tanh", shape=(32,), order=2), "exec:%s %s" % (sys.executable, path))
    c = (r or {}).get("cases", [{}])[0]
    offer = c.get("checks", {}).get("second_order", {}).get("device_double_backward", "")
    ok(rc == 0 and c.get("verdict") == "passed" and offer.startswith("not offered")
       and "protocol 1" in offer,
       "a harness answering exec protocol 1: order 2 passes, double backward %r" % offer,
       err + json.dumps(c)[:800])


def inference_only(tmp):
    for opt, observed in (("", "computed gradients"), ("?silent", "without a message")):
        rc, r, err = run(tmp, grad("tanh", dtypes=["fp32", "bf16"], order=2),
                         "plugin:" + INFONLY + opt)
        cases = (r or {}).get("cases", [])
        con = [c.get("checks", {}).get("contract", {}) for c in cases]
        ok(rc == 1 and len(cases) == 2 and all(c.get("failed_check") == "contract"
                                               and c.get("failure_class") == "contract_mismatch"
                                               for c in cases)
           and all(k.get("field") == "inference_only" and k.get("passed") is False
                   and observed in k.get("observed", "") for k in con),
           "fault_infonly%s: declares inference_only, backward %s: contract_mismatch on "
           "every case" % (opt, observed), err + json.dumps(cases)[:1200])
    rc, r, err = run(tmp, grad("tanh"), "emu:inference_only=on")
    ok(rc == 2 and "refuses backward as it declares" in err and "NV_E_UNSUPPORTED" in err
       and "inference_only=on" in err,
       "emu inference_only=on refuses backward clearly: the job is refused with its words",
       err)


def gradient_dtype(tmp):
    job = grad("layer_norm", dtypes=["bf16"], shape=(8, 64))
    rc, r, err = run(tmp, job, "plugin:" + BADGRAD + "?grad_fp32")
    dev = (r or {}).get("cases", [{}])[0].get("checks", {}).get("device", {}).get("x", {})
    ok(rc == 0 and dev.get("dtype") == "fp32" and dev.get("gradient_dtype") == "fp32",
       "gradient_dtype fp32: bf16 layer_norm's fp32 gradients pass, judged in fp32",
       err + json.dumps(dev)[:600])
    rc, r, err = run(tmp, job, "plugin:" + BADGRAD + "?grad_fp32_coarse")
    c = (r or {}).get("cases", [{}])[0]
    ok(rc == 1 and c.get("failure_class") == "gradient_mismatch",
       "gradient_dtype fp32 with bf16-precision values: fails the fp32 tolerance",
       err + json.dumps(c)[:600])
    rc, r, err = run(tmp, job, "plugin:" + BADGRAD + "?grad_fp32_lie")
    c = (r or {}).get("cases", [{}])[0]
    e = c.get("checks", {}).get("device", {}).get("x", {}).get("error", "")
    ok(rc == 1 and c.get("failure_class") == "bad_output" and "'fp32'" in e and "'bf16'" in e,
       "gradient_dtype fp32 but bf16 tensors: bad_output naming both: %s" % e,
       err + json.dumps(c)[:600])


def main():
    with tempfile.TemporaryDirectory(prefix="numval-grad2-") as tmp:
        gelu2_fault(tmp)
        not_offered(tmp)
        inference_only(tmp)
        gradient_dtype(tmp)
    ok(not invalid, "every result validates against schema/result.schema.json",
       json.dumps(invalid)[:3000])
    return finish()


if __name__ == "__main__":
    sys.exit(main())
